"""Revenue against a static price and against the capacity-aware DP oracle, in-process on the calibrated markets.

For each preset (``resort``, ``city``: :mod:`market.presets`) and each
seed, the same simulated shoppers (common random numbers) are priced by

* ``static``: the hotel's reference price;
* ``rules``: the real :class:`~pricing.scorer.Scorer` with no model (rules price:
  base rate, occupancy and lead-time ladders, last-rooms premium, band);
* ``pricestream``: the same scorer with a light and a heavy model trained on the
  preset's history (``training_frame``), capacity-aware (bid price from the stream's
  features; booking curve and cancellation rate from a year of history, rooms per
  booking from a warm-up period), features
  kept in-process from the event stream (``bench/stream_features.py``);
* ``myopic``: the truth's per-shopper revenue optimum (``Market.optimal_price``);
* ``dp``: the dynamic programme over rooms left and time (``market.oracle``), which
  sees the shopper's segment as the simulator's offer does; with stays holding every night it is
  decomposed by night, a reference policy, not a bound;
* ``lp_bound``: the fluid LP bound (``market.fluid``) for the same window, seed and rooms
  at the start: an upper bound on every policy's expected revenue (not a policy);
* ``lp_held``: the same bound with a cancelled booking holding its rooms until it cancels and the warm-up's
  cancellations giving rooms back when they land (``fluid_bound(..., held=True)``): tighter, still a bound;
* ``dp_channel``: the same values, prices set knowing only the channel, as a pricing
  request does (segments mixed by arrival share): how much of the bound is information;
* ``no_bid_price`` (``--no-bid-price``): pricestream without the bid price (what capacity awareness earns);
* ``learning`` (``--learn-days``): pricestream updating its models from its own outcomes as it runs;
* ``explore``: pricestream with the shown price drawn from 5 prices within ``--explore``
  of its choice (``pricing.exploration``, propensity logged): the revenue cost of exploring.

Every run starts with ``WARMUP_DAYS`` at the static price for every policy (the same
events, so the same state when pricing starts, and features to read); the measured
window is the ``--days`` after it. Only nights that check in during the window count,
so every counted night has all of its remaining sales inside the run and a policy that
holds rooms back for later gets the later sales too: revenue is that of their bookings
made in the window, net of expected cancellations (price x rooms x nights x (1 - the
segment's cancellation rate)); occupancy is theirs at check-in; ADR is their booked
revenue per room-night booked. Ratios to the two LP bounds and to the DP oracle are per seed,
with a 95% t-interval over seeds. Writes ``reports/revenue.png``.

    .venv/bin/python bench/revenue.py [--days 60] [--seeds 5] [--hotels 2] [--presets resort city]

While iterating: ``--seed-list 1 3`` (those seeds only), ``--no-bounds`` (skip the two LP bounds),
``--policies pricestream`` (that policy and the DP reference only).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import yaml
from learning import LabelJoin, LoopTrainer
from stream_features import AtRequestTime, StreamFeatures

from events.models import PricingRequest
from market import DPOracle, Market, oracle_policy, static_policy, training_frame
from market.calibration import _sample, measure
from market.compare import WARMUP_DAYS, Outcome, interval, run_window
from market.fluid import fluid_bound
from market.presets import preset
from market.shoppers import Offer, Policy
from pricestream.demo import market_rule_spec
from pricing.bid_price import BidPriceConfig, BookingCurve, nights_mix
from pricing.exploration import ExplorationConfig
from pricing.models import DemandModelConfig
from pricing.price_response import PriceResponse, fit_price_response
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from pricing.tiers import load_pricer
from pricing.training import META_FILE, train_bundle
from routing.calibration import DEFAULT_THRESHOLDS, Thresholds
from routing.router import TieredRouter

POLICIES = ("static", "rules", "pricestream", "myopic", "dp", "dp_channel")
BAND = (0.25, 4.0)
"""Floor and ceiling as multiples of a room's reference price: the oracles' price range, so that no policy is capped
where another is not (the calibrated resort swings ~4x over a year)."""
DROPPED_RULES = frozenset({"floor", "ceiling", "max_change"})
"""Rules the benchmark leaves out of the shipped file: its bounds (replaced by ``BAND``) and the change limit (a
replay has no published price)."""
PARITY_MODE = "off"
"""The OTA/GDS parity rule of the benchmark's policies: off, as the oracles price every channel freely (``--parity
not_below``: not below the direct price, as a hotel bound by a parity contract sets it; ``band``: the shipped file's
+-3% of the rules-only price). Out of season the DP prices the price-sensitive online agents below the direct price:
from 1 November (resort, 5 seeds, 1 hotel) not_below holds pricestream at 0.847 of the DP and under static on one
seed, off at 0.919 and above static and rules on every seed; from 1 May the two are within 0.2%
(docs/revenue-management.md, 3 December 2026). As shipped (``band``) it narrowed every OTA and GDS request to the
rules-only price +-3% and pinned the models to the rules price (resort, seed 0: 1.15x the reference on nights under
20% left where the DP priced 2.6-3.9x)."""
LAST_ROOMS_ACTION = "no_discount"
"""The last-rooms rule (2 rooms or fewer) of the model policies: as shipped (``pricing/rules/default.yaml``) the
rules' price becomes a floor and the model tiers price above it with their bid price. With ``premium`` (shipped
until 2 December 2026) the rule decided the price in the rules (1.25x the ladder price), so the scarcest nights never
reached a model: on the city, seed 3, three quarters of pricestream's offers on nights under 10% left were answered
so. ``no_discount`` moved the city from 0.955 to 0.963 of the DP, above static on every seed
(docs/revenue-management.md)."""
RULES_ONLY_LAST_ROOMS = "premium"
"""The rules-only policy's last-rooms action: with no model tier, the premium is the rules' strongest form."""
DEADLINE_MS = 60_000.0
"""An in-process replay is not latency-bound: a slow decision on a busy machine must not degrade to rules."""
DEFAULT_START = "2026-05-01T00:00:00+00:00"
"""May and June: the resort fills towards its August peak and the city is at its busiest, so inventory binds
(in January the resort sells ~5% of its rooms and any price loses little)."""


run = run_window
"""The simulated window (``market.compare.run_window``): the same run a demo's comparison makes."""


