"""``pricestream services run NAME``: every long-running stream service as its own OS process.

Each service is a :class:`~events.runtime.Step` driven by :class:`~events.runtime.Runtime`: a
consumer group, offsets committed after the output is durable, poison records to ``<topic>.dlq``,
``/healthz`` (503 naming the dependency that is down) and ``/metrics`` on ``--ops-port``, JSON log
lines on stderr with the consumer lag. SIGTERM or SIGINT finishes the batch in hand, flushes,
commits and exits 0 within ``--grace`` seconds (past it the process ends with code 75; what it had
not committed is replayed by the next start). The last line on stdout is a JSON summary.

====================  =====================================  ======================================
name                  reads -> writes                        delivery
====================  =====================================  ======================================
``online-writer``     ``features.v1`` -> Redis (Feast)       at-least-once, idempotent upserts
``offline-writer``    ``features.v1`` -> parquet             at-least-once, manifest per flush
``labels``            decisions + outcomes -> labels         transactional (exactly once)
``sampler``           ``feedback.labels`` -> examples        transactional (exactly once)
``trainer``           ``training.examples`` -> registry      at-least-once, checkpointed state
``monitor``           ``pricing.decisions`` -> Prometheus    at-least-once
====================  =====================================  ======================================

Example:
    >>> SERVICES.index("labels"), default_ops_port("labels", base=9460)
    (2, 9462)
"""

from __future__ import annotations

import errno
import json
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, is_dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, get_args

import typer

from infra.services import STREAM_SERVICES, by_name, ops_index
from pricestream.commands.common import (
    bind_error,
    ensure_bindable,
    fail,
    json_logs,
    new_app,
    one_of,
    out,
    settings,
    stoppable,
)
from pricestream.settings import Settings

if TYPE_CHECKING:
    from feedback.services.trainer_service import Snapshot

Summary = dict[str, object]
"""What a service's run ends with: the fields of its JSON summary line."""

app = new_app("Long-running stream services, one OS process each (pricestream services run NAME).")

SERVICES: tuple[str, ...] = tuple(s.name for s in STREAM_SERVICES)
"""Every service ``services run`` knows (:data:`infra.services.STREAM_SERVICES`), in the order of their ops ports."""


def _check_access(s: Settings, name: str) -> None:
    """Stop with the broker's verdict when this process's principal may not do what service ``name`` needs.

    ``name`` is a key of :data:`infra.kafka_security.GRANTS` (a service, or ``features`` for the feature job).
    """
    from infra.kafka_security import AccessError, check_access

    conf: dict[str, Any] = dict(s.kafka().client_conf())
    try:
        check_access(conf, s.principal, name, topic_prefix=s.topic_prefix)
    except AccessError as exc:
        fail(str(exc))


check_principal_access = _check_access
"""Public name of the access check, for commands outside ``services`` (``jobs run features``)."""


def default_ops_port(name: str, *, base: int) -> int:
    """The ``/healthz`` + ``/metrics`` port of a service when ``--ops-port`` is not given."""
    return base + ops_index(name)


@dataclass(frozen=True)
class Options:
    """What ``services run`` was asked, resolved against the settings."""

    settings: Settings
    runtime: dict[str, Any]
    horizon: timedelta
    strategy: str
    tier: str
    train_every: int
    reference: str | None
    sampler_c: float = 1.0
    sampler_floor: float = 0.01
    guard_tolerance: float | None = None
    max_feature_shift: float | None = None


def _group(s: Settings, default: str) -> str:
    """Group (and transactional) ids carry the topic prefix: two prefixed deployments never fence each other."""
    return f"{s.topic_prefix}{default}"


# ---------------------------------------------------------------------------------------------- runners
def _online_writer(o: Options, stop: threading.Event) -> Summary:
    from features import online_writer

    config = o.settings.features()
    config = config.model_copy(update={"online_group": _group(o.settings, config.online_group)})
    runtime = online_writer.runtime_config(config, **o.runtime)
    return _fields(online_writer.run(config, stop_event=stop, runtime=runtime))


def _offline_writer(o: Options, stop: threading.Event) -> Summary:
    from features import offline_writer

    config = o.settings.features()
    config = config.model_copy(update={"offline_group": _group(o.settings, config.offline_group)})
    runtime = offline_writer.runtime_config(config, **o.runtime)
    return _fields(offline_writer.run(config, stop_event=stop, runtime=runtime))


