"""``pricestream monitor report``/``stream`` and ``evaluate offpolicy``: reports people look at."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NamedTuple

import numpy as np
import pandas as pd
import typer

from pricestream.commands.common import (
    bind_error,
    ensure_bindable,
    err,
    fail,
    kv_table,
    new_app,
    out,
    settings,
    stoppable,
)
from pricestream.settings import Settings

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from feedback.monitors.recalibration import ThresholdRecalibrator
    from feedback.monitors.stream import DecisionMonitor

monitor_app = new_app("Monitoring of the live pricing loop.")
evaluate_app = new_app("Offline evaluation of candidate models.")

_REQUIRED_LOGS = ("price", "propensity")


@monitor_app.command("report")
def monitor_report(
    out_file: Annotated[Path | None, typer.Option("--out", envvar="PRICESTREAM_MONITOR_OUT")] = None,
    reference: Annotated[
        str | None, typer.Option(envvar="PRICESTREAM_REFERENCE", help="snapshot id for the drift reference")
    ] = None,
    decisions: Annotated[
        Path | None, typer.Option(envvar="PRICESTREAM_DECISIONS", help="PricingDecision JSON lines with features")
    ] = None,
    audit_log: Annotated[Path | None, typer.Option("--audit", envvar="PRICESTREAM_AUDIT_LOG")] = None,
    window_hours: Annotated[float, typer.Option(envvar="PRICESTREAM_WINDOW_HOURS", min=0.1)] = 24.0,
    stale_minutes: Annotated[float, typer.Option(envvar="PRICESTREAM_STALE_MINUTES", min=0.1)] = 60.0,
) -> None:
    """HTML dashboard: coverage, drift vs a snapshot, flip rate, tier shares, latency, rollout weights.

    Without ``--audit``, the report is of the running system: this state dir's own deployment, or the
    one ``pricestream demo`` started from here (its audit log, topics, rollout and drift reference),
    whichever wrote its audit log last.
    """
    from delivery import StateStore
    from pricestream.commands import monitoring as mon
    from pricestream.deployment import latest_deployment

    s = settings()
    if audit_log is None:
        try:
            s, recorded_reference = latest_deployment(s)
        except ValueError as exc:
            fail(str(exc))
        reference = reference or recorded_reference
        if s.state_dir != settings().state_dir:
            err.print(f"reporting the deployment at {s.state_dir} (topics {s.topic_prefix or '(no prefix)'}*)")
    log = audit_log or s.audit()
    if not log.exists():
        fail(f"no audit log at {log}; serve some decisions first (pricestream serve / demo) or give --audit")
    with err.status(f"reading {log}"):
        decided = mon.audit_frame(log)
    if decided.empty:
        fail(f"audit log {log} holds no decisions")
    now = decided["time"].max().to_pydatetime()
    with err.status("collecting features"):
        feats, source = _report_features(s, decisions, decided, now)
    drift = _drift(s, reference, feats, now)
    state = StateStore(s.rollout()).load()
    target = out_file or s.reports_dir / "monitor.html"
    with err.status(f"drawing {target}"):
        ref = None if reference is None else _reference(s, reference)
        path = mon.write_run_dashboard(
            target, decided=decided, features=feats, reference=ref,
            rollout_history=state.history if state else (), window=timedelta(hours=window_hours),
            staleness=timedelta(minutes=stale_minutes),
        )
    shares = decided["tier"].value_counts(normalize=True).round(3).to_dict()
    alerts = [f.feature for r in drift for f in r if f.alert]
    out.print(f"{len(decided)} decisions, tiers {shares}, features from "
              f"{source} ({len(feats)} rows); "
              f"drift alerts: {', '.join(alerts) or 'none'}")
    out.print(f"dashboard: {path}")


_MetricsPort = Annotated[int | None, typer.Option(
    envvar="PRICESTREAM_MONITOR_METRICS_PORT", min=0, max=65535,
    help="serve Prometheus /metrics on 127.0.0.1:PORT while running (default: a free port, printed; 0: off)")]
_Reference = Annotated[str | None, typer.Option(envvar="PRICESTREAM_REFERENCE",
                                                help="snapshot id for the drift reference")]
_Until = Annotated[int | None, typer.Option(envvar="PRICESTREAM_MONITOR_UNTIL", min=1,
                                            help="stop after this many decisions")]
_MaxIdle = Annotated[float | None, typer.Option(envvar="PRICESTREAM_MONITOR_MAX_IDLE", min=0.5,
                                                help="stop after this many idle seconds")]
_Features = Annotated[str | None, typer.Option(envvar="PRICESTREAM_MONITOR_FEATURES",
                                               help="comma-separated features to watch (default: all)")]
_Recalibrate = Annotated[bool | None, typer.Option(
    "--recalibrate/--no-recalibrate", envvar="PRICESTREAM_RECALIBRATE",
    help="drift alerts move the serving router's thresholds (needs --reference)")]


@monitor_app.command("stream")
def monitor_stream(
    metrics_port: _MetricsPort = None,
    reference: _Reference = None,
    out_file: Annotated[Path | None, typer.Option("--out", envvar="PRICESTREAM_MONITOR_OUT")] = None,
    until: _Until = None,
    max_idle: _MaxIdle = None,
    window_hours: Annotated[float, typer.Option(envvar="PRICESTREAM_WINDOW_HOURS", min=0.1)] = 1.0,
    group_id: Annotated[str, typer.Option(envvar="PRICESTREAM_MONITOR_GROUP")] = "pricestream-monitors",
    features: _Features = None,
    recalibrate: _Recalibrate = None,
) -> None:
    """Live monitors over ``pricing.decisions``: Prometheus metrics while running, an HTML dashboard on exit.

    Runs until Ctrl-C / SIGTERM, ``--until`` decisions or ``--max-idle`` seconds without any.
    """
    from prometheus_client import CollectorRegistry

    from events.admin import create_topics
    from events.topics import TOPICS
    from feedback.monitors.stream import DecisionMonitor, MonitorConfig, MonitorStream

    watched = _watched(features)
    s = settings()
    registry = CollectorRegistry()
    _serve_metrics(metrics_port, registry)
    create_topics(s.kafka(), [TOPICS["pricing.decisions"], TOPICS["pricing.decisions.dlq"]])
    ref = None
    if reference is not None:
        from features.snapshots import load_snapshot

        ref = load_snapshot(s.snapshots(), reference)
    window = timedelta(hours=window_hours)
    config = MonitorConfig(window=window, staleness=window, features=watched,
                           update_requests=s.registry() / "update_requests.jsonl")  # drift alarms ask the trainer
    recalibrator = _recalibrator(s) if (recalibrate if recalibrate is not None else s.recalibrate) else None
    monitor = DecisionMonitor(config, registry=registry, reference=ref, recalibrator=recalibrator)
    with stoppable() as stop, MonitorStream(s.kafka(), monitor, group_id=group_id) as stream:
        n = stream.run(stop=stop, until=until, idle_timeout_s=max_idle)
    path = monitor.write_dashboard(out_file or s.reports_dir / "monitor-live.html")
    _print_monitor_summary(monitor, n, recalibrator)
    out.print(f"dashboard: {path}")


def _watched(features: str | None) -> tuple[str, ...]:
    """The features ``--features`` names (all by default); stops naming the unknown ones."""
    from events.catalog import ALL_FEATURES

    watched = ALL_FEATURES if features is None else tuple(f.strip() for f in features.split(",") if f.strip())
    unknown = sorted(set(watched) - set(ALL_FEATURES))
    if unknown or not watched:
        fail(f"--features: got {unknown or features!r}, expected names from {list(ALL_FEATURES)}")
    return tuple(watched)


def _serve_metrics(port: int | None, registry: CollectorRegistry) -> None:
    """``/metrics`` of ``registry`` on 127.0.0.1:``port`` (None: a free port; 0: none); prints where."""
    from prometheus_client import start_http_server

    if port is None:  # no fixed default: 9464 was the trainer's ops port under `pricestream run`
        from infra.flink_cluster import free_port

        port = free_port()
    ensure_bindable("127.0.0.1", port, what="monitor stream --metrics-port")
    if not port:
        return
    try:
        server, _ = start_http_server(port, addr="127.0.0.1", registry=registry)
    except OSError as exc:
        raise bind_error(exc, "127.0.0.1", port, what="monitor stream --metrics-port") from exc
    err.print(f"metrics on http://127.0.0.1:{int(server.server_port)}/metrics")


def _recalibrator(s: Settings) -> ThresholdRecalibrator:
    """Drift alerts move the serving router's thresholds (in the settings' router state file)."""
    from feedback.monitors.recalibration import RecalibrationConfig, ThresholdRecalibrator
    from routing.threshold_state import ThresholdStore

    err.print(f"drift alerts recalibrate the router thresholds in {s.router_thresholds()}")
    config = RecalibrationConfig(enabled=True, cooldown=timedelta(seconds=s.recalibrate_cooldown_s))
    return ThresholdRecalibrator(config, store=ThresholdStore(s.router_thresholds()))


def _print_monitor_summary(monitor: DecisionMonitor, n: int, recalibrator: ThresholdRecalibrator | None) -> None:
    tiers, _ = monitor.shares()
    report = monitor.coverage_report()
    worst = ""
    if report.hotels:
        h, f = np.unravel_index(int(np.argmax(report.missing_share)), report.missing_share.shape)
        worst = f"; lowest coverage {report.features[f]} at {report.hotels[h]}: {1 - report.missing_share[h, f]:.2f}"
    out.print(f"{n} decisions read, {monitor.n_decisions} monitored, tiers "
              f"{ {k: round(v, 3) for k, v in tiers.items()} }{worst}")
    if recalibrator is not None:
        moved = "; ".join(f"{p.thresholds.rules_below:.3f}/{p.thresholds.heavy_above:.3f} ({p.reason})"
                          for p in recalibrator.published)
        out.print(f"recalibrations: {len(recalibrator.published)}{': ' + moved if moved else ''}")


def _report_features(s: Settings, decisions: Path | None, decided: pd.DataFrame, now: datetime
                     ) -> tuple[pd.DataFrame, str]:
    """The features decisions read: a --decisions file, else the live decisions topic, else the offline store."""
    from pricestream.commands import monitoring as mon

    if decisions is not None:
        return mon.decision_features(decisions), str(decisions)
    topic = s.kafka().topic("pricing.decisions")
    try:
        live = mon.records_features(mon.read_records(s.kafka(), "pricing.decisions", timeout_s=5.0))
    except Exception as exc:  # noqa: BLE001 - Kafka down or unreachable: the offline store still answers
        err.print(f"cannot read {topic} ({exc}); features from the offline store")
        live = pd.DataFrame()
    if not live.empty:
        return live, f"the live reads on {topic}"
    return mon.offline_features(s.offline(), decided, until=now), "the offline store"


def _reference(s: Settings, snapshot_id: str) -> pd.DataFrame:
    from features.snapshots import load_snapshot

    return load_snapshot(s.snapshots(), snapshot_id)


def _drift(s: Settings, reference: str | None, feats: pd.DataFrame, now: datetime) -> list:
    if reference is None:
        err.print("no --reference snapshot: the drift section stays empty")
        return []
    from pricestream.commands import monitoring as mon

    return mon.drift_history(_reference(s, reference), feats, at=now)


@evaluate_app.command("offpolicy")
def evaluate_offpolicy(
    candidate: Annotated[str, typer.Argument(metavar="CANDIDATE", help="registered model version")],
    snapshot: Annotated[str, typer.Option(envvar="PRICESTREAM_SNAPSHOT", help="snapshot of logged decisions")],
    tolerance: Annotated[float, typer.Option(envvar="PRICESTREAM_PRICE_TOLERANCE", min=0.0, max=1.0)] = 0.05,
    method: Annotated[str, typer.Option(envvar="PRICESTREAM_OPE_METHOD", help="dr, snips or ips")] = "dr",
    seed: Annotated[int | None, typer.Option(envvar="PRICESTREAM_SEED")] = None,
) -> None:
    """Revenue per decision the CANDIDATE would have earned on logged decisions (DR, SNIPS or IPS, with a CI).

    The snapshot must hold the logged decisions: price, propensity and booked (or reward) besides the
    keys, time and features. The candidate is deterministic, so a logged decision counts when its price
    lies within ``--tolerance`` (relative) of the candidate's price for the same input. The doubly robust
    estimate (the default) adds the candidate model's own expected revenue at its price, corrected by the
    matched decisions; the effective sample size says how many logged decisions the estimate rests on,
    with a warning below 200.
    """
    from features.snapshots import load_snapshot
    from feedback.offpolicy import evaluate, evaluate_deterministic_dr

    if method not in ("dr", "ips", "snips"):
        fail(f"--method: got {method!r}, expected 'dr', 'snips' or 'ips'")
    logs = load_snapshot(settings().snapshots(), snapshot)
    missing = [c for c in _REQUIRED_LOGS if c not in logs] + ([] if {"booked", "reward"} & set(logs) else ["booked"])
    if missing:
        fail(f"snapshot {snapshot} lacks logged-decision columns {missing}; create it with "
             "`pricestream snapshot create --entities FILE` where FILE holds the decisions with those columns")
    logs = logs.assign(reward=logs["reward"] if "reward" in logs else logs["booked"] * logs["price"])
    with err.status(f"pricing {len(logs)} logged inputs with {candidate}"):
        quoted = _candidate_quotes(candidate, logs)
    logs["candidate_prob"] = (np.abs(quoted.prices - logs["price"]) <= tolerance * logs["price"]).astype(float)
    rng_seed = settings().seed if seed is None else seed
    if method == "dr":
        logs = logs.assign(direct=quoted.prices * quoted.probs, logged_hat=logs["price"] * quoted.logged_probs)
        est = evaluate_deterministic_dr(logs, matched_col="candidate_prob", direct_col="direct",
                                        logged_hat_col="logged_hat", seed=rng_seed)
    else:
        est = evaluate(logs, "candidate_prob", method="ips" if method == "ips" else "snips", seed=rng_seed,
                       action_col="price")
    logged = float(logs["reward"].mean())
    out.print(kv_table([
        ("candidate", candidate), ("snapshot", snapshot), ("logged decisions", est.n),
        ("matched within tolerance", float(logs["candidate_prob"].mean())), ("method", est.method),
        ("effective sample size", est.ess),
        ("estimated revenue / decision", est.value), ("95% CI", f"[{est.ci_low:.4g}, {est.ci_high:.4g}]"),
        ("logging policy revenue / decision", logged),
    ], title="off-policy estimate"))
    if not est.trusted:
        err.print(f"[yellow]warning:[/] the estimate rests on an effective sample of {est.ess:,.1f} logged decisions "
                  f"(under 200): its interval understates the error. Log more decisions with exploration "
                  f"(PRICESTREAM_EXPLORE_BAND) or widen --tolerance.")


class _Quotes(NamedTuple):
    prices: np.ndarray
    probs: np.ndarray
    """The candidate's booking probability at its own price."""
    logged_probs: np.ndarray
    """The candidate model's booking probability at the logged price."""


