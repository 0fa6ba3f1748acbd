"""Cold start measured: a new hotel's revenue per day against static, against the mature hotels' share of the DP oracle.

For each preset (``resort``, ``city``) a market of ``--hotels`` hotels: all but the
last are mature (the pooled light and heavy models are trained on their 60 days of
history before the start, as ``bench/revenue.py`` trains), the last joins on day 0:
the stream has none of its behaviour events (searches, views, bookings, cancellations)
before then, only what an onboarding brings (``--onboard``: its rooms left per night and its
competitors' rates, or nothing), no model has seen it, and it is priced in the three stages of :mod:`pricing.cold_start`
(:class:`~pricing.cold_start.ColdStartScorer`, the same scorer, rules, ONNX models and
bid price that the service runs): rules on its first ``transfer_after_days``, then the
pooled models, then its own models, continued from the pooled ones on its own labels
once it has ``own_after_labels`` of them. Its labels are joined in-process from its
decisions and the bookings that follow them (a view with no booking within
``learning.LABEL_HORIZON_H`` is a 0), as the label service joins them (``learning.LabelJoin``).

Per seed (common random numbers), the same shoppers are priced by

* ``static``: every hotel at its reference price;
* ``dp``: the DP oracle of ``bench/revenue.py`` (``market.DPOracle``) for every hotel;
* ``staged``: the mature hotels by the pooled models, the new hotel in its stages;
* ``rules_only``: the same, the new hotel by rules throughout (stage one held);
* ``transfer_only``: the same, the new hotel by the pooled models from day 0, never refitted;
* ``mature_self``: the control, the same new hotel as if it were mature: the stream holds its whole
  history and every hotel is priced by light and heavy models trained on all hotels' 60 days, the new
  one's included. Its share of DP is that hotel's own mature share on the same shoppers, so the ratio
  of ``staged`` to it cancels what differs between hotels and between days (the third criterion below).

Revenue per day of a hotel is that of the bookings it takes that day (any night),
net of expected cancellations; with ``--measure net`` (the default) each booking is
also charged the opportunity cost of its rooms, the DP oracle's bid price per room-night at the rooms left
of the offer it came from, so that selling now is no longer free over a short window.
The mature share is the mature hotels' revenue in ``staged`` over theirs in ``dp`` over the window;
the new hotel's share per day is its
revenue over its ``dp`` revenue that day (sums over seeds), and also over a trailing
``TRAIL_DAYS`` window (a day holds a few bookings of one hotel). Days to 95%: the first
day from which the trailing share stays at or above 0.95 x the mature share over the whole window;
and, a second criterion that cancels day effects, the first day from which it stays at or above
0.95 x the mature hotels' trailing share on the same days; and a third, paired one: from which day
``staged``'s trailing share stays at or above 0.95 x ``mature_self``'s, the same hotel mature, on the same
days and shoppers. In ``staged`` the new hotel's stage-two
prices are explored (``--explore-band``, logged propensities, :mod:`pricing.exploration`) so that its
labels identify its elasticity; its refit keeps the pooled price response (``--refit-price-response``).
Writes a PNG (share by day per preset, the stages shaded). Last line: per preset, the
days to 95% by both criteria and each stage's share.

    .venv/bin/python bench/cold_start.py [--days 10] [--seeds 3] [--hotels 3] [--presets resort city]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from learning import LabelJoin
from revenue import DEFAULT_START, history, request_of, scorer, scorer_policy
from stream_features import AtRequestTime, StreamFeatures

from market import DPOracle, Market, Simulation, static_policy, training_frame
from market.compare import WARMUP_DAYS
from market.presets import preset
from market.shoppers import Offer, Policy
from pricing.bid_price import BidPriceConfig
from pricing.cold_start import (
    MIN_SCALE_DAYS,
    ColdStartConfig,
    ColdStartScorer,
    PartialWindows,
    PriorWeek,
    Stage,
    refit_bundles,
)
from pricing.exploration import ExplorationConfig
from pricing.feature_source import FeatureSource
from pricing.models import DemandModelConfig
from pricing.scorer import Scorer
from pricing.training import train_bundle

"""Hours after a view within which its booking counts (the simulator books 30 s + ~4 min after a view)."""
TRAIL_DAYS = 3
"""Days in the trailing share: one hotel's day holds a handful of bookings, too few for a daily ratio."""
TARGET = 0.95
GOAL_DAYS = 7
"""The goal's days: from day 7 on the new hotel's share of DP is to be 95% of the mature hotels' on the same days."""
RUNS = ("static", "dp", "staged", "rules_only", "transfer_only", "mature_self")
STAGED_AT = "staged@"
"""Run name prefix of ``staged`` with another ``--own-weights`` value (``staged@4``)."""
ONBOARD = {"inventory": frozenset({"inventory", "competitor_rate"}), "none": frozenset()}
"""What a joining hotel brings (``--onboard``): ``inventory``, its channel manager's rooms left per night and the
rate shopper's competitor rates (market data, collected whether or not the hotel is a customer), as an onboarding
does; ``none``, nothing: its first inventory feature comes with its first booking after it joins."""