def _labels(o: Options, stop: threading.Event) -> Summary:
    from feedback.services import label_service as svc

    s = o.settings
    config = svc.LabelServiceConfig(
        kafka=s.kafka(), checkpoint_dir=s.service_dir("labels"), horizon=o.horizon,
        group_id=_group(s, "feedback-labels"), transactional_id=_group(s, f"feedback-labels-{s.service_instance}"),
    )
    counts = None
    if s.cold_start_serve:  # serve's cold-start stage reads each hotel's label totals from the same store
        from pricestream.commands.cold_start import history_store

        counts = history_store(s)
    return _fields(svc.run(config, stop_event=stop, runtime=svc.runtime_config(config, **o.runtime), counts=counts))


def _sampler(o: Options, stop: threading.Event) -> Summary:
    from feedback.samplers import SamplerConfig
    from feedback.services import sampler_service as svc
    from feedback.services.sampler_service import Strategy

    s = o.settings
    config = svc.SamplerServiceConfig(
        kafka=s.kafka(), checkpoint_dir=s.service_dir("sampler"), registry_root=s.registry(),
        online_model_path=s.service_dir("trainer") / "online.pkl",
        strategy=one_of("--strategy", o.strategy, get_args(Strategy)),
        sampler=SamplerConfig(c=o.sampler_c, floor=o.sampler_floor, seed=s.seed),
        group_id=_group(s, "feedback-sampler"), transactional_id=_group(s, f"feedback-sampler-{s.service_instance}"),
    )
    return _fields(svc.run(config, stop_event=stop, runtime=svc.runtime_config(config, **o.runtime)))


def _trainer(o: Options, stop: threading.Event) -> Summary:
    from feedback.continued import GuardConfig
    from feedback.services import trainer_service as svc

    s = o.settings
    from feedback.poisoning import PoisonConfig

    guard = GuardConfig() if o.guard_tolerance is None else GuardConfig(tolerance=o.guard_tolerance)
    poison = PoisonConfig() if o.max_feature_shift is None else PoisonConfig(max_feature_shift=o.max_feature_shift)
    config = svc.TrainerServiceConfig(
        kafka=s.kafka(), state_dir=s.service_dir("trainer"), registry_root=s.registry(),
        tier=one_of("--tier", o.tier, ("light", "heavy")),
        train_every=o.train_every, auto_promote=False, seed=s.seed, group_id=_group(s, "feedback-trainer"),
        guard=guard, poison=poison,
    )
    from pricestream.app import promote_trained  # swap or rollout, per settings.trainer_promotion
    from pricestream.control import open_registry  # registrations published on control.v1 (Kafka control plane)
    from pricestream.wiring import hotel_refitter  # cold start: new hotels' own models (feedback.hotel_refit)

    models = open_registry(s)
    refitter = hotel_refitter(s, models, pooled_frame=lambda: newest_training_snapshot(s).frame)
    return _fields(svc.run(config, snapshot=lambda: newest_training_snapshot(s), stop_event=stop,
                           runtime=svc.runtime_config(config, **o.runtime),
                           on_registered=lambda v: promote_trained(s, v), models=models, refitter=refitter))


def _monitor(o: Options, stop: threading.Event) -> Summary:
    from prometheus_client import CollectorRegistry

    from events.runtime import Runtime, RuntimeConfig
    from feedback.live_dashboard import LiveDashboard, LiveMonitorStep
    from feedback.monitors.stream import DecisionMonitor, MonitorConfig
    from feedback.services.monitor_service import DECISIONS, MonitorServiceConfig

    s = o.settings
    ref = None
    if o.reference is not None:
        from features.snapshots import load_snapshot

        ref = load_snapshot(s.snapshots(), o.reference)
    registry = CollectorRegistry()
    # a drift alarm asks the trainer for an update (the trainer service reads the requests file)
    config = MonitorConfig(update_requests=s.registry() / "update_requests.jsonl")
    monitor = DecisionMonitor(config, registry=registry, reference=ref)
    cfg = MonitorServiceConfig(group_id=_group(s, "pricestream-monitors"))
    rc = RuntimeConfig.model_validate({"name": "monitor", "kafka": s.kafka(), "inputs": (DECISIONS,),
                                       "group_id": cfg.group_id, **o.runtime})
    live = LiveDashboard(monitor, s.reports_dir / "monitor-live.html")  # GET /dashboard on the ops port
    step = LiveMonitorStep(monitor, live, export_every=cfg.export_every)
    stats = Runtime(rc, step, registry=registry, stop_event=stop, pages={"/dashboard": live.page}).run()
    path = monitor.write_dashboard(s.reports_dir / "monitor-live.html") if monitor.n_decisions else None
    return {**asdict(stats), "monitored": monitor.n_decisions, "dashboard": None if path is None else str(path)}


