"""The closed-loop demo: the README's main command, end to end on the local stack.

For each simulated day: the market simulator's shoppers ask the routed scorer for
prices (features read from Redis), their behaviour events and the decisions go to
Kafka, the Flink feature job turns events into features (Redis through the online
writer), the label service joins decisions with outcomes, the active-learning
sampler writes training examples back to Kafka, and the trainer updates the model
(guarded), registers and promotes it; the scorer hot-reloads it for the next day.
Revenue per day is compared with a static price and with the simulator's oracle
on the same shoppers (common random numbers), both as booked and as the truth's
expected revenue of the offers shown: at a few thousand offers a day the booking
draw (group bookings of up to 5 rooms) moves booked revenue by several percent, so
the expectation is the figure that ranks policies. A warm-up day of history at the
static price comes first, so the first priced day already has features.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd

from events.admin import create_topics
from events.config import KafkaConfig
from events.models import PricingDecision, PricingRequest, Record, dumps
from events.producer import Producer
from events.simulator import Market, MarketConfig, Offer, Simulation, oracle_policy, static_policy, training_frame
from events.simulator.evaluate import DayAccumulator, simulate_days
from features.config import FeaturesConfig
from features.online_source import RedisFeatureSource
from features.snapshots import freeze
from feedback.registry import ModelRegistry
from feedback.samplers import SamplerConfig
from feedback.services.label_service import LabelService, LabelServiceConfig
from feedback.services.sampler_service import SamplerService, SamplerServiceConfig
from feedback.services.trainer_service import Snapshot, TrainerService, TrainerServiceConfig
from infra.processes import end_tree
from pipelines.config import FeatureJobConfig
from pricestream.app import ServingPath, build_serving_path, promote_trained
from pricestream.settings import Settings
from pricing.errors import PricingError
from pricing.scorer import ScorerConfig
from pricing.training import train_bundle

_BOOTSTRAP_ROWS = 20_000  # enough for a stable first model, trained in seconds
_DRAIN_IDLE_BATCHES = 3  # empty polls in a row that mean a service has caught up
_LABEL_HORIZON = timedelta(hours=6)  # short, so a simulated day yields labels the same day
# The Fisher sampler (outcome variance x leverage, the variance-optimal rule for a weighted fit;
# bench/label_efficiency.py) has informativeness g / (4 x mean g): c = 1.3 selects roughly a
# third of the labels, the floor keeps every label selectable (weights 1/q keep training unbiased).
_SAMPLER_STRATEGY = "fisher"
_SAMPLER_C = 1.3
_SAMPLER_FLOOR = 0.05
_MIN_TRAIN_EXAMPLES = 100  # fewer than this and a LightGBM update is noise: keep buffering
_BAND = (0.85, 1.3)  # floor and ceiling as multiples of a room's reference price
_EXPLORE_SIGMA = 0.05  # log-scale spread of the price nudge: about 0.3% of revenue near the optimum
_GUARD_HOLDOUT = 0.2  # = feedback.continued's default validation_fraction
# A simulated day is produced in one burst of seconds; with the job's 60 s default, partitions
# that get no events (few hotels, more partitions) held the watermark back past the next day's
# scoring, so no window fired and the scorer saw no features at all. 10 s still tolerates a
# briefly starved reader on a busy host.
_IDLE_TIMEOUT_MS = 10_000
_STAGE_HOURS = (6, 12, 18)  # shadow -> canary -> blend -> full over a simulated day's traffic
_GATE_REPLAY_N = 400  # replayed requests per gate: enough for the price and latency gates, seconds to run
_FEATURES_WAIT_S = 240.0  # the first day includes the Flink job's start-up (a minute on a busy host)
_FEATURES_SETTLED_S = 8.0  # no new feature rows for this long after some: the job caught up with the day
_FEATURES_POLL_S = 1.0

Progress = Callable[[str], None]


@dataclass
class DemoReport:
    """What the demo did, per simulated day and in total."""

    days: list[dict[str, Any]] = field(default_factory=list)
    decisions: int = 0
    labels: int = 0
    training_examples: int = 0
    model_versions: list[str] = field(default_factory=list)
    promotions: int = 0
    rejections: list[str] = field(default_factory=list)
    rollouts: list[str] = field(default_factory=list)
    """Every rollout step the run took ("v3: canary -> blend")."""
    dashboard_path: Path | None = None
    plot_path: Path | None = None
    csv_path: Path | None = None

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.days)

    def summary_lines(self) -> list[str]:
        f = self.frame()
        lines = [
            f"{r.day}: pricestream {r.policy:,.0f}  static {r.static:,.0f}  oracle {r.oracle:,.0f}  "
            f"(decisions {r.decisions}, model {r.model})"
            for r in f.itertuples()
        ]
        total, static, oracle = f.policy.sum(), f.static.sum(), f.oracle.sum()
        e_total, e_static, e_oracle = f.policy_expected.sum(), f.static_expected.sum(), f.oracle_expected.sum()
        lines += [
            f"revenue: pricestream {total:,.0f} vs static {static:,.0f} ({(total / static - 1) * 100:+.1f}%) "
            f"vs oracle {oracle:,.0f} ({total / oracle * 100:.1f}% of the best possible)",
            "expected revenue of the offers shown (the truth's expectation: no booking-lottery noise): "
            f"pricestream {e_total:,.0f} vs static {e_static:,.0f} ({(e_total / e_static - 1) * 100:+.1f}%) "
            f"vs oracle {e_oracle:,.0f} ({e_total / e_oracle * 100:.1f}%)",
            f"decisions {self.decisions}, labels {self.labels}, training examples written {self.training_examples}",
            f"model versions {self.model_versions}, promotions {self.promotions}, rejections {len(self.rejections)}",
        ]
        lines += [f"  rejected update: {reason[:160]}" for reason in self.rejections]
        lines += [f"  rollout {step}" for step in self.rollouts]
        if self.dashboard_path is not None:
            lines.append(f"dashboard: {self.dashboard_path}")
        if self.plot_path is not None:
            lines.append(f"plot: {self.plot_path}  table: {self.csv_path}")
        return lines


@dataclass
class _Loop:
    """Everything one demo run wires together."""

    settings: Settings
    kafka: KafkaConfig
    features: FeaturesConfig
    work: Path
    market: Market
    registry: ModelRegistry
    serving: ServingPath
    labels: LabelService
    sampler: SamplerService
    trainer: TrainerService
    job: subprocess.Popen[bytes]
    writer_stop: threading.Event
    writer: threading.Thread
    run: Settings
    """The settings the serving path runs on: this run's registry, rules, audit log and rollout state."""
    reference: str = ""
    """Snapshot the bootstrap models trained on: the drift reference of the run's dashboard."""
    served: list[PricingDecision] = field(default_factory=list)


