"""Why the pooled models' share of a new hotel falls after day 4: its partial windows, per day, against a control.

The new hotel of ``bench/cold_start.py`` (the same market, pooled models, bid price and DP oracle) is priced
by the pooled models from day 0 (``transfer_only``: no stage rule, no refit), three ways, on the same shoppers:

* ``scaled``: the stream has none of its behaviour before day 0; its window counts are read at full
  length while its history is shorter than a window (:class:`~pricing.cold_start.PartialWindows`), as
  ``bench/cold_start.py`` and the service read them;
* ``missing``: as ``scaled``, the week before last and the pace against it read as missing until day 14
  (``PartialWindows(prior_week="missing")``, what it did before run 7);
* ``raw``: the same stream, its counts as counted (2 days of searches in ``searches_7d``);
* ``history``: the control, the stream holds all of its behaviour from before day 0 (its windows are full,
  as a mature hotel's): only the models have not seen it.

If ``history`` also falls after day 4, the fall is not its windows'. Per day it prints the new hotel's net
share of the DP oracle in each (sums over seeds; each booking net of the DP's bid price for its rooms, as
``bench/cold_start.py --measure net``), the mature hotels' share, and in the first variant the mean ratio of
each window count the pricer read to the count of the same key in the full stream, with the mean ratio of the
price quoted and of the bid price to the price and bid the same pricer quotes on the full stream's features.

    .venv/bin/python bench/cold_start_windows.py [--preset resort] [--seeds 3] [--days 10]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import numpy as np
from cold_start import Setup, Tally, run, setup
from revenue import DEFAULT_START, request_of, scorer
from stream_features import AtRequestTime, StreamFeatures

from market.shoppers import Offer, Policy
from pricing.cold_start import PartialWindows
from pricing.feature_source import FeatureSource

COUNTS = ("searches_7d", "views_7d", "bookings_7d", "bookings_14d", "searches_24h", "hotel_searches_24h",
          "hotel_bookings_24h")
"""Window counts compared with the full stream's (a subset of ``pricing.cold_start.SCALED_COUNTS``)."""
VARIANTS = ("scaled", "missing", "raw", "history")


class Ratios:
    """Per day, the mean of ``priced / full`` per feature (keys where the full value is positive)."""

    def __init__(self) -> None:
        self.sums: dict[tuple[int, str], list[float]] = defaultdict(list)

    def add(self, day: int, name: str, mine: float | None, full: float | None) -> None:
        if mine is not None and full is not None and full > 0:
            self.sums[(day, name)].append(mine / full)

    def mean(self, day: int, name: str) -> float:
        values = self.sums.get((day, name), [])
        return float(np.mean(values)) if values else float("nan")