def history(
    market: Market,
    start: datetime,
    seed: int,
    method: str = "fluid",
    pace_prior: bool = True,
) -> BidPriceConfig:
    """What a hotel knows from last year: its booking curve and cancellation rate; rooms per booking from a warm-up.

    The curve is the lead time of a year of arrival nights' searches (``market.calibration``
    samples them the way shoppers arrive), not of the searches seen in a few weeks: those mix the lead
    curve with the season (in April the nights 100 days out are August's, four times busier). With
    ``pace_prior`` the same year gives each room type's share of the searches, so the bid's forecast
    shrinks a key's own pickup toward the hotel's pace (``BidPriceConfig.room_shares``).
    """
    rng = np.random.default_rng(seed)
    _, room, _, ordinal, ts = _sample(market, 20_000, rng)
    leads = (np.array([market.checkin_ts(int(o)) for o in ordinal]) - ts) / 86_400.0
    cancel_share = measure(market, n=3000, seed=seed)["cancel_rate"]
    rooms: list[int] = []
    nights: list[int] = []

    def seen(event: object) -> None:
        if getattr(event, "event_type", "") == "booking":
            rooms.append(event.rooms)  # type: ignore[attr-defined]
            nights.append(event.nights)  # type: ignore[attr-defined]

    run(market, static_policy(market), start=start - timedelta(days=1), days=1, seed=seed, on_event=seen)
    horizon = market.config.horizon_days
    curve = BookingCurve.from_leads(leads.tolist(), horizon)
    per_booking = max(float(np.mean(rooms)) if rooms else 1.0, 1.0)
    return BidPriceConfig(
        curve=curve.cumulative,
        horizon_days=horizon,
        rooms_per_booking=per_booking,
        cancel_share=min(cancel_share, 0.9),
        method=method,
        nights_per_booking=max(float(np.mean(nights)) if nights else 1.0, 1.0),
        nights_mix=nights_mix(nights) if nights else None,
        stays_hold_nights=market.config.stays_hold_nights,
        room_shares=room_shares(market, room) if pace_prior else None,
    )


