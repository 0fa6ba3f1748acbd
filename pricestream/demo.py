"""The closed-loop demo: the README's main command, driving the deployed pipeline from outside.

The demo starts the processes of ``pricestream run`` (:class:`pricestream.deployment.Deployment`:
the Flink feature job, the online and offline writers, ``serve``, and the label, sampler,
trainer and monitor services, each by its own command under ``supervisord``) on settings of
its own run (a topic prefix, a Feast project and a state directory per run), and then acts
only as the outside world does: for each simulated day the market simulator's shoppers ask
``serve`` for prices over HTTP (``POST /v1/price``), and their behaviour events (views and
bookings tagged with the decision that priced them) go to Kafka through the producer SDK.
``serve`` audits and publishes every decision; the label service joins them with the
outcomes, the sampler selects training examples, the trainer updates the light model
(guarded) and starts a rollout of each version that passes its gate. The demo moves a live
rollout on with ``pricestream rollout advance --source replay`` at fixed hours of the next
simulated day (shadow -> canary -> blend -> full; ``full`` promotes), and waits on the
services' ``/healthz`` (consumer lag 0) and on Kafka and the registry for what they wrote.
At the end it stops every process (SIGTERM, each within its grace period) and draws the
run's monitoring page from the audit log and ``pricing.decisions``.

Revenue per day is compared with a static price and with the simulator's oracle on the same
shoppers (common random numbers), both as booked and as the truth's expected revenue of the
offers shown: at a few thousand offers a day the booking draw (group bookings of up to 5
rooms) moves booked revenue by several percent, so the expectation is the figure that ranks
policies. Each offer's expected value is also taken net of the rooms it may take (the DP oracle's
bid price per room-night at that offer, on the policy's own path: the ``*_net`` columns), the
figure that credits a capacity-aware pricer for rooms kept for later shoppers. A warm-up day of
history at the static price comes first, so the first priced day already has features. The bid
price's forecast ``serve`` prices with (booking curve, room shares, rooms and nights per booking,
cancellations) is measured from that day's events, as
``pricestream bid-price measure`` measures a hotel's history (:func:`pricing.bid_history.measure`),
and given to ``serve`` as ``PRICESTREAM_BID_CONFIG``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pandas as pd

from events.admin import create_topics
from events.models import PricingRequest, Record, dumps
from events.producer import Producer
from features.snapshots import freeze
from feedback.registry import ModelRegistry
from market import DPOracle, Market, Offer, Simulation, static_policy, training_frame
from market import oracle_policy as oracle
from market.evaluate import DayAccumulator, NetValueRecorder, simulate_days
from pricestream.deployment import Deployment, DeploymentError, record_deployment
from pricestream.settings import Settings
from pricestream.traffic import link_decision
from pricing.training import train_bundle

_BID_FILE = "bid.json"  # the run's measured bid forecast, serve's PRICESTREAM_BID_CONFIG
_BOOTSTRAP_ROWS = 20_000  # enough for a stable first model, trained in seconds
_LABEL_HORIZON_HOURS = 6.0  # short, so a simulated day yields labels the same day
# The Fisher sampler (outcome variance x leverage, the variance-optimal rule for a weighted fit;
# bench/label_efficiency.py) has informativeness g / (4 x mean g): c = 1.3 selects roughly a
# third of the labels, the floor keeps every label selectable (weights 1/q keep training unbiased).
_SAMPLER_STRATEGY = "fisher"
_SAMPLER_C = 1.3
_SAMPLER_FLOOR = 0.05
TRAIN_EVERY = 150  # examples per guarded update: fewer and a LightGBM update is noise
# The guard validates on 4,000 snapshot rows, where a retrain on a day's few hundred examples lands
# within a few thousandths of the live model either way (a trial run: 0.4674 vs 0.4649, rejected by
# the default 0.002), so a two-day demo would often show no rollout at all. 0.01 still rejects a
# clearly worse model; the rollout's gates (both models on a seeded replay) decide whether it serves.
_GUARD_TOLERANCE = 0.01
# The poison guard compares each batch's feature means with the bootstrap snapshot (the simulator's
# steady state). The demo's history is one warm-up day, so its 7-day windows start far from that
# state: a trial run quarantined every batch of day 1 on lead_time_std_days_7d (2.9, 2.7, 2.6, 2.3
# sds, shrinking as days accumulate). 4 sds lets those through and still stops injected rows from
# another distribution, which move a mean by several times that.
_MAX_FEATURE_SHIFT = 4.0
MARKETS = ("resort", "city", "flat")
"""Markets the demo runs (:mod:`market.presets`): the calibrated ``resort`` and ``city``, and ``flat``."""
DEFAULT_MARKET = "city"
"""``pricestream demo``'s market when none is named (``--market``, ``PRICESTREAM_DEMO_MARKET``)."""
_BAND = (0.25, 4.0)
"""Floor and ceiling as multiples of a room's reference price: bench/revenue.py's band. The reference is the year's
level; the calibrated resort's willingness to pay swings 3.9x over a year, so a 0.85-1.3 band (the demo's until
2 December 2026) kept every policy but static and the oracles near the reference in any month."""
_PARITY_MODE = "not_below"
"""The OTA/GDS parity rule as a hotel bound by a parity contract sets it (``ChannelParityRule.mode``): not below the
direct price. As shipped (``band``) it pins every OTA and GDS request, most shoppers of both presets, to the rules
price +-3%. ``bench/revenue.py`` prices without it by default (``--parity off``, as the oracles price); on the city
from 1 November it costs pricestream about a point of the DP (0.966 against 0.977, docs/revenue-management.md)."""
_WARMUP_DAYS = 7
"""Days of history at the static price before the first priced day: the 7-day windows of the features are full
(one day left them far from the training snapshot's state, see ``_MAX_FEATURE_SHIFT``)."""
_YEAR_SEARCHES = 20_000
"""Searches sampled from the market's year for the bid forecast's booking curve (as bench/revenue.py measures it)."""
# Shown prices are drawn within +-5% of the chosen one (serve's exploration, propensity logged):
# without it every price the loop learns from is a function of the features it also learns from,
# and updates mistake one for the other. About 0.3% of revenue near the optimum.
_EXPLORE_BAND = 0.05
# The shadow gate's flip (settings PRICESTREAM_ROLLOUT_*): at the service's 1% / 10% no update of the demo ever
# left shadow (flip rates 0.22-0.46 in every run of 2 December): a retrain on a day's labels moves more than a tenth
# of prices by 1%, less than the +-5% the shoppers already see from exploration. A flip is a move beyond that band,
# and up to a quarter of inputs may flip; the KS and mean-shift gates still stop a systematic move, and the canary
# and blend stages judge the candidate on its bookings and revenue.
_MAX_FLIP_RATE = 0.25
_GUARD_HOLDOUT = 0.2  # = feedback.continued's default validation_fraction
# A simulated day is produced in one burst of seconds; with the job's 60 s default, partitions
# that get no events (few hotels, more partitions) held the watermark back past the next day's
# scoring, so no window fired and the scorer saw no features at all. 10 s still tolerates a
# briefly starved reader on a busy host.
_IDLE_TIMEOUT_MS = 10_000
_DEADLINE_MS = 250.0  # nine processes share the host: a 50 ms budget would send loaded moments to the rules
_STAGE_HOURS = (6, 12, 18)  # shadow -> canary -> blend -> full over a simulated day's traffic
_GATE_REPLAY_N = 400  # replayed requests per gate: enough for the price and latency gates, seconds to run
_READY_S = 300.0  # every process up and healthy (the Flink job's start-up is a minute on a busy host)
_FEATURES_WAIT_S = 240.0  # the first day includes the Flink job's first records
_FEATURES_SETTLED_S = 8.0  # the online writer idle (lag 0, nothing new) this long: the job caught up with the day
_FEEDBACK_SETTLED_S = 4.0
_FEEDBACK_WAIT_S = 180.0
_FOLLOW_WAIT_S = 10.0  # serve follows the rollout file within its follow interval (200 ms)