def variant_policy(s: Setup, variant: str, ratios: Ratios | None) -> tuple[Policy, Callable[[object], None]]:
    """The pooled models for every hotel, the new hotel's features read as ``variant`` says."""
    feats, full = StreamFeatures(), StreamFeatures()
    source, full_source = AtRequestTime(feats), AtRequestTime(full)
    first_seen = {s.new: s.start}
    read: FeatureSource = source
    if variant in ("scaled", "missing"):
        read = PartialWindows(source, first_seen=first_seen.get, clock=lambda: source.now,
                              prior_week="missing" if variant == "missing" else "estimated")
    pooled = scorer(s.market, source=read, bundles=s.bundles, capacity=s.capacity)  # type: ignore[arg-type]
    control = scorer(s.market, source=full_source, bundles=s.bundles, capacity=s.capacity)

    def policy(offer: Offer) -> float:
        source.now = full_source.now = offer.at
        request = request_of(offer)
        decision = pooled.price(request)
        if ratios is not None and offer.hotel_id == s.new:
            day = (offer.at - s.start) // timedelta(days=1)
            truth, _ = control.price_traced(request)
            for name in COUNTS:
                ratios.add(day, name, decision.features.get(name), truth.features.get(name))
            ratios.add(day, "price", decision.price, truth.price)
            ratios.add(day, "bid_price", decision.bid_price, truth.bid_price)
        return decision.price

    def on_event(event: object) -> None:
        hotel, at = getattr(event, "hotel_id", None), event.event_time  # type: ignore[attr-defined]
        full.add(event)  # type: ignore[arg-type]
        if variant != "history" and hotel == s.new and at < s.start and event.event_type not in s.onboard:  # type: ignore[attr-defined]
            return
        feats.add(event)  # type: ignore[arg-type]

    return policy, on_event


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="resort")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--days", type=int, default=10)
    parser.add_argument("--hotels", type=int, default=3)
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    args = parser.parse_args(argv)
    # the rest of bench/cold_start.py's setup, at its defaults (transfer from day 0, no floor, no exploration)
    defaults = argparse.Namespace(
        hotels=args.hotels, market_seed=0, start=None, rows=12_000, bid_method="dp", days=args.days,
        transfer_after_days=0.0, own_after_labels=300, own_after_bookings=10, own_weights=[1.0],
        refit_price_response="keep", rules_bid_floor="off", explore_band=0.0, explore_arms=5, onboard="inventory",
        partial_windows="scale", prior_week="estimated", partial_min_days=1.0 / 24.0,
    )
    defaults.start = DEFAULT_START

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    started = time.perf_counter()
    variants = tuple(args.variants)
    shares: dict[str, list[Tally]] = {v: [] for v in (*variants, "dp")}
    ratios = Ratios()
    with tempfile.TemporaryDirectory(prefix="bench-cold-windows-") as tmp:
        s = setup(args.preset, defaults, Path(tmp), say)
        for seed in range(args.seeds):
            for which in ("dp", *variants):
                t1 = time.perf_counter()
                if which == "dp":
                    policy, on_event = s.dp.policy(), None
                else:
                    policy, on_event = variant_policy(s, which, ratios if which == variants[0] else None)
                shares[which].append(run(s.market, policy, start=s.start, days=args.days, seed=seed,
                                         on_event=on_event, dp=s.dp))
                say(f"seed {seed} {which} ({time.perf_counter() - t1:.0f}s)")

    def day_sum(which: str, d: int, hotels: tuple[str, ...]) -> float:
        return sum(t.day(d, hotels, measure="net") for t in shares[which])

    print(f"\n{args.preset}, {args.seeds} seeds, {args.days} days: net share of the DP oracle per day (transfer only)")
    print(f"{'day':>3s} " + " ".join(f"{v:>8s}" for v in variants) + f" {'mature':>7s}  {variants[0]}/full: "
          + " ".join(f"{n:>10s}" for n in (*COUNTS, "price", "bid_price")))
    for d in range(args.days):
        dp_new, dp_mature = day_sum("dp", d, (s.new,)), day_sum("dp", d, s.mature)
        cells = " ".join(f"{day_sum(v, d, (s.new,)) / dp_new:8.3f}" for v in variants)
        mature = day_sum(variants[0], d, s.mature) / dp_mature
        rel = " ".join(f"{ratios.mean(d, n):10.3f}" for n in (*COUNTS, "price", "bid_price"))
        print(f"{d:3d} {cells} {mature:7.3f}  {' ' * (len(variants[0]) + 7)}{rel}")
    for lo, hi in ((0, 4), (4, 7), (7, args.days)):
        span = range(lo, min(hi, args.days))
        dp_new = sum(day_sum("dp", d, (s.new,)) for d in span)
        dp_mature = sum(day_sum("dp", d, s.mature) for d in span)
        cells = ", ".join(f"{v} {sum(day_sum(v, d, (s.new,)) for d in span) / dp_new:.3f}" for v in variants)
        mature = sum(day_sum(variants[0], d, s.mature) for d in span) / dp_mature
        print(f"days {lo}-{span[-1]}: {cells}; mature {mature:.3f}")
    print(f"{time.perf_counter() - started:.0f}s")


if __name__ == "__main__":
    main()