def room_shares(market: Market, room: np.ndarray) -> tuple[tuple[str, float], ...]:
    """Each room type's share of a year of searches (the room index of each sampled search)."""
    names = market.config.room_types
    return tuple((name, float(np.mean(room == i))) for i, name in enumerate(names))


def scorer(
    market: Market,
    *,
    source: AtRequestTime,
    bundles: tuple[Path, Path] | None,
    capacity: BidPriceConfig | None,
    exploration: ExplorationConfig | None = None,
    rules_below: float | None = None,
    stay_bids: bool = True,
    last_rooms: str | None = None,
    parity: str = PARITY_MODE,
) -> Scorer:
    dropped = DROPPED_RULES | ({"channel_parity"} if parity == "off" else set())
    spec = market_rule_spec(market, band=BAND, drop_kinds=dropped)
    for rule in spec["rules"]:
        if rule["kind"] == "channel_parity":
            rule["mode"] = parity
        if rule["kind"] == "last_rooms" and last_rooms is not None:
            rule["action"] = last_rooms
    rules = RuleSet.from_yaml(yaml.safe_dump(spec, sort_keys=False))
    light = heavy = None
    if bundles is not None:
        light, heavy = pricers(bundles, capacity=capacity, exploration=exploration, stays=source if stay_bids else None)
    return Scorer(
        ScorerConfig(deadline_ms=DEADLINE_MS, stale_after_s=None),
        rules=rules,
        feature_source=source,
        light=light,
        heavy=heavy,
        router=TieredRouter(_thresholds(rules_below)),
    )


def pricers(
    bundles: tuple[Path, Path],
    *,
    capacity: BidPriceConfig | None,
    exploration: ExplorationConfig | None = None,
    stays: AtRequestTime | None = None,
) -> tuple[Any, Any]:
    """The light and heavy pricers of ``bundles`` (``stays``: the source of a stay's later nights' bids)."""
    light, heavy = (load_pricer(p, capacity=capacity, exploration=exploration, stay_features=stays) for p in bundles)
    return light, heavy


def _thresholds(rules_below: float | None) -> Thresholds | None:
    """The router's cut-offs with ``rules_below`` moved (``None``: the default ones)."""
    if rules_below is None:
        return None
    return Thresholds(rules_below=rules_below, heavy_above=max(DEFAULT_THRESHOLDS.heavy_above, rules_below))


def request_of(offer: Offer) -> PricingRequest:
    """The pricing request a simulated offer makes (what the service would receive)."""
    return PricingRequest(
        hotel_id=offer.hotel_id,
        room_type=offer.room_type,
        stay_date=offer.stay_date,
        nights=offer.nights,
        channel=offer.channel,
        event_time=offer.at,
    )  # type: ignore[arg-type]


def scorer_policy(s: Scorer, source: AtRequestTime, latencies: list[float] | None = None) -> Policy:
    """The scorer as a simulator policy; ``latencies`` collects each decision's ``latency_ms``."""

    def policy(offer: Offer) -> float:
        source.now = offer.at
        decision = s.price(request_of(offer))
        if latencies is not None:
            latencies.append(decision.latency_ms)
        return decision.price

    return policy


def latency_line(latencies: list[float], pricers: tuple[object, ...]) -> str:
    """Decision latency percentiles and the bid caches' hit share, for the progress log."""
    if not latencies:
        return "no decisions"
    p50, p99 = np.percentile(latencies, [50, 99])
    hits = sum(getattr(getattr(p, "bid_cache", None), "hits", 0) for p in pricers)
    misses = sum(getattr(getattr(p, "bid_cache", None), "misses", 0) for p in pricers)
    share = hits / (hits + misses) if hits + misses else float("nan")
    return f"decision latency p50 {p50:.2f} ms p99 {p99:.2f} ms over {len(latencies)}; bid cache hits {share:.1%}"