Progress = Callable[[str], None]
_NET_MEANS = ("each offer's expected revenue less the DP oracle's bid price of the room-nights it may take: "
              "a sale now is charged what the room would fetch from later shoppers")
RevenueLines = Callable[[pd.DataFrame], list[str]]
"""Hook: the revenue comparison of a run's per-day frame as report lines (see :func:`revenue_lines`)."""


def revenue_lines(
    f: pd.DataFrame, *, market: Market | None = None, seed: int | None = None, rules_file: Path | None = None,
    dp: DPOracle | None = None,
) -> list[str]:
    """The run's revenue against the static price and the myopic oracle: net of the rooms' value, booked, expected.

    Net of the rooms' value comes first (when ``f`` has the ``*_net`` columns): over a window of a few days
    it is the measure that credits a room kept for a later shopper; booked and expected revenue count
    only the bookings taken in the window, where a capacity-aware pricer (and the DP oracle) looks worse
    than a price that sells rooms now.

    The hook of the report: pass another :data:`RevenueLines` to :meth:`DemoReport.summary_lines`.
    With the run's ``market``, ``seed`` and ``rules_file`` (``pricestream demo`` passes them), the
    lines end with the comparison on the run's own shoppers against rules only and the DP oracle
    (:func:`pricestream.demo_revenue.comparison_lines`); ``dp`` is the run's DP oracle
    (:attr:`DemoReport.dp`), whose bid prices valued the rooms of the run's own offers.
    """
    def versus(what: str, cols: tuple[str, str, str]) -> str:
        mine, static, best = (f[c].sum() for c in cols)
        return (f"{what}: pricestream {mine:,.0f} vs static {static:,.0f} ({(mine / static - 1) * 100:+.1f}%) "
                f"vs myopic oracle {best:,.0f} ({mine / best * 100:.1f}%)")

    lines = []
    if {"policy_net", "static_net", "oracle_net"} <= set(f.columns):
        lines.append(versus(f"net of the rooms' value, the window's yardstick ({_NET_MEANS})",
                            ("policy_net", "static_net", "oracle_net")))
    lines += [
        versus(f"booked revenue of the bookings taken in these {len(f)} days (a room kept for a later shopper "
               "counts nothing)", ("policy", "static", "oracle")),
        versus("expected revenue of the offers shown (the truth's expectation: no booking-lottery noise)",
               ("policy_expected", "static_expected", "oracle_expected")),
    ]
    if market is not None and seed is not None and rules_file is not None and len(f):
        from pricestream.demo_revenue import comparison_lines
        from pricing.rules import RuleSet

        rules = RuleSet.from_yaml(rules_file.read_text(encoding="utf-8"))
        lines += comparison_lines(f, market=market, seed=seed, rules=rules, dp=dp)
    return lines