RUNNERS: dict[str, Callable[[Options, threading.Event], Summary]] = {
    "online-writer": _online_writer, "offline-writer": _offline_writer, "labels": _labels,
    "sampler": _sampler, "trainer": _trainer, "monitor": _monitor,
}


def newest_training_snapshot(s: Settings) -> Snapshot:
    """The newest snapshot that is a labelled training frame; the simulator's bootstrap frame, frozen, if none is."""
    from features.snapshots import list_snapshots, load_snapshot
    from feedback.services.trainer_service import Snapshot

    for manifest in reversed(list_snapshots(s.snapshots())):
        frame = load_snapshot(s.snapshots(), manifest.id)
        if "booked" in frame.columns:
            return Snapshot(manifest.id, frame.rename(columns={"event_timestamp": "event_time"}))
    return _bootstrap_snapshot(s)


def _bootstrap_snapshot(s: Settings) -> Snapshot:
    from features.snapshots import freeze
    from feedback.services.trainer_service import Snapshot
    from pricestream.wiring import BootstrapModels, bootstrap_frame

    frame = bootstrap_frame(seed=s.seed, rows=s.bootstrap_rows, hotels=BootstrapModels().hotels, cache_dir=s.cache_dir)
    frozen = frame.drop(columns=["true_prob"], errors="ignore").rename(columns={"event_time": "event_timestamp"})
    manifest = freeze(frozen, root=s.snapshots(), as_of=datetime.now(tz=UTC), definitions_hash="simulator-bootstrap")
    return Snapshot(manifest.id, frame.drop(columns=["true_prob"], errors="ignore"))


def _fields(stats: object) -> Summary:
    """A service's run statistics (a dataclass) as the fields of its JSON summary."""
    if not is_dataclass(stats) or isinstance(stats, type):
        msg = f"stats: got {type(stats).__name__}, expected a dataclass of run statistics"
        raise TypeError(msg)
    return asdict(stats)


def _summary(name: str, stats: Summary) -> str:
    return json.dumps({"service": name, **stats}, default=str, sort_keys=True)


# ---------------------------------------------------------------------------------------------- command
# the options of ``services run``
_Name = Annotated[str, typer.Argument(help=f"one of {', '.join(SERVICES)}")]
_OpsPort = Annotated[int | None, typer.Option(
    envvar="PRICESTREAM_OPS_PORT", min=0, max=65535,
    help="port of /healthz and /metrics (default: PRICESTREAM_OPS_BASE_PORT + its index, else the port "
         "pricestream run recorded for this state dir, else any free one; 0: any)")]
_Grace = Annotated[float | None, typer.Option(
    envvar="PRICESTREAM_GRACE_S", min=0.1, help="seconds a stop may take (default: settings grace_s)")]
_MaxIdle = Annotated[float | None, typer.Option(
    envvar="PRICESTREAM_MAX_IDLE", min=0.1, help="stop after this many idle seconds")]
_Batch = Annotated[int | None, typer.Option(
    envvar="PRICESTREAM_SERVICE_BATCH", min=1, help="most records per batch (default: the service's)")]
_HorizonHours = Annotated[float, typer.Option(
    envvar="PRICESTREAM_LABEL_HORIZON_HOURS", min=0.01, help="labels: how long a decision waits for a booking")]
_Strategy = Annotated[str, typer.Option(
    envvar="PRICESTREAM_SAMPLER_STRATEGY", help="sampler: committee, uncertainty, margin, fisher or random")]
_Tier = Annotated[str, typer.Option(envvar="PRICESTREAM_TRAINER_TIER", help="trainer: light or heavy")]
_TrainEvery = Annotated[int, typer.Option(
    envvar="PRICESTREAM_TRAINER_TRAIN_EVERY", min=1, help="trainer: examples per guarded update")]
_Reference = Annotated[str | None, typer.Option(
    envvar="PRICESTREAM_REFERENCE", help="monitor: snapshot id of the drift reference")]
_SamplerC = Annotated[float, typer.Option(
    envvar="PRICESTREAM_SAMPLER_C",
    help="sampler: selection probability q = min(1, c x informativeness)")]
_SamplerFloor = Annotated[float, typer.Option(
    envvar="PRICESTREAM_SAMPLER_FLOOR",
    help="sampler: lowest selection probability (every label stays selectable)")]