def history_frame(market: Market, *, start: datetime, rows: int, seed: int) -> pd.DataFrame:
    """``rows`` offers of the 60 days before ``start`` with their outcomes: what the models train on."""
    return training_frame(market, n=rows, seed=seed, start=start - timedelta(days=60), days=60)


def train(
    market: Market,
    *,
    start: datetime,
    rows: int,
    seed: int,
    work: Path,
    response: str = "both",
    frame: pd.DataFrame | None = None,
) -> tuple[Path, Path]:
    """A light and a heavy bundle on 60 days of the preset's history before ``start`` (``frame``, if given).

    ``response`` (an experiment; the service fits ``both``): which terms of the pooled price response are
    fitted (``none``, ``lead``, ``season``, ``both``), or ``both_flat_season``: both fitted, the season term
    then dropped, so the quote sees the year's mean season.
    """
    if frame is None:
        frame = history_frame(market, start=start, rows=rows, seed=seed)
    light = train_bundle(frame, work / "light", tier="light", seed=seed, config=DemandModelConfig(num_trees=60))
    heavy_cfg = DemandModelConfig(n_members=3, num_trees=120, bootstrap=True)
    heavy = train_bundle(frame, work / "heavy", tier="heavy", seed=seed, config=heavy_cfg)
    if response == "oracle":  # a diagnosis: the same fit on the frame's true booking probabilities as labels
        curve = fit_price_response(frame.assign(booked=frame["true_prob"]))
        _set_response(light.path, heavy.path, curve)
    elif response != "both":
        curve = fit_price_response(
            frame, lead=response != "none" and response != "season", season=response in ("season", "both_flat_season")
        )
        if curve is not None and response == "both_flat_season":
            curve = curve._replace(season=(0.0, 0.0))
        _set_response(light.path, heavy.path, curve)
    return light.path, heavy.path


def _set_response(light: Path, heavy: Path, curve: PriceResponse | None) -> None:
    """Write ``curve`` as the price response of both bundles."""
    for path in (light, heavy):
        meta = json.loads((path / META_FILE).read_text(encoding="utf-8"))
        meta["price_response"] = None if curve is None else curve.to_json()
        (path / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True), encoding="utf-8")