def _net_of(r: Any) -> str:
    """A per-day line's net of the rooms' value (:func:`revenue_lines`), when the day has it."""
    if getattr(r, "policy_net", None) is None:
        return ""
    return f"; net of the rooms' value {r.policy_net:,.0f} / {r.static_net:,.0f} / {r.oracle_net:,.0f}"


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
    state_dir: Path | None = None
    """The run's deployment state (audit log, registry, logs under ``run/logs``)."""
    unclean: dict[str, int] = field(default_factory=dict)
    """Processes that did not stop cleanly (name -> exit status); empty when all did."""
    dashboard_path: Path | None = None
    plot_path: Path | None = None
    csv_path: Path | None = None
    bid_forecast: str | None = None
    """What the bid price's forecast was measured from (the warm-up days, the market's year) and what it found."""
    dp: DPOracle | None = field(default=None, repr=False)
    """The run's DP oracle (its nights and horizon): its bid prices value the rooms of every policy's offers
    (the frame's ``<policy>_net`` columns); the comparison's DP row reuses it."""
    market: str = DEFAULT_MARKET
    """The market the run simulated (:data:`MARKETS`); :func:`demo_market` rebuilds it."""

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.days)

    def summary_lines(self, revenue: RevenueLines | None = None) -> list[str]:
        f = self.frame()
        lines = [
            f"{r.day}: pricestream {r.policy:,.0f}  static {r.static:,.0f}  myopic oracle {r.oracle:,.0f}  "
            f"booked{_net_of(r)} (decisions {r.decisions}, model {r.model})"
            for r in f.itertuples()
        ]
        lines += (revenue or revenue_lines)(f)
        lines += [
            f"decisions {self.decisions}, labels {self.labels}, training examples written {self.training_examples}",
            f"model versions {self.model_versions}, promotions {self.promotions}, rejections {len(self.rejections)}",
        ]
        lines += [f"  rejected update: {reason[:160]}" for reason in self.rejections]
        lines += [f"  rollout {step}" for step in self.rollouts]
        if self.bid_forecast is not None:
            lines.append(f"bid price forecast: {self.bid_forecast}")
        lines.append(f"market: {self.market} (market.presets)")
        stopped = "every process stopped cleanly" if not self.unclean else f"unclean stops: {self.unclean}"
        lines.append(f"deployment: {self.state_dir} ({stopped})")
        if self.plot_path is not None:
            lines.append(f"plot: {self.plot_path}  table: {self.csv_path}")
        if self.dashboard_path is not None:
            lines.append(f"dashboard: {self.dashboard_path}")
        return lines