def _candidate_quotes(version: str, logs: pd.DataFrame) -> _Quotes:
    from events.catalog import ALL_FEATURES
    from events.models import PricingRequest
    from feedback.registry import ModelRegistry
    from pricing.rules import RuleSet
    from pricing.tiers import load_pricer

    s = settings()
    pricer = load_pricer(ModelRegistry(s.registry()).show(version).path)
    rules = RuleSet.load(s.rules_file)
    prices, probs, logged_probs = [], [], []
    for row in logs.to_dict("records"):
        request = PricingRequest(
            hotel_id=str(row["hotel_id"]), room_type=str(row["room_type"]), stay_date=str(row["stay_date"]),
            event_time=pd.Timestamp(row["event_timestamp"]).to_pydatetime(), nights=int(row.get("nights", 1) or 1),
            channel=str(row.get("channel") or "web"),
        )
        feats = {k: (None if pd.isna(row.get(k)) else float(row[k])) for k in ALL_FEATURES}
        outcome = rules.evaluate(request, feats)
        quote = pricer.quote(
            request, feats, floor=outcome.floor, ceiling=outcome.ceiling, rule_price=outcome.rule_price
        )
        prices.append(outcome.clamp(quote.price))
        probs.append(_prob(quote))
        at_logged = pricer.quote(request, feats, floor=float(row["price"]), ceiling=float(row["price"]),
                                 rule_price=float(row["price"]))
        logged_probs.append(_prob(at_logged))
    return _Quotes(np.asarray(prices), np.asarray(probs), np.asarray(logged_probs))


def _prob(quote: object) -> float:
    value = getattr(quote, "booking_prob", None)
    return float(value) if isinstance(value, int | float) and np.isfinite(value) else 0.0