@dataclass
class Tally:
    """Net revenue per (day index, hotel) of one run, and the new hotel's stage per day."""

    revenue: dict[tuple[int, str], float] = field(default_factory=lambda: defaultdict(float))
    net: dict[tuple[int, str], float] = field(default_factory=lambda: defaultdict(float))
    """The same bookings net of their rooms' opportunity cost: the DP oracle's bid price at the booking's state."""
    stages: dict[int, dict[str, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    unmatched: int = 0
    """Bookings with no offer found to value their rooms at (counted at a bid price of 0)."""

    def day(self, d: int, hotels: tuple[str, ...], *, measure: str = "revenue") -> float:
        values = self.net if measure == "net" else self.revenue
        return sum(values[(d, h)] for h in hotels)


def run(
    market: Market,
    policy: Policy,
    *,
    start: datetime,
    days: int,
    seed: int,
    on_event: Callable[[object], None] | None,
    dp: DPOracle,
) -> Tally:
    """``WARMUP_DAYS`` at the static price, then ``policy``; per day and hotel the bookings' revenue and net value.

    A booking's net value is its expected revenue less the opportunity cost of the rooms it takes: the DP
    oracle's bid price per room-night (its value-to-go difference, ``DPOracle.bid_price``) at the offer that
    led to it, so at the rooms left of the policy's own path. The DP oracle maximises the same quantity shopper
    by shopper, so over a short window it is the reference that selling now no longer beats.
    """
    static = static_policy(market)
    cancel = {s.name: s.cancel_rate for s in market.config.segments}
    tally = Tally()
    offers: dict[tuple[object, ...], Offer] = {}

    def priced(offer: Offer) -> float:
        if offer.at < start:
            return static(offer)
        price = policy(offer)
        offers[(*_key(offer), price)] = offer
        return price

    sim = Simulation(
        market,
        start=start - timedelta(days=WARMUP_DAYS),
        duration=timedelta(days=WARMUP_DAYS + days),
        policy=priced,
        rng_seed=seed,
    )
    for event in sim:
        if on_event is not None:
            on_event(event)
        if getattr(event, "event_type", "") == "booking" and event.event_time >= start:
            b: Any = event
            day = (b.event_time - start) // timedelta(days=1)
            keep = b.rooms * b.nights * (1.0 - cancel[b.segment])
            tally.revenue[(day, b.hotel_id)] += b.price_paid * keep
            offer = offers.get((b.hotel_id, b.room_type, b.stay_date, b.channel, b.segment, b.nights, b.price_paid))
            bid = dp.bid_price(offer) if offer is not None else 0.0
            tally.net[(day, b.hotel_id)] += (b.price_paid - bid) * keep
            tally.unmatched += offer is None
    return tally


def _key(offer: Offer) -> tuple[object, ...]:
    return (offer.hotel_id, offer.room_type, offer.stay_date, offer.channel, offer.segment, offer.nights)


@dataclass
class Setup:
    """What every run of one preset shares: the market, the pooled models, the bid-price history, the DP."""

    market: Market
    new: str
    mature: tuple[str, ...]
    bundles: tuple[Path, Path]
    """The pooled light and heavy bundles, trained on the mature hotels' rows."""
    bundles_all: tuple[Path, Path]
    """The same, trained on every hotel's rows, the new one's included (``mature_self``)."""
    pooled_frame: pd.DataFrame
    capacity: BidPriceConfig
    dp: DPOracle
    start: datetime
    config: ColdStartConfig
    work: Path
    onboard: frozenset[str]
    partial_windows: bool
    """Read the new hotel's window counts at full length while its history is shorter (``PartialWindows``)."""
    exploration: ExplorationConfig | None = None
    """How ``staged`` explores the new hotel's prices in stage two (``None``: not at all)."""
    prior_week: PriorWeek = "estimated"
    """How ``PartialWindows`` reads the week before last before day 14 (``--prior-week``)."""
    min_days: float = MIN_SCALE_DAYS
    """``PartialWindows`` scales a shorter history as if this many days were seen (``--partial-min-days``)."""


def setup(name: str, args: argparse.Namespace, work: Path, say: Callable[[str], None]) -> Setup:
    market = Market(preset(name, hotels=args.hotels, seed=args.market_seed))
    start = datetime.fromisoformat(args.start).astimezone(UTC)
    hotels = market.config.hotel_ids
    new, mature = hotels[-1], tuple(hotels[:-1])
    t0 = time.perf_counter()
    frame = training_frame(
        market, n=args.rows * len(hotels), seed=args.market_seed, start=start - timedelta(days=60), days=60
    )
    pooled = frame[frame["hotel_id"] != new].reset_index(drop=True)

    def bundles(rows: pd.DataFrame, where: str) -> tuple[Path, Path]:
        light = train_bundle(
            rows, work / f"light{where}", tier="light", seed=args.market_seed, config=DemandModelConfig(num_trees=60)
        )
        heavy = train_bundle(
            rows,
            work / f"heavy{where}",
            tier="heavy",
            seed=args.market_seed,
            config=DemandModelConfig(n_members=3, num_trees=120, bootstrap=True),
        )
        return light.path, heavy.path

    pooled_bundles, all_bundles = bundles(pooled, ""), bundles(frame, "-all")
    capacity = history(market, start, seed=10_000, method=args.bid_method)
    dp = DPOracle(
        market,
        first_night=start.date(),
        last_night=(start + timedelta(days=args.days + market.config.horizon_days + 1)).date(),
    )
    for h in range(market.config.hotels):
        for r in range(len(market.config.room_types)):
            dp.values(h, r)
    config = ColdStartConfig(
        transfer_after_days=args.transfer_after_days,
        own_after_labels=args.own_after_labels,
        own_after_bookings=args.own_after_bookings,
        own_weight=args.own_weights[0],
        refit_price_response=args.refit_price_response == "refit",
        rules_bid_floor=args.rules_bid_floor == "on",
    )
    exploration = (
        ExplorationConfig(band=args.explore_band, arms=args.explore_arms, seed=args.market_seed)
        if args.explore_band > 0
        else None
    )
    say(
        f"{name}: pooled models on {len(pooled)} rows of {len(mature)} mature hotels (and on all {len(frame)} "
        f"for mature_self), DP solved "
        f"({time.perf_counter() - t0:.0f}s); new hotel {new}"
    )
    return Setup(
        market,
        new,
        mature,
        pooled_bundles,
        all_bundles,
        pooled,
        capacity,
        dp,
        start,
        config,
        work,
        ONBOARD[args.onboard],
        args.partial_windows == "scale",
        exploration,
        args.prior_week,
        args.partial_min_days,
    )


def staged_policy(
    s: Setup, which: str, seed: int, tally: Tally, *, own_weight: float | None = None
) -> tuple[Policy, Callable[[object], None]]:
    """The scorers of ``staged`` / ``rules_only`` / ``transfer_only`` and the event feed of their features.

    ``own_weight`` replaces the refit's weight of the hotel's own labels (``None``: the first of ``--own-weights``).
    """
    config = s.config if own_weight is None else s.config.model_copy(update={"own_weight": own_weight})
    feats = StreamFeatures()
    source = AtRequestTime(feats)
    read: FeatureSource = source
    if s.partial_windows:
        read = PartialWindows(
            source,
            first_seen=lambda h: cold.first_seen(h),
            clock=lambda: source.now,
            prior_week=s.prior_week,
            min_days=s.min_days,
        )
    pooled = scorer(s.market, source=read, bundles=s.bundles, capacity=s.capacity)  # type: ignore[arg-type]
    rules = scorer(s.market, source=read, bundles=None, capacity=s.capacity)  # type: ignore[arg-type]
    transfer = None
    if which == "staged" and s.exploration is not None:  # its labels must identify its elasticity
        transfer = scorer(
            s.market,
            source=read,  # type: ignore[arg-type]
            bundles=s.bundles,
            capacity=s.capacity,
            exploration=s.exploration,
        )

    def refit(hotel: str, own: pd.DataFrame) -> Scorer:
        paths = refit_bundles(
            s.bundles,
            own,
            s.work / f"own-{hotel}-{seed}-{config.own_weight:g}",
            config=config,
            pooled_frame=s.pooled_frame,
            seed=seed,
        )
        return scorer(s.market, source=read, bundles=(paths[0], paths[1]), capacity=s.capacity)  # type: ignore[arg-type]

    if which == "rules_only":
        config = config.model_copy(update={"transfer_after_days": float("inf")})
    elif which == "transfer_only":
        config = config.model_copy(update={"transfer_after_days": 0.0})
    cold = ColdStartScorer(
        config,
        rules=rules,
        pooled=pooled,
        refit=refit if which == "staged" else None,
        mature=s.mature,
        transfer=transfer,
    )
    labels = LabelJoin(cold.learn_one)

    def policy(offer: Offer) -> float:
        source.now = offer.at
        request = request_of(offer)
        decision = cold.price(request)
        if offer.hotel_id == s.new:
            labels.shown(request, decision)
            stage: Stage = decision.rule_ids[-1].split(":", 1)[1]  # type: ignore[assignment]
            tally.stages[(offer.at - s.start) // timedelta(days=1)][stage] += 1
        return decision.price

    def on_event(event: object) -> None:
        hotel, at = getattr(event, "hotel_id", None), event.event_time  # type: ignore[attr-defined]
        if hotel == s.new and at < s.start and event.event_type not in s.onboard:  # type: ignore[attr-defined]
            return  # the stream has none of the new hotel's behaviour events before it joins
        feats.add(event)  # type: ignore[arg-type]
        if hotel == s.new and event.event_type == "booking":  # type: ignore[attr-defined]
            labels.booked(event)

    return policy, on_event


def mature_self_policy(s: Setup) -> tuple[Policy, Callable[[object], None]]:
    """``mature_self``: every hotel, the new one too, priced by the models trained on all, on its whole history."""
    feats = StreamFeatures()
    source = AtRequestTime(feats)
    pricer = scorer(s.market, source=source, bundles=s.bundles_all, capacity=s.capacity)
    return scorer_policy(pricer, source), feats.add  # type: ignore[return-value]


def bench_preset(name: str, args: argparse.Namespace, say: Callable[[str], None]) -> dict[str, list[Tally]]:
    extra = tuple(f"{STAGED_AT}{w:g}" for w in args.own_weights[1:])
    results: dict[str, list[Tally]] = {r: [] for r in (*RUNS, *extra)}
    with tempfile.TemporaryDirectory(prefix="bench-cold-") as tmp:
        s = setup(name, args, Path(tmp), say)
        for seed in range(args.seeds):
            for which in (*RUNS, *extra):
                t1 = time.perf_counter()
                tally = Tally()
                if which == "static":
                    policy, on_event = static_policy(s.market), None
                elif which == "dp":
                    policy, on_event = s.dp.policy(), None
                elif which == "mature_self":
                    policy, on_event = mature_self_policy(s)
                elif which.startswith(STAGED_AT):  # the same new hotel, its refit weighted otherwise
                    policy, on_event = staged_policy(
                        s, "staged", seed, tally, own_weight=float(which.removeprefix(STAGED_AT))
                    )
                else:
                    policy, on_event = staged_policy(s, which, seed, tally)
                out = run(s.market, policy, start=s.start, days=args.days, seed=seed, on_event=on_event, dp=s.dp)
                out.stages = tally.stages
                results[which].append(out)
                total = sum(out.day(d, (s.new,)) for d in range(args.days))
                say(f"{name} seed {seed} {which:13s} new hotel {total:10,.0f} ({time.perf_counter() - t1:.0f}s)")
        results["_setup"] = [s]  # type: ignore[list-item]
    return results


@dataclass
class Summary:
    """One preset's figures (sums over seeds)."""

    days: int
    mature_share: float
    share: dict[str, np.ndarray]
    """Run -> the new hotel's share of its DP revenue per day."""
    trailing: np.ndarray
    """``staged``'s trailing share per day."""
    vs_static: np.ndarray
    """``staged``'s new-hotel revenue over static's per day, minus 1."""
    stage_of_day: list[str]
    stage_share: dict[str, float]
    days_to_target: int | None
    """First day from which the trailing share stays >= 95% of the mature share over the whole window."""
    mature_trailing: np.ndarray
    """The mature hotels' trailing share per day (same days as ``trailing``)."""
    days_to_target_same_day: int | None
    """First day from which the trailing share stays >= 95% of the mature hotels' trailing share on the same days."""
    totals: dict[str, float]
    """Run -> the new hotel's revenue over the window (sum over seeds)."""
    self_trailing: np.ndarray
    """``mature_self``'s trailing share per day: the same hotel, mature, on the same shoppers."""
    days_to_target_self: int | None
    """First day from which ``staged``'s trailing share stays >= 95% of ``self_trailing`` (the paired criterion)."""
    by_weight: dict[str, tuple[float, float, int | None, int | None]] = field(default_factory=dict)
    """``staged`` and each ``staged@W`` -> (window revenue, share of DP on the own days, days to 95% by both)."""
    seeds: dict[str, np.ndarray] = field(default_factory=dict)
    """Per-seed figures (:func:`per_seed`)."""
    measure: str = "net"


def summarise(results: dict[str, list[Tally]], days: int, *, measure: str = "net") -> Summary:
    """One preset's figures on ``measure``: ``net`` (bookings net of their rooms' opportunity cost) or ``revenue``."""
    s: Setup = results["_setup"][0]  # type: ignore[assignment]
    new = (s.new,)

    def per_day(which: str, hotels: tuple[str, ...]) -> np.ndarray:
        return np.array([sum(t.day(d, hotels, measure=measure) for t in results[which]) for d in range(days)])

    dp_new, dp_mature = per_day("dp", new), per_day("dp", s.mature)
    mature_share = float(per_day("staged", s.mature).sum() / dp_mature.sum())
    share = {w: per_day(w, new) / dp_new for w in ("static", "staged", "rules_only", "transfer_only", "mature_self")}
    staged = per_day("staged", new)
    trailing = _trailing(staged, dp_new)
    mature_trailing = _trailing(per_day("staged", s.mature), dp_mature)
    counts: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for t in results["staged"]:
        for d, c in t.stages.items():
            for k, v in c.items():
                counts[d][k] += v
    stage_of_day = [max(counts[d].items(), key=lambda kv: kv[1])[0] if counts[d] else "-" for d in range(days)]
    stage_share = {}
    for st in ("rules", "transfer", "own"):
        idx = [d for d in range(days) if stage_of_day[d] == st]
        if idx:
            stage_share[st] = float(staged[idx].sum() / dp_new[idx].sum())

    def reached(revenue: np.ndarray, mature: float | np.ndarray) -> int | None:
        ok = _trailing(revenue, dp_new) >= TARGET * mature
        return next((d for d in range(days) if ok[d:].all()), None)

    self_trailing = _trailing(per_day("mature_self", new), dp_new)
    reach, reach_same = reached(staged, mature_share), reached(staged, mature_trailing)
    reach_self = reached(staged, self_trailing)
    totals = {w: float(per_day(w, new).sum()) for w in RUNS}
    own_days = [d for d in range(days) if stage_of_day[d] == "own"]
    by_weight = {}
    for run_name in ("staged", *(r for r in results if r.startswith(STAGED_AT))):
        revenue = per_day(run_name, new)
        own = float(revenue[own_days].sum() / dp_new[own_days].sum()) if own_days else float("nan")
        by_weight[run_name] = (
            float(revenue.sum()),
            own,
            reached(revenue, mature_share),
            reached(revenue, mature_trailing),
        )
    return Summary(
        days,
        mature_share,
        share,
        trailing,
        staged / per_day("static", new) - 1.0,
        stage_of_day,
        stage_share,
        reach,
        mature_trailing,
        reach_same,
        totals,
        self_trailing,
        reach_self,
        by_weight,
        per_seed(results, s, days, measure),
        measure,
    )


def per_seed(results: dict[str, list[Tally]], s: Setup, days: int, measure: str) -> dict[str, np.ndarray]:
    """Per seed: the new hotel's share of DP over the mature hotels' (first ``GOAL_DAYS`` days, the days after),
    and its window against static and rules only (``staged`` / other - 1)."""
    new = (s.new,)

    def total(which: str, seed: int, hotels: tuple[str, ...], span: range) -> float:
        return sum(results[which][seed].day(d, hotels, measure=measure) for d in span)

    first, after = range(min(GOAL_DAYS, days)), range(GOAL_DAYS, days)
    out: dict[str, list[float]] = defaultdict(list)
    for seed in range(len(results["staged"])):
        for name, span in (("relative share, days 0-6", first), (f"relative share, days {GOAL_DAYS}+", after)):
            if len(span):
                mine = total("staged", seed, new, span) / total("dp", seed, new, span)
                out[name].append(mine / (total("staged", seed, s.mature, span) / total("dp", seed, s.mature, span)))
        paired = (("share of itself mature, days 0-6", first), (f"share of itself mature, days {GOAL_DAYS}+", after))
        for name, span in paired:
            if len(span):  # the same hotel's DP revenue cancels: staged over mature_self on the same shoppers
                out[name].append(total("staged", seed, new, span) / total("mature_self", seed, new, span))
        window = range(days)
        for other in ("static", "rules_only", "transfer_only"):
            out[f"staged vs {other}"].append(total("staged", seed, new, window) / total(other, seed, new, window) - 1)
    return {k: np.array(v) for k, v in out.items()}


def interval(values: np.ndarray) -> tuple[float, float, float]:
    """Mean and 95% t-interval over seeds."""
    from scipy import stats

    mean = float(values.mean())
    if len(values) < 2:
        return mean, float("nan"), float("nan")
    half = float(stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values)))
    return mean, mean - half, mean + half


def _trailing(revenue: np.ndarray, dp: np.ndarray) -> np.ndarray:
    """Revenue over DP revenue of the ``TRAIL_DAYS`` days ending on each day."""
    return np.array(
        [
            revenue[max(0, d - TRAIL_DAYS + 1) : d + 1].sum() / dp[max(0, d - TRAIL_DAYS + 1) : d + 1].sum()
            for d in range(len(revenue))
        ]
    )


def report(name: str, sm: Summary) -> str:
    what = "net of opportunity cost" if sm.measure == "net" else "booked revenue"
    print(
        f"\n{name} [{what}]: mature hotels' share of the DP oracle {sm.mature_share:.3f} (pooled models); "
        f"target {TARGET:.0%} of it = {TARGET * sm.mature_share:.3f}"
    )
    print(
        f"{'day':>3s} {'stage':8s} {'vs static':>9s} {'share':>6s} {f'{TRAIL_DAYS}d share':>8s} "
        f"{'rules only':>10s} {'transfer only':>13s} {'static':>6s} {'mature 3d':>9s} {'itself mature 3d':>16s}"
    )
    for d in range(sm.days):
        print(
            f"{d:3d} {sm.stage_of_day[d]:8s} {sm.vs_static[d]:+9.1%} {sm.share['staged'][d]:6.3f} "
            f"{sm.trailing[d]:8.3f} {sm.share['rules_only'][d]:10.3f} {sm.share['transfer_only'][d]:13.3f} "
            f"{sm.share['static'][d]:6.3f} {sm.mature_trailing[d]:9.3f} {sm.self_trailing[d]:16.3f}"
        )
    t = sm.totals
    print(
        "window, new hotel (sum over seeds): "
        + ", ".join(f"{w} {v:,.0f}" for w, v in t.items())
        + f"; staged over static {t['staged'] / t['static'] - 1:+.1%}, over rules only "
        f"{t['staged'] / t['rules_only'] - 1:+.1%}; share of DP {t['staged'] / t['dp']:.3f}"
    )
    for run_name, (total, own, r1, r2) in sm.by_weight.items():
        shown = (f"day {d}" if d is not None else f"not within {sm.days}" for d in (r1, r2))
        print(
            f"own weight, {run_name}: window {total:,.0f} ({total / t['static'] - 1:+.1%} vs static, "
            f"{total / t['transfer_only'] - 1:+.1%} vs transfer only); share of DP on own days {own:.3f}; "
            f"95% reached {next(shown)} (whole window), {next(shown)} (same days)"
        )
    for k, v in sm.seeds.items():
        mean, lo, hi = interval(v)
        print(f"per seed, {k}: mean {mean:.3f}, 95% interval [{lo:.3f}, {hi:.3f}]; " + " ".join(f"{x:.3f}" for x in v))
    reach, same, paired = (
        f"on day {d}" if d is not None else f"not within {sm.days} days"
        for d in (sm.days_to_target, sm.days_to_target_same_day, sm.days_to_target_self)
    )
    stages = ", ".join(f"{k} {v:.3f}" for k, v in sm.stage_share.items())
    return (
        f"{name} [{sm.measure}]: 95% of the mature share ({sm.mature_share:.3f}) reached {reach}; 95% of the mature "
        f"hotels' share on the same days reached {same}; 95% of its own share as a mature hotel (mature_self, "
        f"paired) reached {paired}; stage shares {stages}"
    )


def plot(summaries: dict[str, Summary], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(summaries), figsize=(6 * len(summaries), 4.2), squeeze=False)
    colours = {"rules": "#f3e0c0", "transfer": "#d0e4f5", "own": "#d6efd0"}
    for ax, (name, sm) in zip(axes[0], summaries.items(), strict=True):
        x = np.arange(sm.days)
        for d, st in enumerate(sm.stage_of_day):
            ax.axvspan(d - 0.5, d + 0.5, color=colours.get(st, "white"), lw=0)
        ax.plot(x, sm.share["staged"], "o-", label="new hotel, staged (per day)")
        ax.plot(x, sm.trailing, "-", lw=2.5, label=f"new hotel, staged ({TRAIL_DAYS}-day trailing)")
        ax.plot(x, sm.share["rules_only"], "--", label="new hotel, rules only")
        ax.plot(x, sm.share["transfer_only"], ":", label="new hotel, transfer only")
        ax.plot(x, sm.share["static"], "-", color="grey", lw=0.8, label="new hotel, static")
        ax.axhline(sm.mature_share, color="k", lw=1, label="mature hotels (pooled)")
        ax.plot(
            x, sm.mature_trailing, "-", color="k", lw=0.6, alpha=0.6, label=f"mature hotels ({TRAIL_DAYS}-day trailing)"
        )
        ax.plot(
            x,
            sm.self_trailing,
            "-",
            color="tab:green",
            lw=1.2,
            label=f"the new hotel as if mature ({TRAIL_DAYS}-day trailing)",
        )
        ax.axhline(TARGET * sm.mature_share, color="k", lw=0.8, ls="--", label="95% of mature")
        ax.set_title(f"{name}: share of the DP oracle by day (shaded: rules / transfer / own)", fontsize=9)
        ax.set_xlabel("day since the new hotel joined")
        ax.set_ylabel("revenue / DP oracle")
    axes[0][0].legend(fontsize=7)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--hotels", type=int, default=3, help="hotels per preset: the last one is new")
    parser.add_argument(
        "--rows",
        type=int,
        default=20_000,
        help="training rows per hotel, as bench/revenue.py's (the pooled models drop the new hotel's)",
    )
    parser.add_argument("--market-seed", type=int, default=0)
    parser.add_argument("--presets", nargs="+", default=["resort", "city"])
    parser.add_argument("--start", default=DEFAULT_START, help="day 0 (ISO-8601 with timezone)")
    parser.add_argument("--bid-method", choices=("fluid", "stochastic", "dp"), default="dp")
    parser.add_argument("--transfer-after-days", type=float, default=1.0)
    parser.add_argument("--own-after-labels", type=int, default=300)
    parser.add_argument("--own-after-bookings", type=int, default=10)
    parser.add_argument(
        "--own-weights",
        type=float,
        nargs="+",
        default=[ColdStartConfig().own_weight],
        help="weight of the new hotel's own labels in its refit: the first is `staged`'s; each "
        "other one adds a run `staged@W` on the same shoppers (default: the service's)",
    )
    parser.add_argument(
        "--refit-price-response",
        choices=("keep", "refit"),
        default="keep",
        help="stage three keeps the pooled price response (trees only refitted) or refits it",
    )
    parser.add_argument(
        "--rules-bid-floor",
        choices=("on", "off"),
        default="on" if ColdStartConfig().rules_bid_floor else "off",
        help="stage one (and rules_only) prices no lower than the night's bid price (pricing.cold_start.bid_floored)",
    )
    parser.add_argument(
        "--explore-band",
        type=float,
        default=0.10,
        help="staged explores the new hotel's stage-two prices within +-band (0: no exploration)",
    )
    parser.add_argument("--explore-arms", type=int, default=5)
    parser.add_argument(
        "--onboard",
        choices=sorted(ONBOARD),
        default="inventory",
        help="what the stream has of the new hotel from before it joins (see ONBOARD)",
    )
    parser.add_argument(
        "--partial-windows",
        choices=("scale", "raw"),
        default="scale",
        help="the new hotel's window counts while its history is shorter: scaled to full length "
        "(pricing.cold_start.PartialWindows) or as counted",
    )
    parser.add_argument(
        "--prior-week",
        choices=("estimated", "missing"),
        default="estimated",
        help="with --partial-windows scale, the week before last (and the pace against it) before day 14: "
        "estimated from the scaled counts, or missing (as before run 7)",
    )
    parser.add_argument(
        "--partial-min-days",
        type=float,
        default=MIN_SCALE_DAYS,
        help="PartialWindows scales a new hotel's counts as if at least this many days were seen (default an "
        "hour: its first hour's searches of a night read x168 in searches_7d)",
    )
    parser.add_argument(
        "--measure",
        choices=("net", "revenue"),
        default="net",
        help="what the shares, the plot and the last line count: each day's bookings net of the "
        "opportunity cost of their rooms (the DP oracle's bid price), or booked revenue",
    )
    parser.add_argument("--png", type=Path, default=Path("reports/cold_start.png"))
    args = parser.parse_args(argv)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    started = time.perf_counter()
    summaries, last = {}, []
    for name in args.presets:
        results = bench_preset(name, args, say)
        report(name, summarise(results, args.days, measure="revenue"))
        summaries[name] = summarise(results, args.days, measure=args.measure)
        last.append(report(name, summaries[name]))
        unmatched = sum(t.unmatched for ts in results.values() for t in ts if isinstance(t, Tally))
        print(f"{name}: {unmatched} bookings with no offer to value their rooms at (bid price 0)")
    plot(summaries, args.png)
    print(
        f"\nplot: {args.png}; {args.days} days, {args.seeds} seeds, {args.hotels} hotels per preset "
        f"(the last one new), own weights {args.own_weights} (the first is `staged`'s), "
        f"{time.perf_counter() - started:.0f}s"
    )
    print("; ".join(last))


if __name__ == "__main__":
    main()
