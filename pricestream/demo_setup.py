"""The demo's deployment: bootstrap models, the hotels' rules, the bid forecast, the services' options, start-up.

:func:`start` trains and promotes the first light and heavy models on the market's offers before
the run, writes a rule file for the simulated hotels (:func:`market_rules`), measures the bid
price's forecast (:func:`measure_bid_forecast`), starts the processes of ``pricestream run``
under ``supervisord`` (:class:`pricestream.deployment.Deployment`) on settings of the run's own
(topic prefix, Feast project, state directory) and publishes the warm-up history, as a booking
engine would, before the first priced shopper.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from events.admin import create_topics
from events.models import Record
from events.producer import Producer
from features.snapshots import freeze
from feedback.registry import ModelRegistry
from market import Market, Simulation, static_policy, training_frame
from pricestream.deployment import Deployment, record_deployment
from pricestream.settings import Settings
from pricing.training import train_bundle

Progress = Callable[[str], None]
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
_GATE_REPLAY_N = 400  # replayed requests per gate: enough for the price and latency gates, seconds to run
_READY_S = 300.0  # every process up and healthy (the Flink job's start-up is a minute on a busy host)

@dataclass
class DemoRun:
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


def start(
    settings: Settings, market: Market, *, seed: int, first: datetime, train_every: int, say: Progress
) -> DemoRun:
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
    return DemoRun(settings, deployment, market, http, reference, forecast)


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

