"""``pricestream autoscale``: the forecasting autoscaler (``infra.autoscale_control``) as a command."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from pricestream.commands.common import err, fail, out


def _pairs(values: list[str], option: str) -> dict[str, list[str]]:
    pairs: dict[str, list[str]] = {}
    for item in (v for value in values for v in value.split(",") if v.strip()):
        name, sep, value = item.strip().partition("=")
        if not sep or not name or not value:
            fail(f"{option}: got {item!r}, expected TIER=VALUE (e.g. light=http://10.0.0.5:8000/metrics)")
        pairs.setdefault(name, []).append(value)
    return pairs


def autoscale(
    target: Annotated[list[str], typer.Option(
        "--target", envvar="PRICESTREAM_AUTOSCALE_TARGETS",
        help="TIER=URL of a pod's /metrics (repeat, or comma-separate, for every pod of a tier)")],
    interval: Annotated[float, typer.Option(envvar="PRICESTREAM_AUTOSCALE_INTERVAL_S", min=0.05,
                                            help="seconds between two steps (the forecaster's step: a minute)")] = 60.0,
    steps: Annotated[int, typer.Option(envvar="PRICESTREAM_AUTOSCALE_STEPS", min=0, help="0: run until stopped")] = 0,
    apply: Annotated[bool, typer.Option(envvar="PRICESTREAM_AUTOSCALE_APPLY",
                                        help="scale the Deployments through the Kubernetes API")] = False,
    namespace: Annotated[str, typer.Option(envvar="PRICESTREAM_K8S_NAMESPACE")] = "pricestream",
    replicas: Annotated[list[str] | None, typer.Option(
        "--replicas", envvar="PRICESTREAM_AUTOSCALE_REPLICAS", help="TIER=N running now (print mode)")] = None,
    policies: Annotated[Path | None, typer.Option(envvar="PRICESTREAM_AUTOSCALE_POLICIES",
                                                  help="YAML list of tier policies (default: infra/k8s's tiers)")]
    = None,
) -> None:
    """Read request rate and consumer lag, forecast the next 5 minutes, scale out / in / hold each tier, say why.

    Scale out when the forecast exceeds 1.5x the current load (or the load already needs more
    replicas), in when the load is under 30% of capacity, never below N+1, the heavy tier fixed at
    two. Without ``--apply`` the decisions are printed and the command tracks the replica counts.
    """
    from infra.autoscale_control import DEFAULT_POLICIES, Controller, KubeScaler, ScaleError
    from infra.autoscaler import Decision, TierPolicy

    known = {p.name: p for p in DEFAULT_POLICIES}
    if policies is not None:
        import yaml

        try:
            rows = yaml.safe_load(policies.read_text())
            known = {p.name: p for p in (TierPolicy.model_validate(row) for row in rows)}
        except (OSError, ValueError, TypeError, yaml.YAMLError) as exc:
            fail(f"--policies {policies}: {exc}")
    urls = _pairs(target, "--target")
    unknown = sorted(set(urls) - set(known))
    if unknown:
        fail(f"--target: tiers {unknown} unknown, expected some of {sorted(known)}")
    counts = {name: int(v[-1]) for name, v in _pairs(replicas or [], "--replicas").items() if v[-1].isdigit()}
    try:
        scaler = KubeScaler(namespace) if apply else None
    except Exception as exc:  # noqa: BLE001 - no cluster config of any kind: say so, do not trace
        fail(f"--apply: cannot reach the Kubernetes API ({type(exc).__name__}: {exc})")
    controller = Controller([(known[name], u) for name, u in urls.items()], scaler=scaler, replicas=counts)
    mode = f"applying to namespace {namespace}" if apply else "print only"
    err.print(f"autoscaling {sorted(urls)} every {interval:g} s ({mode})")
    while steps == 0 or controller.steps < steps:
        started = time.monotonic()
        try:
            decisions = controller.step()
        except ScaleError as exc:
            fail(str(exc))
        for d in decisions:
            if isinstance(d, Decision):
                out.print(f"{d.tier}: {d.action} {d.current} -> {d.desired} (load {d.load:.1f} req/s, "
                          f"forecast peak {d.forecast_peak:.1f}): {d.reason}", soft_wrap=True)
            else:
                out.print(d, soft_wrap=True)
        if steps == 0 or controller.steps < steps:
            time.sleep(max(0.0, interval - (time.monotonic() - started)))