def bench_preset(name: str, args: argparse.Namespace, say: Callable[[str], None]) -> dict[str, list[Outcome]]:
    market = Market(preset(name, hotels=args.hotels, seed=args.market_seed))
    start = datetime.fromisoformat(args.start).astimezone(UTC)
    t0 = time.perf_counter()
    dp = DPOracle(
        market,
        first_night=start.date(),
        last_night=(start + timedelta(days=args.days + market.config.horizon_days + 1)).date(),
    )
    for h in range(market.config.hotels):
        for r in range(len(market.config.room_types)):
            dp.values(h, r)
    say(
        f"{name}: DP solved for {market.config.hotels * len(market.config.room_types)} (hotel, room type) "
        f"in {time.perf_counter() - t0:.1f}s"
    )
    with tempfile.TemporaryDirectory(prefix="bench-revenue-") as tmp:
        frame = history_frame(market, start=start, rows=args.rows * market.config.hotels, seed=args.market_seed)
        bundles = train(
            market,
            start=start,
            rows=len(frame),
            seed=args.market_seed,
            work=Path(tmp),
            frame=frame,
        )
        capacity = history(
            market,
            start,
            seed=10_000,
            method=args.bid_method,
            pace_prior=args.pace_prior,
        )
        say(
            f"{name}: models trained; warm-up history: {capacity.rooms_per_booking:.2f} rooms and "
            f"{capacity.nights_per_booking:.2f} nights per booking, cancel share {capacity.cancel_share:.2f}"
        )
        names = POLICIES + (("explore",) if args.explore else ()) + (("no_bid_price",) if args.no_bid_price else ())
        names += ("learning",) if args.learn_days else ()
        names = tuple(
            n
            for n in names
            if not args.policies or n in args.policies or n == "dp"
        )
        bounds = ("lp_bound", "lp_held") if args.bounds else ()
        results: dict[str, list[Outcome]] = {p: [] for p in (*bounds, *names)}
        for seed in args.seed_list if args.seed_list is not None else range(args.seeds):
            for bound_name in bounds:
                t1 = time.perf_counter()
                bound = fluid_bound(
                    market,
                    start=start,
                    days=args.days,
                    seed=seed,
                    warmup_days=WARMUP_DAYS,
                    held=bound_name == "lp_held",
                )
                results[bound_name].append(Outcome(bound, float("nan"), float("nan"), 0, 0))
                say(f"{name} seed {seed} {bound_name:11s} revenue {bound:12,.0f} ({time.perf_counter() - t1:.1f}s)")
            for policy_name in names:
                t1 = time.perf_counter()
                feats = StreamFeatures()
                source = AtRequestTime(feats)
                if policy_name == "static":
                    policy = static_policy(market)
                elif policy_name == "myopic":
                    policy = oracle_policy(market)
                elif policy_name == "dp":
                    policy = dp.policy()
                elif policy_name == "dp_channel":
                    policy = dp.channel_price
                else:
                    models = None if policy_name == "rules" else bundles
                    bid = None if policy_name == "no_bid_price" else capacity
                    band = ExplorationConfig(band=args.explore, arms=5) if policy_name == "explore" else None
                    s = scorer(
                        market,
                        source=source,
                        bundles=models,
                        capacity=bid,
                        exploration=band,
                        rules_below=args.rules_below,
                        stay_bids=False,  # a stay against every night's bid: not better on 5 seeds, 3-5x the p99
                        last_rooms=RULES_ONLY_LAST_ROOMS if policy_name == "rules" else args.last_rooms,
                        parity=args.parity,
                    )
                    latencies: list[float] = []
                    policy = scorer_policy(s, source, latencies)
                on_event: Callable[[Any], None] = feats.add
                if policy_name == "learning":
                    loop = learning_loop(s, source, bundles, frame, capacity, Path(tmp) / f"loop-{seed}", seed, args)
                    policy, on_event = loop.policy, loop.on_event
                # run_window hands on every record as `object`; StreamFeatures.add takes the records it emits
                out = run(market, policy, start=start, days=args.days, seed=seed, on_event=on_event)
                if policy_name == "learning":
                    say(f"{name} seed {seed} learning   {loop.trainer.accepted} updates accepted")
                    for line in loop.trainer.log:
                        say(f"{name} seed {seed} learning   {line}")
                results[policy_name].append(out)
                say(
                    f"{name} seed {seed} {policy_name:11s} revenue {out.revenue:12,.0f} occupancy "
                    f"{out.occupancy:.3f} ADR {out.adr:7.2f} ({time.perf_counter() - t1:.1f}s)"
                )
                if policy_name in ("rules", "pricestream", "explore", "no_bid_price", "learning"):
                    say(f"{name} seed {seed} {policy_name:11s} {latency_line(latencies, (s.light, s.heavy))}")
    return results


class Loop(NamedTuple):
    """The ``learning`` policy: pricestream, its decisions joined to outcomes, its bundles updated as it runs."""

    policy: Policy
    on_event: Callable[[Any], None]
    trainer: LoopTrainer


def learning_loop(
    s: Scorer,
    source: AtRequestTime,
    bundles: tuple[Path, Path],
    frame: pd.DataFrame,
    capacity: BidPriceConfig,
    work: Path,
    seed: int,
    args: argparse.Namespace,
) -> Loop:
    """``s`` (pricestream's scorer) learning from its own outcomes every ``--learn-days`` (``bench/learning.py``)."""
    def swap(light: Path, heavy: Path) -> None:
        new_light, new_heavy = pricers((light, heavy), capacity=capacity)
        s.swap_models(light=new_light, heavy=new_heavy)

    every = timedelta(days=args.learn_days)
    trainer = LoopTrainer(bundles, frame, work, every=every, seed=seed, on_update=swap)
    join = LabelJoin(trainer.learn)

    def policy(offer: Offer) -> float:
        source.now = offer.at
        trainer.tick(offer.at)
        request = request_of(offer)
        decision = s.price(request)
        join.shown(request, decision)
        return decision.price

    def on_event(event: Any) -> None:
        source.features.add(event)
        if event.event_type == "booking" and join.pending:
            join.booked(event)

    return Loop(policy, on_event, trainer)