@dataclass
class _Run:
    """One demo run: the deployment it drives and what it needs to act as the outside world."""

    home: Settings
    deployment: Deployment
    market: Market
    http: httpx.Client
    reference: str
    """Snapshot the bootstrap models trained on: the drift reference of the run's dashboard."""
    bid_forecast: str = ""
    """What ``serve``'s bid forecast was measured from (:attr:`DemoReport.bid_forecast`)."""

    @property
    def settings(self) -> Settings:
        return self.deployment.settings

    @property
    def registry(self) -> ModelRegistry:
        return ModelRegistry(self.settings.registry())


def demo_market(name: str, *, hotels: int, seed: int) -> Market:
    """The demo's market ``name`` (:data:`MARKETS`) for ``hotels`` and ``seed``: its truth depends on these alone.

    Raises:
        UnknownKeyError: ``name`` is not a preset.
    """
    from market.presets import preset

    return Market(preset(name, hotels=hotels, seed=seed))


def run_demo(
    settings: Settings,
    *,
    days: int = 3,
    hotels: int = 8,
    seed: int = 7,
    market: str = DEFAULT_MARKET,
    train_every: int = TRAIN_EVERY,
    on_progress: Progress | None = None,
) -> DemoReport:
    """Run the closed loop for ``days`` simulated days on a fresh deployment; returns the report.

    ``train_every``: training examples per guarded update of the trainer (``TRAIN_EVERY`` by default).

    Raises:
        UnknownKeyError: ``market`` is not one of :data:`MARKETS` (before anything starts).
        DeploymentError: a process did not start or answer (the message names it and where its logs are).
    """
    say = on_progress or (lambda _msg: None)
    simulated = demo_market(market, hotels=hotels, seed=seed)
    first = datetime.now(tz=UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    run = _start(settings, simulated, seed=seed, first=first, train_every=train_every, say=say)
    from pricestream.demo_revenue import run_oracle

    dp = run_oracle(run.market, first=first, days=days)
    report = DemoReport(state_dir=run.settings.state_dir, bid_forecast=run.bid_forecast, market=market, dp=dp)
    try:
        _await_features(run, 0, say)  # the warm-up day's, published while the processes started
        for d in range(days):
            day = _one_day(run, first + timedelta(days=d), seed=seed + d, report=report, dp=dp, say=say)
            report.days.append(day)
    finally:
        say("stopping every process of the deployment (SIGTERM, each within its grace period)")
        run.http.close()
        report.unclean = run.deployment.stop()
    _tally(run, report)
    report.plot_path, report.csv_path = _write_report(report, run.settings.state_dir)
    report.dashboard_path = _write_dashboard(run)
    return report


def _run_settings(settings: Settings, work: Path, run_id: str) -> Settings:
    """``settings`` for this run's deployment: its own state dir, topics, Feast project and rules."""
    return settings.model_copy(update={
        "state_dir": work, "topic_prefix": f"demo{run_id}-", "feast_project": f"demo{run_id}",
        "rules_file": work / "rules.yaml", "reports_dir": work / "report", "bid_config": work / _BID_FILE,
        "offline_root": None, "snapshot_root": None, "registry_root": None, "audit_log": None,
        "rollout_state": None, "router_state": None,
        "trainer_promotion": "rollout", "decision_time": "request", "explore_band": _EXPLORE_BAND,
        "job_idle_timeout_ms": _IDLE_TIMEOUT_MS, "deadline_ms": _DEADLINE_MS,
    })


def _service_env(reference: str, *, train_every: int = TRAIN_EVERY) -> dict[str, str]:
    """The services' own options for the demo (each is a ``PRICESTREAM_*`` variable of its command)."""
    return {
        "PRICESTREAM_JOB_STARTUP": "earliest-offset",
        "PRICESTREAM_LABEL_HORIZON_HOURS": str(_LABEL_HORIZON_HOURS),
        "PRICESTREAM_SAMPLER_STRATEGY": _SAMPLER_STRATEGY, "PRICESTREAM_SAMPLER_C": str(_SAMPLER_C),
        "PRICESTREAM_SAMPLER_FLOOR": str(_SAMPLER_FLOOR), "PRICESTREAM_TRAINER_TRAIN_EVERY": str(train_every),
        "PRICESTREAM_TRAINER_GUARD_TOLERANCE": str(_GUARD_TOLERANCE),
        "PRICESTREAM_TRAINER_MAX_FEATURE_SHIFT": str(_MAX_FEATURE_SHIFT),
        "PRICESTREAM_REFERENCE": reference, "PRICESTREAM_REPLAY_REQUESTS": str(_GATE_REPLAY_N),
        "PRICESTREAM_ROLLOUT_FLIP_THRESHOLD": str(_EXPLORE_BAND),
        "PRICESTREAM_ROLLOUT_MAX_FLIP_RATE": str(_MAX_FLIP_RATE),
    }


def _start(
    settings: Settings, market: Market, *, seed: int, first: datetime, train_every: int, say: Progress
) -> _Run:
    """Bootstrap models, rules and the bid forecast, start the deployment, publish the warm-up days; wait ready."""
    run_id = datetime.now(tz=UTC).strftime("%Y%m%d%H%M%S")
    work = settings.data_dir / "demo" / run_id
    run = _run_settings(settings, work, run_id)
    history = first - timedelta(days=_WARMUP_DAYS)
    create_topics(run.kafka())
    say("training the bootstrap light and heavy models on 60 days of the market's offers before the warm-up")
    reference = _bootstrap(market, ModelRegistry(run.registry()), run.snapshots(), seed=seed, before=history)
    market_rules(market, run.rules_file)
    warm = _warm_up(market, history, seed=seed - 1)
    forecast = measure_bid_forecast(warm, work / _BID_FILE, market=market, seed=seed)
    say(f"bid price forecast: {forecast}")
    deployment = Deployment(run, extra_env=_service_env(reference, train_every=train_every))
    say(f"starting the pipeline's processes under supervisord ({run.state_dir / 'run' / 'logs'})")
    deployment.start()
    record_deployment(settings, run, reference=reference)  # `pricestream monitor report` finds this run
    try:
        say(f"warm-up from {history.date()}: {_WARMUP_DAYS} days of history at the static price, "
            f"{len(warm)} events to Kafka")
        with Producer(run.acting_as("producer").kafka(), topic="behaviour.events") as events:  # as a booking engine
            for event in warm:  # Kafka keeps them until the feature job is up
                events.send(event)
        deployment.wait_ready(timeout_s=_READY_S, on_wait=lambda waiting: say(f"waiting for {waiting}"))
    except BaseException:  # a refused start, a probe's surprise or Ctrl-C: never leave the processes running
        deployment.stop()
        raise
    http = httpx.Client(base_url=deployment.base_url, timeout=30.0)
    return _Run(settings, deployment, market, http, reference, forecast)


def measure_bid_forecast(events: list[Record], path: Path, *, market: Market | None = None, seed: int = 0) -> str:
    """Measure the bid price's forecast from ``events`` (:func:`pricing.bid_history.measure`), write it to ``path``.

    With the run's ``market``, what a hotel knows from last year replaces what a week cannot show
    (:func:`year_forecast`): the booking curve over the market's horizon, each room type's share of
    the searches and the cancellation share (a week's bookings have hardly started to cancel), and
    whether a stay holds every night. Rooms and nights per booking stay the events' own.
    Returns a line saying what it was measured from and what it found (``serve`` loads ``path``).
    """
    from pricing.bid_history import measure
    from pricing.bid_price import BidPriceConfig

    history = measure(events)
    cfg, source = history.config, "the warm-up"
    if market is not None:
        cfg = BidPriceConfig.model_validate({**cfg.model_dump(), **year_forecast(market, seed=seed)})
        source = "the warm-up (rooms, nights) and the market's year (curve, room shares, cancellations)"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(cfg.model_dump_json(indent=2) + "\n")
    shares = ", ".join(f"{name} {share:.2f}" for name, share in cfg.room_shares or ())
    return (f"from {source}: {history.searches} searches, {history.bookings} bookings, "
            f"{history.cancellations} cancellations; horizon {cfg.horizon_days} days, room shares {shares}, "
            f"{cfg.rooms_per_booking:.2f} rooms and {cfg.nights_per_booking:.2f} nights per booking, "
            f"{cfg.cancel_share:.3f} of rooms cancelled -> {path}")


def year_forecast(market: Market, *, seed: int) -> dict[str, Any]:
    """The bid forecast's fields a year of the market's history gives, as bench/revenue.py measures them.

    The curve is the lead time of a year of arrival nights' searches, sampled the way shoppers arrive
    (a few weeks of searches mix the curve with the season); the cancellation share is the market's
    measured rate (:func:`market.calibration.measure`).
    """
    import numpy as np

    from market.calibration import _sample
    from market.calibration import measure as calibrate
    from pricing.bid_price import BookingCurve

    _, room, _, ordinal, ts = _sample(market, _YEAR_SEARCHES, np.random.default_rng(seed))
    leads = (np.array([market.checkin_ts(int(o)) for o in ordinal]) - ts) / 86_400.0
    horizon = market.config.horizon_days
    names = market.config.room_types
    return {
        "curve": BookingCurve.from_leads(leads.tolist(), horizon).cumulative, "horizon_days": horizon,
        "room_shares": tuple((name, float(np.mean(room == i))) for i, name in enumerate(names)),
        "cancel_share": min(calibrate(market, n=3000, seed=seed)["cancel_rate"], 0.9),
        "stays_hold_nights": market.config.stays_hold_nights,
    }


def _bootstrap(market: Market, registry: ModelRegistry, snapshots: Path, *, seed: int, before: datetime) -> str:
    """Train, register and promote the first light and heavy models; returns their snapshot's id.

    They learn from the 60 days of offers ``before`` the history the demo publishes (the hotel's past,
    as bench/revenue.py trains). The trainer's guard validates candidates on the newest part of the
    snapshot; the serving model must not have seen those rows, or it would win every comparison by memory.
    """
    frame = training_frame(market, n=_BOOTSTRAP_ROWS, seed=seed, start=before - timedelta(days=60), days=60)
    frozen = frame.drop(columns=["true_prob"]).rename(columns={"event_time": "event_timestamp"})
    manifest = freeze(frozen, root=snapshots, as_of=datetime.now(tz=UTC), definitions_hash="simulator-bootstrap")
    older = frame.sort_values("event_time").iloc[: int(len(frame) * (1 - _GUARD_HOLDOUT))]
    for tier in ("light", "heavy"):
        info = train_bundle(older, snapshots.parent / "bootstrap" / tier, tier=tier, seed=seed)
        registry.promote(registry.register(info.path, tier=tier, snapshot_id=manifest.id, metrics=info.metrics))
    return manifest.id


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
    replaces their floors, ceilings and change limit with a band around each room's reference price,
    and sets the channel parity rule as the benchmark does (:data:`_PARITY_MODE`).
    """
    import yaml

    spec = market_rule_spec(market, band=_BAND, drop_kinds=frozenset({"floor", "ceiling", "max_change"}))
    for rule in spec["rules"]:
        if rule["kind"] == "channel_parity":
            rule["mode"] = _PARITY_MODE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _warm_up(market: Market, start: datetime, *, seed: int) -> list[Record]:
    """:data:`_WARMUP_DAYS` of history at the static price (their events), so that the first priced day has features.

    A hotel that switches pricestream on has a booking history; without it the first
    day would be priced on an empty online store, unlike anything the models trained on.
    """
    sim = Simulation(market, start=start, duration=timedelta(days=_WARMUP_DAYS), policy=static_policy(market),
                     rng_seed=seed)
    return list(sim)


def _one_day(
    run: _Run, start: datetime, *, seed: int, report: DemoReport, dp: DPOracle, say: Progress
) -> dict[str, Any]:
    say(f"simulating {start.date()}: shoppers priced by serve over HTTP, their events to Kafka")
    recent: dict[tuple[Any, ...], str] = {}
    served: list[str] = []
    stage_at = [start + timedelta(hours=h) for h in _STAGE_HOURS]  # a live rollout moves on at these times

    def policy(offer: Offer) -> float:
        while stage_at and offer.at >= stage_at[0]:
            stage_at.pop(0)
            _advance_rollout(run, report, seed=seed + len(stage_at))
        request = PricingRequest(
            hotel_id=offer.hotel_id, room_type=offer.room_type, stay_date=offer.stay_date, nights=offer.nights,
            channel=offer.channel, event_time=offer.at,  # type: ignore[arg-type]
        )
        decision = _price(run, request)
        recent[(offer.hotel_id, offer.room_type, offer.stay_date)] = str(decision["decision_id"])
        served.append(str(decision.get("model_version") or "-"))
        return float(decision["price"])

    bid = dp.bid_price  # each offer's rooms valued at the DP oracle's bid price, on each policy's own path
    recorded = NetValueRecorder(run.market, policy, bid)
    sim = Simulation(run.market, start=start, duration=timedelta(days=1), policy=recorded, rng_seed=seed)
    acc = DayAccumulator(run.market)
    before = _consumed_features(run)
    with Producer(run.settings.acting_as("producer").kafka(), topic="behaviour.events") as events:
        for event in sim:
            acc.add(event)
            events.send(link_decision(event, recent))
    ours = acc.finish(sim, name="pricestream", first=start, days=1).days[0]
    base, net = {}, {"policy": recorded.total()}
    for name, pol in (("static", static_policy(run.market)), ("oracle", oracle(run.market))):
        rec = NetValueRecorder(run.market, pol, bid)
        base[name] = simulate_days(run.market, rec, days=1, start=start, seed=seed).days[0]
        net[name] = rec.total()
    say("feedback: labels, active sampling, guarded training (waiting on the services)")
    _await_feedback(run, report, say)
    _await_features(run, before, say)
    report.decisions += len(served)
    return {"day": start.date(), "policy": ours.revenue, "static": base["static"].revenue,
            "oracle": base["oracle"].revenue, "policy_expected": ours.expected_revenue,
            "static_expected": base["static"].expected_revenue, "oracle_expected": base["oracle"].expected_revenue,
            "policy_net": net["policy"], "static_net": net["static"], "oracle_net": net["oracle"],
            "decisions": len(served), "model": _serving(run)}


def _price(run: _Run, request: PricingRequest) -> dict[str, Any]:
    """``POST /v1/price`` to serve: the decision as its JSON body.

    Raises:
        DeploymentError: serve answered with an error (its status and body are in the message).
    """
    resp = run.http.post("/v1/price", content=dumps(request), headers={"content-type": "application/json"})
    if resp.status_code != 200:
        msg = f"serve answered {resp.status_code} to a valid request: {resp.text[:300]}"
        raise DeploymentError(msg)
    body: dict[str, Any] = resp.json()
    return body


def _advance_rollout(run: _Run, report: DemoReport, *, seed: int) -> None:
    """Move a live rollout one stage on by command, gated on a seeded simulator replay of both models
    (``pricestream rollout advance V --source replay``); then wait until serve follows it."""
    from delivery import StateStore
    from delivery.stages import LIVE_STAGES

    state = StateStore(run.settings.rollout()).load()
    if state is None or state.stage not in LIVE_STAGES or state.version is None:
        return
    done = run.deployment.cli("rollout", "advance", state.version, "--source", "replay", "--seed", str(seed))
    after = StateStore(run.settings.rollout()).load()
    stage = after.stage.value if after is not None else "?"
    note = "" if done.returncode == 0 else f" ({(done.stderr or done.stdout).strip().splitlines()[-1][:120]})"
    report.rollouts.append(f"{state.version}: {state.stage.value} -> {stage}{note}")
    if stage == "full":
        report.promotions += 1
    _await_serving_stage(run, stage)


def _await_serving_stage(run: _Run, stage: str) -> None:
    """Until serve's ``/healthz`` shows the rollout in ``stage`` (it follows the state file, no restart)."""
    deadline = time.monotonic() + _FOLLOW_WAIT_S
    while time.monotonic() < deadline:
        body = run.deployment.health("serve")
        if (body.get("rollout") or {}).get("stage") == stage:
            return
        time.sleep(0.1)


def _await_feedback(run: _Run, report: DemoReport, say: Progress) -> None:
    """Until the label, sampler and trainer services have caught up with the day (lag 0, nothing new)."""
    names = ("labels", "sampler", "trainer")
    if not run.deployment.caught_up(names, settle_s=_FEEDBACK_SETTLED_S, timeout_s=_FEEDBACK_WAIT_S):
        say(f"the feedback services did not catch up within {_FEEDBACK_WAIT_S:.0f} s; the day goes on")
    from delivery import Stage, StateStore

    state = StateStore(run.settings.rollout()).load()  # the trainer starts a rollout of what passed its gate
    if state is not None and state.stage == Stage.SHADOW and f"{state.version}: shadow" not in report.rollouts:
        report.rollouts.append(f"{state.version}: shadow")


def _feature_reader(run: _Run) -> str:
    """The service whose progress on ``features.v1`` tells the day's features are out of the job.

    The online writer when it runs; when the job writes Redis itself (the default), the offline
    writer: the job sends a row to Redis within its sink's flush interval of sending it to the topic.
    """
    return "offline-writer" if run.settings.job_writes_online else "online-writer"


def _consumed_features(run: _Run) -> int:
    """Feature rows :func:`_feature_reader` has consumed so far (its ``/healthz``)."""
    return int(run.deployment.health(_feature_reader(run)).get("consumed") or 0)


def _await_features(run: _Run, before: int, say: Progress) -> None:
    """Wait (bounded) until the day's features are in the online store: the next day is priced on them.

    The stream job runs behind the burst of a simulated day's events; without this wait the
    scorer would price the next day on a store that is still empty. Caught up means the feature
    reader consumed rows since ``before`` and then nothing new, at lag 0, for ``_FEATURES_SETTLED_S``.
    """
    say("waiting for the feature job to bring the day's features to the online store")
    deadline = time.monotonic() + _FEATURES_WAIT_S
    while time.monotonic() < deadline and _consumed_features(run) <= before:
        time.sleep(1.0)
    left = max(deadline - time.monotonic(), _FEATURES_SETTLED_S * 2)
    if not run.deployment.caught_up((_feature_reader(run),), settle_s=_FEATURES_SETTLED_S, timeout_s=left):
        say(f"no features arrived within {_FEATURES_WAIT_S:.0f} s; the next day is priced without new ones")


def _serving(run: _Run) -> str:
    current = run.registry.current("light")
    return current.version if current else "-"


def _tally(run: _Run, report: DemoReport) -> None:
    """Labels and training examples as Kafka holds them (committed, by id), versions and rejections."""
    from feedback.services.trainer_service import REJECTIONS
    from pricestream.commands.monitoring import read_records

    kafka = run.settings.kafka()
    labels = {(r.get("decision_id"), r.get("revision")) for r in read_records(kafka, "feedback.labels")
              if isinstance(r, dict) and r.get("event_type") == "label"}
    examples = {r.get("event_id") for r in read_records(kafka, "training.examples")
                if isinstance(r, dict) and r.get("event_type") == "training_example"}
    report.labels, report.training_examples = len(labels), len(examples)
    report.model_versions = [e.version for e in run.registry.list()]
    rejected = run.registry.root / REJECTIONS
    if rejected.exists():
        report.rejections = [str(json.loads(line).get("reason") or "?")
                             for line in rejected.read_text(encoding="utf-8").splitlines() if line.strip()]


def _write_dashboard(run: _Run) -> Path | None:
    """The run's monitoring page, as ``pricestream monitor report`` draws it for this deployment."""
    from delivery import StateStore
    from features.snapshots import load_snapshot
    from pricestream.commands import monitoring as mon

    audit = run.settings.audit()
    if not audit.exists():
        return None
    decided = mon.audit_frame(audit)
    if decided.empty:
        return None
    features = mon.records_features(mon.read_records(run.settings.kafka(), "pricing.decisions"))
    state = StateStore(run.settings.rollout()).load()
    return mon.write_run_dashboard(
        run.settings.reports_dir / "monitor.html", decided=decided, features=features,
        reference=load_snapshot(run.settings.snapshots(), run.reference),
        rollout_history=state.history if state else (), window=timedelta(days=2), staleness=timedelta(hours=6),
    )


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
