"""What the loop did in a demo run, on the run's own clock: drift per phase, the trainer, the rollouts; the pages.

The demo plays months of shoppers in minutes, so every time here is the shoppers' simulated
time: a decision's request time (``serve`` decides at the request's time in the demo), a phase's
span, the simulated time at which the demo moved a rollout on. :func:`phase_drift` judges each
phase's served decisions against the bootstrap snapshot with the monitor's own
:class:`~feedback.monitors.DriftMonitor` (the monitor service checks every 5,000 decisions, more
than most phases hold: the demo reports its counts too); :func:`write_dashboard` draws the run's
monitoring page with every time axis on the run's own range; :func:`write_plot` draws RevPAR per
night per policy.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from feedback.monitors.drift import DriftReport
from feedback.monitors.flips import FlipReport
from pricestream.demo_nights import Phase
from pricestream.demo_revenue import PolicyNights

_TOP_DRIFT = 3  # features named per phase's drift line


def decisions_frame(audit: Path) -> pd.DataFrame:
    """One row per audited decision on the shoppers' clock: time (the decision's request time), tier,
    latency, price, model version, input hash."""
    rows = []
    with audit.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                rows.append(_audit_row(json.loads(line)))
    frame = pd.DataFrame(rows, columns=["time", "tier", "latency_ms", "input_sha256", "price", "model_version"])
    frame["time"] = pd.to_datetime(frame["time"], utc=True, format="ISO8601")
    return frame


def _audit_row(entry: dict[str, Any]) -> dict[str, Any]:
    decision = entry.get("decision") or {}
    when = decision.get("event_time") or entry.get("timestamp")
    if isinstance(when, int | float):
        when = pd.Timestamp(when, unit="ms", tz="UTC").isoformat()
    return {"time": when, "tier": entry.get("tier"), "latency_ms": entry.get("latency_ms"),
            "input_sha256": entry.get("input_sha256"), "price": decision.get("price"),
            "model_version": decision.get("model_version")}


def phase_drift(reference: pd.DataFrame, features: pd.DataFrame, phases: Sequence[Phase]) -> list[DriftReport]:
    """One drift check per phase: the phase's served decisions' features against ``reference``."""
    from pricestream.commands.monitoring import drift_history

    out: list[DriftReport] = []
    for phase in phases:
        inside = features[(features["time"] >= phase.start) & (features["time"] < phase.end)]
        out += drift_history(reference, inside, at=phase.end)
    return out


def drift_lines(checks: Sequence[DriftReport], phases: Sequence[Phase], monitor: dict[str, float]) -> list[str]:
    """Per phase, the alarm (features alerting, the largest PSI) and what the monitor service counted."""
    by_end = {c.at: c for c in checks}
    lines = ["drift (the monitor's DriftMonitor, each phase's decisions against the bootstrap snapshot; the counted "
             "nights' requests come at shorter leads than the snapshot's offers, so lead-time and inventory features "
             "differ from the first phase on; the competitor rates carry the regime change):"]
    for p in phases:
        check = by_end.get(p.end)
        if check is None:
            lines.append(f"  phase {p.index} ({p.regime}): no check (too few decisions with features)")
            continue
        alerts = sorted((f for f in check if f.alert), key=lambda f: -f.psi)
        named = ", ".join(f"{f.feature} PSI {f.psi:.2f}" for f in alerts[:_TOP_DRIFT])
        state = f"ALARM on {len(alerts)} of {len(check.features)} features ({named})" if alerts else \
            f"silent ({len(check.features)} features)"
        comp = "; ".join(f"{f.feature} PSI {f.psi:.2f}{' (alert)' if f.alert else ''}"
                         for f in check if f.feature.startswith("comp_"))
        lines.append(f"  phase {p.index} ({p.regime}, n {check.n_window}): {state}" + (f"; {comp}" if comp else ""))
    counted = ", ".join(f"{k} {v:g}" for k, v in sorted(monitor.items())) or "none"
    lines.append(f"  monitor service's own drift alerts (/metrics, a check every 5,000 decisions): {counted}")
    return lines


def phase_lines(phases: Sequence[Phase]) -> list[str]:
    return ["phases (about equal shoppers each; simulated time):"] + [
        f"  phase {p.index}: {p.start:%Y-%m-%d %H:%M} .. {p.end:%Y-%m-%d %H:%M}  {p.decisions} decisions, "
        f"{p.regime}, serving {p.model} at its end" for p in phases]


def flips_by_phase(frame: pd.DataFrame, phases: Sequence[Phase]) -> list[FlipReport]:
    """Cumulative same-input, same-version flip reports at the end of every phase."""
    from feedback.monitors import FlipMonitor

    monitor, reports = FlipMonitor(), []
    ordered = frame.sort_values("time")
    for phase in phases:
        group = ordered[(ordered["time"] >= phase.start) & (ordered["time"] < phase.end)]
        for h, v, p in zip(group["input_sha256"], group["model_version"], group["price"], strict=True):
            if isinstance(h, str) and p is not None:
                monitor.update(h, v if isinstance(v, str) else None, float(p))
        reports.append(monitor.report(at=phase.end))
    return reports


def tiers_by_phase(frame: pd.DataFrame, phases: Sequence[Phase]) -> list[tuple[datetime, dict[str, float]]]:
    """Share of decisions per tier in every phase, held over the phase (a point at its start and at its end)."""
    out = []
    for phase in phases:
        group = frame[(frame["time"] >= phase.start) & (frame["time"] < phase.end)]
        if len(group):
            shares = {str(k): float(v) for k, v in group["tier"].astype(str).value_counts(normalize=True).items()}
            out += [(phase.start, shares), (phase.end, shares)]
    return out


def held(series: Sequence[tuple[datetime, dict[str, float]]], *, start: datetime, end: datetime,
         initial: dict[str, float]) -> list[tuple[datetime, dict[str, float]]]:
    """``series`` as steps from ``start`` to ``end``: each value holds until the next one (``initial`` before).

    Example:
        >>> from datetime import UTC, datetime
        >>> t = [datetime(2027, 1, d, tzinfo=UTC) for d in (1, 5, 9)]
        >>> [(p[0].day, p[1]["c"]) for p in held([(t[1], {"c": 0.1})], start=t[0], end=t[2], initial={"c": 0.0})]
        [(1, 0.0), (5, 0.0), (5, 0.1), (9, 0.1)]
    """
    out, last = [(start, initial)], initial
    for at, values in series:
        out += [(at, last), (at, values)]
        last = values
    return [*out, (end, last)]


def write_dashboard(
    target: Path, *, audit: Path, features: pd.DataFrame, checks: Sequence[DriftReport], phases: Sequence[Phase],
    weights: Sequence[tuple[datetime, dict[str, float]]],
) -> Path | None:
    """The run's monitoring page, every time axis on the run's own range (first phase's start .. last's end)."""
    from feedback import dashboard
    from pricestream.commands.monitoring import coverage_report, latencies

    if not audit.exists() or not phases:
        return None
    frame = decisions_frame(audit)
    if frame.empty:
        return None
    span = (phases[0].start, phases[-1].end)
    now = phases[-1].end
    window = now - phases[-1].start
    return dashboard.write_dashboard(
        target, coverage=coverage_report(features, window=window, staleness=window, now=now),
        drift_history=list(checks), flips=flips_by_phase(frame, phases), tier_shares=tiers_by_phase(frame, phases),
        latencies_ms=latencies(frame), time_range=span,
        rollout_weights_history=held(weights, start=span[0], end=span[1], initial={"incumbent": 1.0, "candidate": 0.0}),
        title="pricestream demo: the loop over complete stay nights",
    )


def write_plot(table: dict[str, PolicyNights], out: Path, *, title: str) -> tuple[Path, Path]:
    """RevPAR per closed night per policy (PNG) and the table behind it (CSV)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [{"night": night, "policy": name, "revenue": f.revenue, "rooms_sold": f.rooms_sold,
             "rooms_available": f.rooms_available, "occupancy": f.occupancy, "adr": f.adr, "revpar": f.revpar}
            for name, pol in table.items() for night, f in pol.ledger.per_night().items()]
    frame = pd.DataFrame(rows)
    out.mkdir(parents=True, exist_ok=True)
    csv = out / "closed_nights.csv"
    frame.to_csv(csv, index=False)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, group in frame.groupby("policy", sort=False):
        ax.plot(group["night"].astype(str), group["revpar"], marker="o", label=str(name))
    ax.set_ylabel("RevPAR per closed night")
    ax.set_title(title)
    ax.legend()
    fig.autofmt_xdate()
    fig.tight_layout()
    png = out / "revpar_per_night.png"
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return png, csv