def run_demo(
    settings: Settings, *, days: int = 3, hotels: int = 8, seed: int = 7, on_progress: Progress | None = None
) -> DemoReport:
    """Run the closed loop for ``days`` simulated days; returns the report (and writes its plot)."""
    say = on_progress or (lambda _msg: None)
    loop = _start(settings, hotels=hotels, seed=seed, say=say)
    report = DemoReport()
    try:
        first = datetime.now(tz=UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        _warm_up(loop, first - timedelta(days=1), seed=seed - 1, say=say)
        for d in range(days):
            report.days.append(_one_day(loop, first + timedelta(days=d), seed=seed + d, report=report, say=say))
    finally:
        _stop(loop)
    report.model_versions = [e.version for e in loop.registry.list()]
    report.plot_path, report.csv_path = _write_report(report, loop.work)
    report.dashboard_path = _write_dashboard(loop)
    return report


def _write_dashboard(loop: _Loop) -> Path | None:
    """The run's monitoring page (what ``pricestream monitor report`` draws for a deployment)."""
    from features.snapshots import load_snapshot
    from pricestream.commands import monitoring as mon
    from routing.delivery import StateStore

    audit = loop.run.audit()
    if not audit.exists():
        return None
    decided = mon.audit_frame(audit)
    if decided.empty:
        return None
    features = mon.records_features(json.loads(dumps(d)) for d in loop.served)
    state = StateStore(loop.run.rollout()).load()
    return mon.write_run_dashboard(
        loop.work / "report" / "monitor.html", decided=decided, features=features,
        reference=load_snapshot(loop.work / "snapshots", loop.reference),
        rollout_history=state.history if state else (), window=timedelta(days=2), staleness=timedelta(hours=6),
    )


def _start(settings: Settings, *, hotels: int, seed: int, say: Progress) -> _Loop:
    run_id = datetime.now(tz=UTC).strftime("%Y%m%d%H%M%S")
    kafka = KafkaConfig(bootstrap_servers=settings.kafka().bootstrap_servers, topic_prefix=f"demo{run_id}-")
    work = settings.data_dir / "demo" / run_id
    create_topics(kafka)
    market = Market(MarketConfig(hotels=hotels, seed=seed, start=datetime.now(tz=UTC)))
    registry = ModelRegistry(work / "registry")
    features = FeaturesConfig(project=f"demo{run_id}", state_dir=work, redis_url=settings.redis(), kafka=kafka)
    say("starting the Flink feature job and the online writer")
    job = _start_feature_job(settings, kafka, work)  # first: its start-up overlaps the bootstrap training
    say("training the bootstrap light and heavy models on simulated offers")
    snapshot = _bootstrap(market, registry, work, seed=seed)
    writer_stop = threading.Event()
    from features.online_writer import run as run_writer

    writer = threading.Thread(target=run_writer, args=(features,), kwargs={"stop_event": writer_stop}, daemon=True)
    writer.start()
    market_rules(market, work / "rules.yaml")
    run = _run_settings(settings, registry, work)
    serving = _serving_path(run, features, snapshot.snapshot_id)
    prefix = kafka.topic_prefix
    return _Loop(
        settings, kafka, features, work, market, registry, serving,
        # Group and transactional ids carry the run's prefix: with the services' defaults, any other
        # process using them (a test, a second demo) fences this run's transactions mid-loop.
        LabelService(
            LabelServiceConfig(
                kafka=kafka, checkpoint_dir=work / "labels", horizon=_LABEL_HORIZON,
                group_id=f"{prefix}feedback-labels", transactional_id=f"{prefix}feedback-labels-0",
            )
        ),
        SamplerService(
            SamplerServiceConfig(
                kafka=kafka, checkpoint_dir=work / "sampler", registry_root=registry.root, strategy=_SAMPLER_STRATEGY,
                sampler=SamplerConfig(c=_SAMPLER_C, floor=_SAMPLER_FLOOR, seed=seed),
                group_id=f"{prefix}feedback-sampler", transactional_id=f"{prefix}feedback-sampler-0",
            )
        ),
        TrainerService(
            # the trainer only registers: a version that passes its gate is rolled out (app.promote_trained)
            TrainerServiceConfig(kafka=kafka, state_dir=work / "trainer", registry_root=registry.root,
                                 auto_promote=False, train_every=10**9, group_id=f"{prefix}feedback-trainer"),
            snapshot=snapshot,
        ),
        job, writer_stop, writer, run, snapshot.snapshot_id,
    )


def _bootstrap(market: Market, registry: ModelRegistry, work: Path, *, seed: int) -> Snapshot:
    frame = training_frame(market, n=_BOOTSTRAP_ROWS, seed=seed)
    frozen = frame.drop(columns=["true_prob"]).rename(columns={"event_time": "event_timestamp"})
    manifest = freeze(
        frozen, root=work / "snapshots", as_of=datetime.now(tz=UTC), definitions_hash="simulator-bootstrap"
    )
    # The guard validates candidates on the newest part of the snapshot; the serving model
    # must not have seen those rows, or it would win every comparison by memory.
    older = frame.sort_values("event_time").iloc[: int(len(frame) * (1 - _GUARD_HOLDOUT))]
    for tier in ("light", "heavy"):
        info = train_bundle(older, work / "bundles" / tier, tier=tier, seed=seed)
        version = registry.register(info.path, tier=tier, snapshot_id=manifest.id, metrics=info.metrics)
        registry.promote(version)
    return Snapshot(snapshot_id=manifest.id, frame=frame)


def _start_feature_job(settings: Settings, kafka: KafkaConfig, work: Path) -> subprocess.Popen[bytes]:
    config = FeatureJobConfig(
        bootstrap_servers=kafka.bootstrap_servers, topic_prefix=kafka.topic_prefix,
        connector_jar=settings.stack().flink_kafka_connector_jar, startup="earliest-offset",
        checkpoint_interval_ms=1000, checkpoint_dir=work / "checkpoints", out_of_orderness_ms=1000,
        idle_timeout_ms=_IDLE_TIMEOUT_MS,
        transactional_id_prefix=f"{kafka.topic_prefix}features", group_id=f"{kafka.topic_prefix}features",
    )
    argv = [sys.executable, "-m", "pipelines.feature_job", "--config-json", config.model_dump_json()]
    work.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(argv, stdout=(work / "feature_job.log").open("wb"), stderr=subprocess.STDOUT)


def market_rule_spec(
    market: Market, *, band: tuple[float, float] | None, drop_kinds: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The shipped rule file with each hotel's base rate per room type (its reference price).

    With ``band``, each hotel and room type also gets a floor and a ceiling at those multiples of
    its base rate (a revenue manager's price band); rules of ``drop_kinds`` are left out.
    """
    import yaml

    spec = yaml.safe_load((Path(__file__).resolve().parent.parent / "pricing" / "rules" / "default.yaml").read_text())
    spec["base_rates"], bands = [], []
    for hotel in market.config.hotel_ids:
        for room in market.config.room_types:
            ref = round(market.reference_price(hotel, room), 2)
            spec["base_rates"].append({"hotel": hotel, "room_type": room, "rate": ref})
            for kind, factor in zip(("floor", "ceiling"), band or (), strict=False):
                bands.append({"id": f"{kind}-{hotel}-{room}", "kind": kind, "hotel": hotel, "room_type": room,
                              "price": round(ref * factor, 2)})
    spec["rules"] = bands + [r for r in spec["rules"] if r["kind"] not in drop_kinds]
    return dict(spec)


def market_rules(market: Market, path: Path) -> Path:
    """The rule set a revenue manager would write for these hotels, written to ``path``.

    The shipped example rules know nothing of the simulated hotels' price levels, so the demo
    replaces their floors, ceilings and change limit with a band around each room's reference price.
    """
    import yaml

    spec = market_rule_spec(market, band=_BAND, drop_kinds=frozenset({"floor", "ceiling", "max_change"}))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _run_settings(settings: Settings, registry: ModelRegistry, work: Path) -> Settings:
    """``settings`` pointed at this run's registry, rules, audit log, rollout and router state."""
    return settings.model_copy(update={
        "registry_root": registry.root, "rules_file": work / "rules.yaml",
        "audit_log": work / "audit" / "decisions.jsonl", "rollout_state": work / "rollout" / "rollout.json",
        "router_state": work / "router" / "thresholds.json", "trainer_promotion": "rollout",
    })


def _serving_path(run: Settings, features: FeaturesConfig, snap: str) -> ServingPath:
    """The serving path of :mod:`pricestream.app` on the run's settings.

    The demo publishes its decisions itself (stamped with the simulated request time), so the path publishes none.
    """
    return build_serving_path(
        run, publish="none", feature_source=RedisFeatureSource(features),
        config=ScorerConfig(snapshot_id=snap, stale_after_s=None),
    )


def _one_day(loop: _Loop, start: datetime, *, seed: int, report: DemoReport, say: Progress) -> dict[str, Any]:
    say(f"simulating {start.date()}: shoppers priced by the scorer, events and decisions to Kafka")
    decisions: list[PricingDecision] = []
    recent: dict[tuple[Any, ...], str] = {}
    rng = random.Random(seed)
    stage_at = [start + timedelta(hours=h) for h in _STAGE_HOURS]  # a live rollout moves on at these times

    def policy(offer: Offer) -> float:
        while stage_at and offer.at >= stage_at[0]:
            stage_at.pop(0)
            _advance_rollout(loop, report, seed=seed + len(stage_at))
        request = PricingRequest(
            hotel_id=offer.hotel_id, room_type=offer.room_type, stay_date=offer.stay_date, nights=offer.nights,
            channel=offer.channel, event_time=offer.at,  # type: ignore[arg-type]
        )
        # decided at the (simulated) request time, so the label join's horizon runs from there
        decision = loop.serving.scorer.price(request).model_copy(update={"event_time": offer.at})
        decision = _explore(loop.market, decision, rng)
        decisions.append(decision)
        recent[(offer.hotel_id, offer.room_type, offer.stay_date)] = str(decision.decision_id)
        return decision.price

    sim = Simulation(loop.market, start=start, duration=timedelta(days=1), policy=policy, rng_seed=seed)
    acc = DayAccumulator(loop.market)
    with Producer(loop.kafka, topic="behaviour.events") as events:
        for event in sim:
            acc.add(event)
            events.send(_link(event, recent))
    with Producer(loop.kafka, topic="pricing.decisions") as out:
        for decision in decisions:
            out.send(decision)
    loop.served.extend(decisions)
    _finish_rollout(loop, report)
    ours = acc.finish(sim, name="pricestream", first=start, days=1).days[0]
    base = {name: simulate_days(loop.market, pol, days=1, start=start, seed=seed).days[0]
            for name, pol in (("static", static_policy(loop.market)), ("oracle", oracle_policy(loop.market)))}
    model = _learn(loop, report, say)
    _await_features(loop, say)
    report.decisions += len(decisions)
    return {"day": start.date(), "policy": ours.revenue, "static": base["static"].revenue,
            "oracle": base["oracle"].revenue, "policy_expected": ours.expected_revenue,
            "static_expected": base["static"].expected_revenue, "oracle_expected": base["oracle"].expected_revenue,
            "decisions": len(decisions), "model": model}


def _warm_up(loop: _Loop, start: datetime, *, seed: int, say: Progress) -> None:
    """One day of history at the static price (events only), so that the first priced day has features.

    A hotel that switches pricestream on has a booking history; without it the first
    day would be priced on an empty online store, unlike anything the models trained on.
    """
    say(f"warm-up {start.date()}: a day of history at the static price, events to Kafka")
    sim = Simulation(loop.market, start=start, duration=timedelta(days=1), policy=static_policy(loop.market),
                     rng_seed=seed)
    with Producer(loop.kafka, topic="behaviour.events") as events:
        for event in sim:
            events.send(event)
    _await_features(loop, say)


def _explore(market: Market, decision: PricingDecision, rng: random.Random) -> PricingDecision:
    """A model price nudged by a small random factor, inside the band (the label then records the shown price).

    Without it every price the loop learns from is a function of the features it also
    learns from, and updates mistake one for the other (the price response decays).
    Rules decisions and channel-parity bands are left alone.
    """
    if decision.tier == "rules" or any(r.startswith("parity") for r in decision.rule_ids):
        return decision
    ref = market.reference_price(decision.hotel_id, decision.room_type)
    nudged = decision.price * math.exp(rng.gauss(0.0, _EXPLORE_SIGMA))
    price = round(min(max(nudged, ref * _BAND[0]), ref * _BAND[1]), 2)
    return decision.model_copy(update={"price": price})


def _link(event: Record, recent: dict[tuple[Any, ...], str]) -> Record:
    """Tag a view or booking with the decision that priced it (the simulator does not know ids)."""
    kind = getattr(event, "event_type", "")
    if kind not in ("view", "booking"):
        return event
    key = (event.hotel_id, event.room_type, event.stay_date)  # type: ignore[attr-defined]
    decision = recent.get(key)
    if decision is None:
        return event
    # model_construct: the producer validates the record again before it is sent
    return type(event).model_construct(**{**event.__dict__, "decision_id": uuid.UUID(decision)})


def _advance_rollout(loop: _Loop, report: DemoReport, *, seed: int) -> None:
    """Move a live rollout one stage on, gated on a simulator replay of both models (as ``rollout advance
    --source replay`` does); the serving path follows at once."""
    from pricestream.commands.replay import replay_evidence
    from pricing.rules import RuleSet
    from routing.delivery import RolloutController
    from routing.delivery.stages import LIVE_STAGES

    controller = RolloutController(loop.run.delivery())
    state = controller.status()
    if state.stage not in LIVE_STAGES or state.version is None or state.incumbent_version is None:
        return
    evidence = replay_evidence(loop.registry, RuleSet.load(loop.run.rules_file), state.version,
                               state.incumbent_version, n=_GATE_REPLAY_N, seed=seed)
    result = controller.advance(evidence)
    report.rollouts.append(f"{state.version}: {result.from_stage.value} -> {result.stage.value}"
                           + ("" if result.advanced else f" ({result.message[:120]})"))
    loop.serving.follower.step()


def _finish_rollout(loop: _Loop, report: DemoReport) -> None:
    """A rollout that reached full traffic makes its version the registry's live model."""
    from routing.delivery import RolloutController, Stage

    state = RolloutController(loop.run.delivery()).status()
    current = loop.registry.current("light")
    if state.stage == Stage.FULL and state.version and (current is None or current.version != state.version):
        loop.registry.promote(state.version)
        report.promotions += 1
        loop.serving.follower.step()


def _drain(step: Callable[[], Any], counter: str) -> int:
    total, idle = 0, 0
    while idle < _DRAIN_IDLE_BATCHES:
        n = getattr(step(), counter, 0)
        total += n
        idle = idle + 1 if n == 0 else 0
    return total


def _learn(loop: _Loop, report: DemoReport, say: Progress) -> str:
    say("feedback: labels, active sampling, guarded training")
    report.labels += _drain(loop.labels.process_batch, "labels")
    report.training_examples += _drain(loop.sampler.process_batch, "selected")
    _drain(loop.trainer.process_batch, "consumed")
    if len(loop.trainer.buffer) < _MIN_TRAIN_EXAMPLES:
        say(f"{len(loop.trainer.buffer)} examples buffered; training waits for {_MIN_TRAIN_EXAMPLES}")
        return _serving(loop)
    try:
        outcome = loop.trainer.train_now()
    except PricingError as exc:  # a failed update keeps the serving model; the loop goes on
        report.rejections.append(f"training failed: {exc}")
        return _serving(loop)
    if getattr(outcome, "accepted", False) and outcome.version:
        promote_trained(loop.run, outcome.version)  # a rollout, shadow first: the next day moves it on
        report.rollouts.append(f"{outcome.version}: shadow")
        loop.serving.follower.step()  # now, not at the next poll: the next day prices through it
    elif getattr(outcome, "reason", None):
        report.rejections.append(str(outcome.reason))
    return _serving(loop)


def _await_features(loop: _Loop, say: Progress) -> int:
    """Wait (bounded) until the day's features are in the online store: the next day is priced on them.

    The stream job runs behind the burst of a simulated day's events; without this wait
    the scorer would price the next day on a store that is still empty. Caught up means the
    online writer wrote rows and then nothing new for ``_FEATURES_SETTLED_S``.
    """
    say("waiting for the feature job to bring the day's features to the online store")
    deadline = time.monotonic() + _FEATURES_WAIT_S
    last, since = _written(loop), time.monotonic()
    start = last
    while time.monotonic() < deadline:
        time.sleep(_FEATURES_POLL_S)
        now = _written(loop)
        if now != last:
            last, since = now, time.monotonic()
        elif now > start and time.monotonic() - since >= _FEATURES_SETTLED_S:
            break
    if last == start:
        say(f"no features arrived within {_FEATURES_WAIT_S:.0f} s; the next day is priced without new ones")
    return last - start


def _written(loop: _Loop) -> int:
    try:
        status = json.loads(loop.features.status_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    return int(status.get("written") or 0)


def _serving(loop: _Loop) -> str:
    current = loop.registry.current("light")
    return current.version if current else "-"


def _stop(loop: _Loop) -> None:
    loop.serving.close()
    loop.writer_stop.set()
    loop.writer.join(timeout=30)
    end_tree(loop.job)


def _write_report(report: DemoReport, work: Path) -> tuple[Path, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = report.frame()
    out = work / "report"
    out.mkdir(parents=True, exist_ok=True)
    csv = out / "revenue_per_day.csv"
    frame.to_csv(csv, index=False)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for column, label in (("policy", "pricestream (closed loop)"), ("static", "static price"), ("oracle", "oracle")):
        ax.plot(frame.day.astype(str), frame[column], marker="o", label=label)
    ax.set_ylabel("booked revenue per simulated day")
    ax.set_title(f"Closed loop: {report.training_examples} training examples, {report.promotions} promotions")
    ax.legend()
    fig.tight_layout()
    png = out / "revenue_per_day.png"
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return png, csv