def report(name: str, results: dict[str, list[Outcome]]) -> dict[str, dict[str, tuple[float, float, float]]]:
    """Print the table; per reference (``lp_held``, ``lp_bound``, ``dp``), each policy's mean ratio, 95% interval."""
    refs = {ref: [o.revenue for o in results[ref]] for ref in ("lp_held", "lp_bound", "dp") if ref in results}
    print(f"\n{name}: {len(refs['dp'])} seeds")
    titles = {"lp_held": "ratio to held LP [95%]  ", "lp_bound": "ratio to LP bound [95%] ", "dp": "ratio to DP [95%]"}
    print(f"{'policy':12s} {'revenue':>13s} {'occupancy':>9s} {'ADR':>8s}  " + "  ".join(titles[r] for r in refs))
    ratios: dict[str, dict[str, tuple[float, float, float]]] = {ref: {} for ref in refs}
    for policy_name in results:
        outs = results[policy_name]
        cells = []
        for ref, values in refs.items():
            ratio = interval([o.revenue / d for o, d in zip(outs, values, strict=True)])
            ratios[ref][policy_name] = ratio
            cells.append(f"{ratio[0]:.3f} [{ratio[1]:.3f}, {ratio[2]:.3f}]")
        rev, occ, adr = (float(np.mean([getattr(o, k) for o in outs])) for k in ("revenue", "occupancy", "adr"))
        print(f"{policy_name:12s} {rev:13,.0f} {occ:9.3f} {adr:8.2f}  " + "  ".join(f"{c:24s}" for c in cells))
    return ratios


