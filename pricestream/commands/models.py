"""``pricestream models ...`` (the registry) and ``pricestream rollout ...`` (progressive delivery)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import numpy as np
import typer

from pricestream.commands.common import err, fail, kv_table, new_app, out, settings, table

if TYPE_CHECKING:
    from delivery import Evidence, RolloutController
    from feedback.registry import ModelRegistry

models_app = new_app("The model registry: versions, promotion, rollback.")
rollout_app = new_app("Progressive delivery of a model version: shadow, canary, blend, full.")

_TIERS = ("light", "heavy")
_SHOWN_METRICS = ("holdout_auc", "holdout_logloss", "auc", "logloss")


def _registry() -> ModelRegistry:
    from pricestream.control import open_registry

    # with PRICESTREAM_CONTROL_PLANE=kafka every change is published; the time is when the broker acknowledged it
    return open_registry(settings(), on_published=lambda v: out.print(
        f"registry state: published as control v{v} at {datetime.now(tz=UTC).isoformat()}"))


def _published(what: str) -> None:
    """Publish the rollout state after a change (Kafka control plane), and say which version it is."""
    from pricestream.control import publish_rollout

    state = _controller().status()
    version = publish_rollout(settings(), state, _registry())
    if version is not None:
        out.print(f"{what}: published as control v{version} at {datetime.now(tz=UTC).isoformat()}")


@models_app.command("list")
def models_list(
    tier: Annotated[str | None, typer.Option(envvar="PRICESTREAM_TIER", help="light or heavy")] = None,
) -> None:
    """Registered versions, oldest first (``*`` marks the live one of its tier)."""
    registry = _registry()
    entries = registry.list(tier)
    if not entries:
        out.print(f"no models registered under {registry.root}")
        return
    live = {t: (e.version if (e := registry.current(t)) else None) for t in _TIERS}
    rows = []
    for e in sorted(entries, key=lambda e: e.created_at):
        metric = next((f"{k}={e.metrics[k]:.4g}" for k in _SHOWN_METRICS if isinstance(e.metrics.get(k), float)), "-")
        mark = "*" if live.get(e.tier) == e.version else ""
        rows.append((f"{mark}{e.version}", e.tier, e.status, e.parent, e.snapshot_id, metric, e.created_at))
    out.print(table(("version", "tier", "status", "parent", "snapshot", "metric", "created"), rows))
    out.print(f"generation {registry.generation}; registry {registry.root}")


@models_app.command("show")
def models_show(version: Annotated[str, typer.Argument(help="model version")]) -> None:
    """One version: lineage, data range, ONNX hashes, metrics."""
    e = _registry().show(version)
    rows: list[tuple[str, object]] = [
        ("version", e.version), ("tier", e.tier), ("status", e.status), ("path", e.path), ("parent", e.parent),
        ("snapshot", e.snapshot_id), ("data range", " .. ".join(e.data_range) if e.data_range else None),
        ("created", e.created_at),
    ]
    rows += [(f"onnx {name}", sha) for name, sha in e.onnx_sha256.items()]
    rows += [(f"metric {k}", v) for k, v in sorted(e.metrics.items())]
    out.print(kv_table(rows, title=f"model {e.version}"))


@models_app.command("promote")
def models_promote(version: Annotated[str, typer.Argument(help="model version")]) -> None:
    """Make a version the live model of its tier (the previous one stays as rollback target)."""
    registry = _registry()
    e = registry.promote(version)
    out.print(f"{e.tier}: {e.version} is live (generation {registry.generation})")


@models_app.command("rollback")
def models_rollback(tier: Annotated[str, typer.Argument(help="light or heavy")]) -> None:
    """Retire the live model of a tier and bring back the one before it."""
    if tier not in _TIERS:
        fail(f"tier: got {tier!r}, expected one of {list(_TIERS)}")
    registry = _registry()
    e = registry.rollback(tier)
    out.print(f"{tier}: rolled back to {e.version} (generation {registry.generation})")


@models_app.command("publish")
def models_publish() -> None:
    """Publish the registry's and the rollout's state on the control topic now (seed or repair replicas).

    Needs ``PRICESTREAM_CONTROL_PLANE=kafka``; the serving replicas converge on what this sends.
    """
    from pricestream.control import enabled, publish_registry

    if not enabled(settings()):
        fail(f"PRICESTREAM_CONTROL_PLANE: got {settings().control_plane!r}, expected 'kafka' to publish")
    v = publish_registry(settings(), _registry(), change="published by operator")
    out.print(f"registry state: published as control v{v} at {datetime.now(tz=UTC).isoformat()}")
    if _controller().status().version is not None:
        _published("rollout state")


# ---------------------------------------------------------------------------------------------- rollout
def _controller() -> RolloutController:
    from delivery import RolloutController

    return RolloutController(settings().delivery())


def _check_version(controller: RolloutController, version: str) -> None:
    state = controller.status()
    if state.version != version:
        fail(f"MODEL_VERSION: got {version!r}, but the rollout in {state.stage.value!r} is of {state.version!r}")


@rollout_app.command("start")
def rollout_start(
    version: Annotated[str, typer.Argument(metavar="MODEL_VERSION")],
    reason: Annotated[str, typer.Option(envvar="PRICESTREAM_REASON")] = "",
) -> None:
    """Begin shadowing a registered version against the live one of its tier."""
    entry = _registry().show(version)
    incumbent = _registry().current(entry.tier)
    if incumbent is not None and incumbent.version == version:
        fail(f"MODEL_VERSION: {version!r} is already the live {entry.tier} model; nothing to roll out")
    state = _controller().start(version, incumbent_version=incumbent.version if incumbent else None, reason=reason)
    out.print(f"rollout of {version} ({entry.tier}) started in {state.stage.value} against "
              f"{state.incumbent_version or 'no incumbent'}")
    _published("rollout state")


@rollout_app.command("status")
def rollout_status(
    version: Annotated[str | None, typer.Argument(metavar="[MODEL_VERSION]")] = None,
) -> None:
    """Stage, candidate weight and the history of transitions with their reasons."""
    controller = _controller()
    if version is not None:
        _check_version(controller, version)
    state = controller.status()
    out.print(kv_table([
        ("version", state.version), ("incumbent", state.incumbent_version), ("stage", state.stage.value),
        ("candidate weight", state.candidate_weight), ("updated", state.updated_at),
    ], title=f"rollout ({settings().rollout()})"))
    rows = [(h.at, h.kind, f"{h.from_stage.value} -> {h.to_stage.value}", h.candidate_weight, h.reason)
            for h in state.history]
    if rows:
        out.print(table(("at", "kind", "stage", "weight", "reason"), rows, title="history"))


@rollout_app.command("advance")
def rollout_advance(
    version: Annotated[str, typer.Argument(metavar="MODEL_VERSION")],
    evidence_file: Annotated[
        Path | None, typer.Option("--evidence", envvar="PRICESTREAM_EVIDENCE", help="JSON of gate evidence arrays")
    ] = None,
    requests: Annotated[int, typer.Option(envvar="PRICESTREAM_REPLAY_REQUESTS", min=30)] = 400,
    seed: Annotated[int | None, typer.Option(envvar="PRICESTREAM_SEED")] = None,
    source: Annotated[str, typer.Option(envvar="PRICESTREAM_EVIDENCE_SOURCE", help="live or replay")] = "live",
) -> None:
    """Run the gates of the current stage and move on, abort naming the failed gate, or wait for evidence.

    Evidence comes from ``--evidence`` (a JSON object with the ``delivery.Evidence`` arrays),
    or by default (``--source live``) from the running system's streams since the stage began: the
    served and shadow decisions on ``pricing.decisions`` (paired prices, candidate latency) and
    ``feedback.labels`` (bookings and revenue per arm). ``--source replay`` uses a seeded simulator
    replay instead: both models price the same requests and outcomes are drawn from the truth.
    """
    if source not in ("live", "replay"):
        fail(f"--source: got {source!r}, expected 'live' or 'replay'")
    controller = _controller()
    _check_version(controller, version)
    state = controller.status()
    if evidence_file:
        evidence = _read_evidence(evidence_file)
    elif source == "live":
        evidence = _live_evidence(controller)
    else:
        evidence = _replay_evidence(
            version, state.incumbent_version, n=requests, seed=settings().seed if seed is None else seed
        )
    result = controller.advance(evidence)
    for r in result.results:
        out.print(("[green]pass[/green] " if r.passed else "[yellow]wait[/yellow] " if r.waiting
                   else "[red]FAIL[/red] ") + r.message)
    if result.waiting:  # the sequential gate is undecided: nothing changed, look again with more outcomes
        out.print(f"{version}: stays in {result.from_stage.value}, waiting for evidence")
        return
    _published("rollout state")
    if not result.advanced:
        fail(f"rollout of {version} aborted in {result.from_stage.value}: {result.message}")
    registry = _registry()
    if result.stage.value == "full":
        registry.promote(version)
    out.print(f"{version}: {result.from_stage.value} -> {result.stage.value} "
              f"(candidate weight {controller.status().candidate_weight:g})")


@rollout_app.command("abort")
def rollout_abort(
    version: Annotated[str, typer.Argument(metavar="MODEL_VERSION")],
    reason: Annotated[str, typer.Option(envvar="PRICESTREAM_REASON")] = "aborted by operator",
) -> None:
    """Stop the rollout and send all traffic back to the incumbent (rolls the registry back if it went full)."""
    controller = _controller()
    _check_version(controller, version)
    was_full = controller.status().stage.value == "full"
    state = controller.abort(reason)
    _published("rollout state")
    registry = _registry()
    tier = registry.show(version).tier
    live = registry.current(tier)
    if was_full and live is not None and live.version == version:
        registry.rollback(tier)
    out.print(f"rollout of {version} aborted ({reason}); incumbent {state.incumbent_version} serves")


def _live_evidence(controller: RolloutController) -> Evidence:
    from delivery.live import live_evidence
    from pricestream.commands.monitoring import read_records

    state = controller.status()
    since = state.history[-1].at if state.history else None
    kafka = settings().kafka()
    with err.status(f"reading {kafka.topic('pricing.decisions')} and {kafka.topic('feedback.labels')}"):
        decisions = read_records(kafka, "pricing.decisions")
        labels = read_records(kafka, "feedback.labels")
    evidence = live_evidence(decisions, labels, since=since)
    sizes = [np.asarray(a if a is not None else []).size
             for a in (evidence.incumbent_prices, evidence.candidate_booked, evidence.incumbent_booked)]
    err.print(f"live evidence since {since.isoformat() if since else 'the start'}: {sizes[0]} paired prices, "
              f"{sizes[1]} candidate and {sizes[2]} incumbent outcomes")
    return evidence


def _read_evidence(path: Path) -> Evidence:
    from delivery import Evidence

    try:
        body = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        fail(f"--evidence {path}: cannot read a JSON object ({exc})")
    fields = set(Evidence.__dataclass_fields__)
    unknown = sorted(set(body) - fields) if isinstance(body, dict) else ["<not an object>"]
    if unknown:
        fail(f"--evidence {path}: unknown fields {unknown}; expected some of {sorted(fields)}")
    return Evidence(**{k: np.asarray(v, dtype=float) for k, v in body.items()})


def _replay_evidence(version: str, incumbent: str | None, *, n: int, seed: int) -> Evidence:
    from pricestream.commands.replay import replay_evidence
    from pricing.rules import RuleSet

    if incumbent is None:
        fail(f"rollout of {version} has no incumbent to compare with; give --evidence")
    with err.status(f"replaying {n} simulated requests through {incumbent} and {version}"):
        return replay_evidence(_registry(), RuleSet.load(settings().rules_file), version, str(incumbent), n=n,
                               seed=seed)