_GuardTolerance = Annotated[float | None, typer.Option(
    envvar="PRICESTREAM_TRAINER_GUARD_TOLERANCE",
    help="trainer: log-loss increase over the live model a candidate may have (default: the guard's 0.002)")]
_MaxFeatureShift = Annotated[float | None, typer.Option(
    envvar="PRICESTREAM_TRAINER_MAX_FEATURE_SHIFT",
    help="trainer: poison guard's bound on a feature's mean shift, in reference sds (default: the guard's 2.0)")]


@app.command("run")
def services_run(
    name: _Name,
    ops_port: _OpsPort = None,
    grace: _Grace = None,
    max_idle: _MaxIdle = None,
    batch: _Batch = None,
    horizon_hours: _HorizonHours = 24.0,
    strategy: _Strategy = "committee",
    tier: _Tier = "light",
    train_every: _TrainEvery = 1000,
    reference: _Reference = None,
    sampler_c: _SamplerC = 1.0,
    sampler_floor: _SamplerFloor = 0.01,
    guard_tolerance: _GuardTolerance = None,
    max_feature_shift: _MaxFeatureShift = None,
) -> None:
    """Run one stream service until SIGTERM / Ctrl-C (or ``--max-idle``); prints a JSON summary on exit."""
    from events.admin import create_topics

    _check_options(name, strategy, tier, sampler_c, sampler_floor, guard_tolerance, max_feature_shift)
    s = settings().acting_as(name, redis_user=by_name(name).redis_user)
    port = _ops_port(s, name) if ops_port is None else ops_port
    ensure_bindable(s.ops_host, port, what=f"{name} ops port (--ops-port)")  # before the group and the topics
    json_logs()
    runtime: dict[str, Any] = {
        "ops_host": s.ops_host, "ops_port": port, "grace_s": grace or s.grace_s, "log_every_s": s.log_every_s,
        "max_idle_s": max_idle, **({} if batch is None else {"max_batch": batch}),
        # static membership: a restart by this same command takes the partitions back at once
        "instance_id": _group(s, f"{name}-{s.service_instance}"),
    }
    if s.secure:  # topics and ACLs are the admin's (``pricestream run``); this principal may only use its own
        _check_access(s, name)
    else:
        create_topics(s.kafka())
    options = Options(s, runtime, timedelta(hours=horizon_hours), strategy, tier, train_every, reference,
                      sampler_c, sampler_floor, guard_tolerance, max_feature_shift)
    with stoppable(runtime["grace_s"]) as stop:
        try:
            stats = RUNNERS[name](options, stop)
        except OSError as exc:
            if exc.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):
                raise
            raise bind_error(exc, s.ops_host, port, what=f"{name} ops port (--ops-port)") from exc
    out.print(_summary(name, stats), soft_wrap=True, highlight=False, markup=False)


def _check_options(name: str, strategy: str, tier: str, sampler_c: float, sampler_floor: float,
                   guard_tolerance: float | None, max_feature_shift: float | None) -> None:
    """Stop with the option, its value and what it takes, at the first one that is out of range."""
    checks = (
        (name in RUNNERS, f"NAME: got {name!r}, expected one of {list(SERVICES)}"),
        (strategy in _STRATEGIES, f"--strategy: got {strategy!r}, expected one of {', '.join(_STRATEGIES)}"),
        (sampler_c > 0, f"--sampler-c: got {sampler_c}, expected a number > 0"),
        (0 < sampler_floor <= 1, f"--sampler-floor: got {sampler_floor}, expected a number in (0, 1]"),
        (guard_tolerance is None or guard_tolerance >= 0,
         f"--guard-tolerance: got {guard_tolerance}, expected a number >= 0"),
        (max_feature_shift is None or max_feature_shift > 0,
         f"--max-feature-shift: got {max_feature_shift}, expected a number > 0"),
        (tier in ("light", "heavy"), f"--tier: got {tier!r}, expected light or heavy"),
    )
    for ok, message in checks:
        if not ok:
            fail(message)


_STRATEGIES = ("committee", "uncertainty", "margin", "fisher", "random")


def _ops_port(s: Settings, name: str) -> int:
    """``ops_base_port`` + the service's index, else the port ``pricestream run`` recorded, else 0 (any free)."""
    from pricestream.ops_ports import recorded_ops_base

    base = s.ops_base_port if s.ops_base_port is not None else recorded_ops_base(s)
    return 0 if base is None else default_ops_port(name, base=base)