def plot(all_ratios: dict[str, dict[str, tuple[float, float, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.8 / max(len(all_ratios), 1)
    shown = [p for p in ("lp_held", "lp_bound", *POLICIES) if all(p in r for r in all_ratios.values())]
    for i, (name, ratios) in enumerate(all_ratios.items()):
        x = np.arange(len(shown)) + i * width
        mean = np.array([ratios[p][0] for p in shown])
        err = np.array([[ratios[p][0] - ratios[p][1], ratios[p][2] - ratios[p][0]] for p in shown]).T
        ax.bar(x, mean, width, yerr=np.nan_to_num(err), capsize=3, label=name)
    ax.set_xticks(np.arange(len(shown)) + width * (len(all_ratios) - 1) / 2, shown)
    ax.set_ylabel("revenue / held fluid LP bound (95% interval over seeds)")
    ax.set_ylim(0.0, 1.25)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.legend()
    ax.set_title("Net revenue against the fluid LP bound with cancellations holding rooms (an upper bound)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def seeds_line(args: argparse.Namespace) -> str:
    """The seeds a run priced, for its last lines: ``5 seeds`` or, with ``--seed-list``, ``3 seeds (5 6 7)``.

    Example:
        >>> ns = argparse.Namespace
        >>> seeds_line(ns(seeds=5, seed_list=None)), seeds_line(ns(seeds=5, seed_list=[6]))
        ('5 seeds', '1 seed (6)')
    """
    if args.seed_list is None:
        return f"{args.seeds} seed{'s' if args.seeds != 1 else ''}"
    listed = " ".join(str(s) for s in args.seed_list)
    return f"{len(args.seed_list)} seed{'s' if len(args.seed_list) != 1 else ''} ({listed})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument(
        "--seed-list",
        type=int,
        nargs="+",
        default=None,
        help="run these seeds instead of 0 .. --seeds - 1 (quick iterations on one seed)",
    )
    parser.add_argument("--hotels", type=int, default=2)
    parser.add_argument(
        "--rows",
        type=int,
        default=20_000,
        help="training rows per hotel (the pooled models train on rows x hotels)",
    )
    parser.add_argument("--market-seed", type=int, default=0)
    parser.add_argument("--presets", nargs="+", default=["resort", "city"])
    parser.add_argument("--start", default=DEFAULT_START, help="first priced day (ISO-8601 with timezone)")
    parser.add_argument("--png", type=Path, default=Path("reports/revenue.png"))
    parser.add_argument("--no-bid-price", action="store_true", help="also run pricestream without the bid price")
    parser.add_argument(
        "--bid-method",
        choices=("fluid", "stochastic", "dp"),
        default="dp",
        help="BidPriceConfig.method: how the bid price is solved (docs/revenue-management.md)",
    )
    parser.add_argument(
        "--rules-below",
        type=float,
        default=None,
        help="router: complexity below which the rules price (default: routing's)",
    )
    parser.add_argument(
        "--last-rooms",
        choices=("ceiling", "premium", "no_discount"),
        default=LAST_ROOMS_ACTION,
        help="the last-rooms rule's action for the model policies (the shipped file: no_discount, "
        "a floor the models price above; premium decides the price in the rules)",
    )
    parser.add_argument(
        "--pace-prior",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="shrink the bid's per-key pickup toward the hotel's pace (BidPriceConfig.room_shares "
        "from a year of history); --no-pace-prior: the key's own pickup only",
    )
    parser.add_argument(
        "--parity",
        choices=("not_below", "band", "off"),
        default=PARITY_MODE,
        help="the OTA/GDS parity rule of the rules-only and model policies (off: dropped, as the oracles price)",
    )
    parser.add_argument(
        "--bounds",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="solve the two fluid LP bounds per seed (25-90 s each; --no-bounds while iterating)",
    )
    parser.add_argument("--policies", nargs="*", default=None, help="run only these (and dp, the reference)")
    parser.add_argument(
        "--explore",
        type=float,
        default=0.05,
        help="also run pricestream exploring within this band, 5 arms (0: not run)",
    )
    parser.add_argument(
        "--learn-days",
        type=float,
        default=0.0,
        help="also run pricestream learning from its own outcomes (policy 'learning'): every this many "
        "simulated days each tier gets the trainer service's guarded update on the labels since the last "
        "(bench/learning.py); 0: not run",
    )
    args = parser.parse_args(argv)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    started = time.perf_counter()
    all_ratios, last = {}, []
    for name in args.presets:
        results = bench_preset(name, args, say)
        both = report(name, results)
        all_ratios[name] = both.get("lp_held", both["dp"])
        if not {"pricestream", "static", "rules"} <= set(results):
            continue
        ours = results["pricestream"]
        gains = [o.revenue / s.revenue - 1.0 for o, s in zip(ours, results["static"], strict=True)]
        over_rules = [o.revenue / s.revenue - 1.0 for o, s in zip(ours, results["rules"], strict=True)]
        print(
            f"{name} per seed, pricestream over static: {' '.join(f'{g:+.1%}' for g in gains)}; "
            f"over rules: {' '.join(f'{g:+.1%}' for g in over_rules)}"
        )
        of_dp = both["dp"]["pricestream"]
        held = ""
        if "lp_held" in both:
            share = both["lp_held"]["pricestream"]
            held = (
                f"{share[0]:.3f} of the held LP bound [{share[1]:.3f}, {share[2]:.3f}] "
                f"({both['lp_bound']['pricestream'][0]:.3f} of the untimed one), "
            )
        last.append(
            f"{name}: pricestream {held}{of_dp[0]:.3f} of the decomposed DP [{of_dp[1]:.3f}, {of_dp[2]:.3f}], "
            f"lowest gain over static {min(gains):+.1%} (over rules {min(over_rules):+.1%})"
        )
    plot(all_ratios, args.png)
    print(
        f"\nplot: {args.png}; {args.days} days, {seeds_line(args)}, {args.hotels} hotels per preset, "
        f"{time.perf_counter() - started:.0f}s"
    )
    print("; ".join(last))


if __name__ == "__main__":
    main()
