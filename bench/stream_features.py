"""The online features of ``events.catalog``, kept in-process from a simulated event stream (no Kafka, no Flink).

A :class:`StreamFeatures` is fed every record a :class:`~market.Simulation` yields (``add``) and
answers the scorer's feature reads (``read``), so an in-process replay prices with the same scorer,
rules and models the service runs, on the values the deployed job would serve at that moment. It is
the incremental driver of the one implementation of the windows, :mod:`features.asof`: the window
start (:func:`~features.asof.window_start`), the fixed-point partials
(:func:`~features.asof.fixed_point`), the aggregations (:func:`~features.asof.aggregate`,
:func:`~features.asof.competitor_aggregate`), the job's columns (:func:`features.replay.record_row`)
and the TTLs (:func:`features.replay.fresh`) are the history's and the training frames'. It only
keeps running totals per key, so that a read is a handful of bisections:

* a windowed view's value is as of the key's newest event ``t`` at or before the read, over the
  events whose tile starts at or after ``floor(t, tile) - window``, null once ``t`` is older than
  the view's TTL, as the online store serves it;
* events of one instant are taken in event-id order, as the history takes them.

``tests/unit/test_stream_features.py`` holds every read equal to the batch driver
(:func:`features.replay.features_at`), and ``tests/integration/test_bench_job_features.py`` to the
job's served values on the same events.

Run (prints rates, the ratio to the batch driver on the same reads, and the load average)::

    .venv/bin/python bench/stream_features.py [--hotels 2] [--days 4] [--seed 3]
    .venv/bin/python bench/stream_features.py --frames [--hotels 8] [--days 60]   # training frame vs simulation
    .venv/bin/python bench/stream_features.py --skew [--days 60]   # bootstrap frame vs a replay: PSI per feature

Example:
    >>> from datetime import timedelta
    >>> from market import Market, MarketConfig, Simulation
    >>> market = Market(MarketConfig(hotels=1, horizon_days=20, seed=1))
    >>> feats = StreamFeatures()
    >>> for ev in Simulation(market, duration=timedelta(days=2), rng_seed=1):
    ...     feats.add(ev)
    >>> key = max(feats.keys(), key=lambda k: feats.read(*k).values["views_7d"] or 0)
    >>> row = feats.read(*key).values
    >>> row["views_7d"] >= row["views_24h"] >= row["views_1h"] and 0.0 <= row["occupancy"] <= 1.0
    True
"""

from __future__ import annotations

import argparse
import bisect
import os
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from events.catalog import ALL_FEATURES, SPECS, ViewSpec, derive
from events.models import Record
from features.asof import aggregate, competitor_aggregate, fixed_point, tile_input, window_start
from features.replay import fresh, record_row
from pricing.feature_source import FeatureRead

Key = tuple[str, str, date]
_STAY_VIEWS = tuple(SPECS[name] for name in ("stay_1h", "stay_24h", "stay_7d", "stay_14d"))
_HOTEL = SPECS["hotel_stats"]


def _partials(views: Iterable[ViewSpec]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(p for view in views for p in view.partials))


class _Series:
    """One key's event times and running fixed-point totals of the partials its views read (events in time order)."""

    __slots__ = ("cum", "inputs", "times")

    def __init__(self, partials: tuple[str, ...]) -> None:
        self.times: list[int] = []
        self.cum: dict[str, list[int]] = {p: [0] for p in partials}
        self.inputs = {p: tile_input(p.partition(":")[2]) for p in partials}

    def add(self, ts: int, row: dict[str, Any]) -> None:
        self.times.append(ts)
        for partial, cum in self.cum.items():
            cum.append(cum[-1] + fixed_point(partial, row.get(self.inputs[partial])))

    def anchor(self, now: int) -> int | None:
        """The newest event time at or before ``now``."""
        i = bisect.bisect_right(self.times, now)
        return self.times[i - 1] if i else None

    def totals(self, lo: int, hi: int) -> dict[str, int]:
        """Each partial's total over the events with ``lo <= time <= hi``."""
        i, j = bisect.bisect_left(self.times, lo), bisect.bisect_right(self.times, hi)
        return {p: cum[j] - cum[i] for p, cum in self.cum.items()}


def _number(value: Any) -> float | None:
    x = float(value)
    return None if x != x else x


def _window(view: ViewSpec, series: _Series, anchor: int) -> dict[str, float | None]:
    """Every sum, mean and std of ``view`` as of ``anchor`` (competitor features apart)."""
    totals = series.totals(window_start(view, anchor), anchor)
    return {f.name: _number(aggregate(f.agg, f.column, totals)) for f in view.features
            if f.agg not in ("comp_median", "comp_min")}


class StreamFeatures:
    """Per stay key and per hotel, the job's columns; ``read`` gives ``ALL_FEATURES`` as the job serves them."""

    def __init__(self) -> None:
        stay, hotel = _partials(_STAY_VIEWS), _partials([_HOTEL])
        self._stay: dict[Key, _Series] = defaultdict(lambda: _Series(stay))
        self._hotel: dict[str, _Series] = defaultdict(lambda: _Series(hotel))
        self._rates: dict[Key, list[tuple[int, str, str, float]]] = defaultdict(list)
        self._inventory: dict[Key, list[tuple[int, str, float, float]]] = defaultdict(list)
        self._last: dict[Key, datetime] = {}

    def keys(self) -> Iterable[Key]:
        return self._stay.keys()

    def add(self, event: Record) -> None:
        """Take one simulated record (in event-time order; records without a stay key are ignored)."""
        if not hasattr(event, "stay_date"):
            return
        row = record_row(event)
        key: Key = (event.hotel_id, event.room_type, event.stay_date)  # type: ignore[attr-defined]
        ts, eid = int(row["event_time"]), str(row["event_id"])
        self._last[key] = event.event_time
        self._stay[key].add(ts, row)
        self._hotel[key[0]].add(ts, row)
        if row["event_type"] == "competitor_rate" and row["tile_rate"] is not None:
            bisect.insort(self._rates[key], (ts, eid, str(row["competitor_id"]), float(row["tile_rate"])))
        elif row["event_type"] == "inventory":
            bisect.insort(self._inventory[key], (ts, eid, float(row["rooms_left"]), float(row["capacity"])))

    def _competitors(self, key: Key, lo: int, hi: int) -> dict[str, float | None]:
        latest: dict[str, float] = {}
        for ts, _, comp, rate in self._rates.get(key, ()):
            if lo <= ts <= hi:
                latest[comp] = rate  # in (time, event id) order: the latest wins, as in the history
        if not latest:
            return {"comp_rate_median_24h": None, "comp_rate_min_24h": None}
        rates = np.array([list(latest.values())], dtype="float64")
        return {f"comp_rate_{a}_24h": _number(competitor_aggregate(f"comp_{a}", rates)[0]) for a in ("median", "min")}

    def _windowed(self, key: Key, now: int) -> dict[str, float | None]:
        series = self._stay.get(key)
        anchor = None if series is None else series.anchor(now)
        if series is None or anchor is None:
            return {}
        out: dict[str, float | None] = {}
        for view in _STAY_VIEWS:
            if not fresh(view.name, anchor, now):
                out.update(dict.fromkeys(view.names))
                continue
            out.update(_window(view, series, anchor))
            if view.competitor_rates:
                out.update(self._competitors(key, window_start(view, anchor), anchor))
        return out

    def _inventory_at(self, key: Key, now: int) -> dict[str, float | None]:
        held = self._inventory.get(key, [])
        i = bisect.bisect_right(held, (now, "\uffff")) - 1
        if i < 0 or not fresh("stay_inventory", held[i][0], now):
            return {"rooms_left": None, "capacity": None, "occupancy": None}
        _, _, left, cap = held[i]
        return {"rooms_left": left, "capacity": cap, "occupancy": 1.0 - left / cap}

    def _hotel_at(self, hotel_id: str, now: int) -> dict[str, float | None]:
        series = self._hotel.get(hotel_id)
        anchor = None if series is None else series.anchor(now)
        if series is None or anchor is None or not fresh(_HOTEL.name, anchor, now):
            return dict.fromkeys(_HOTEL.names)
        return _window(_HOTEL, series, anchor)

    def read(self, hotel_id: str, room_type: str, stay_date: date, *, at: datetime | None = None) -> FeatureRead:
        """``ALL_FEATURES`` of one key as served at ``at`` (default: the key's latest event)."""
        key = (hotel_id, room_type, stay_date)
        last = self._last.get(key)
        when = at or last
        if when is None:
            return FeatureRead({}, None, None)
        now = round(when.timestamp() * 1000)
        values: dict[str, float | None] = dict.fromkeys(ALL_FEATURES)
        values.update(self._windowed(key, now))
        values.update(self._inventory_at(key, now))
        values.update(self._hotel_at(hotel_id, now))
        derive(values)
        return FeatureRead({name: values.get(name) for name in ALL_FEATURES}, 1, last)


class AtRequestTime:
    """A :class:`~pricing.feature_source.FeatureSource` over :class:`StreamFeatures` with windows at a set time.

    The replay sets ``now`` to each request's time before the scorer reads.
    """

    def __init__(self, features: StreamFeatures) -> None:
        self.features = features
        self.now: datetime | None = None

    def read(self, hotel_id: str, room_type: str, stay_date: date) -> FeatureRead:
        return self.features.read(hotel_id, room_type, stay_date, at=self.now)


def replay_reads(records: list[Record]) -> tuple[pd.DataFrame, pd.DataFrame, float]:
    """Replay ``records`` in order and read each view's key 1 ms before the view, as a replay's scorer does.

    Returns the read points, the values read, and the CPU seconds of the adds and reads.
    """
    feats, points, values = StreamFeatures(), [], []
    started = time.process_time()
    for record in records:
        if getattr(record, "event_type", None) == "view":
            at = record.event_time - timedelta(milliseconds=1)
            key = (record.hotel_id, record.room_type, record.stay_date)  # type: ignore[attr-defined]
            values.append(feats.read(*key, at=at).values)
            points.append((key[0], key[1], key[2].isoformat(), pd.Timestamp(at)))
        feats.add(record)
    cpu = time.process_time() - started
    frame = pd.DataFrame(points, columns=["hotel_id", "room_type", "stay_date", "event_time"])
    return frame, pd.DataFrame(values, columns=list(ALL_FEATURES)), cpu


def mismatches(a: pd.DataFrame, b: pd.DataFrame) -> int:
    """Cells that differ (NaN equals NaN), over ``ALL_FEATURES``."""
    x, y = a[list(ALL_FEATURES)].to_numpy(dtype=float), b[list(ALL_FEATURES)].to_numpy(dtype=float)
    return int((~((x == y) | (np.isnan(x) & np.isnan(y)))).sum())


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def bench_reads(args: argparse.Namespace) -> None:
    """The incremental driver against the batch driver (``features_at``) on the same reads."""
    from features.replay import events_frame, features_at
    from market import Market, MarketConfig, simulate

    market = Market(MarketConfig(hotels=args.hotels, seed=args.seed))
    records = list(simulate(market, duration=timedelta(days=args.days), rng_seed=args.seed))
    points, got, incremental = replay_reads(records)
    started = time.process_time()
    want = features_at(events_frame(records), points)
    batch = time.process_time() - started
    n = len(points)
    print(f"{len(records):,} events, {n:,} reads (1 ms before each view) of {args.hotels} hotel(s) over {args.days} d")
    print(f"incremental (bench/stream_features.py): {incremental:.2f} s CPU, {n / incremental:,.0f} reads/s "
          "(adds included)")
    print(f"batch (features.replay.features_at, events frame included): {batch:.2f} s CPU, {n / batch:,.0f} reads/s")
    print(f"incremental / batch reads per CPU second: {batch / incremental:.2f}x; cells that differ: "
          f"{mismatches(got, want)} of {n * len(ALL_FEATURES):,}")


def bench_frames(args: argparse.Namespace) -> None:
    """A training frame's CPU against the simulation of its events alone (the frame's floor)."""
    from market import Market, MarketConfig, simulate, training_frame
    from market.frames import STREAM_LOOKBACK

    market = Market(MarketConfig(hotels=args.hotels, seed=args.seed))
    start = market.config.start
    c0 = time.process_time()
    frame = training_frame(market, n=args.rows, seed=args.seed, days=args.days)
    c1 = time.process_time()
    count = sum(1 for _ in simulate(market, start=start - STREAM_LOOKBACK, duration=STREAM_LOOKBACK
                                     + timedelta(days=args.days), rng_seed=args.seed))
    c2 = time.process_time()
    print(f"training frame: {len(frame):,} rows, {args.hotels} hotels x {args.days} d: {c1 - c0:.1f} s CPU")
    print(f"simulation alone ({count:,} events, the frame's floor): {c2 - c1:.1f} s CPU")
    print(f"frame / simulation CPU: {(c1 - c0) / (c2 - c1):.2f}x")


def bench_skew(args: argparse.Namespace) -> None:
    """The bootstrap frame (frozen as a snapshot) against the reads of a replay of the same market: PSI per feature.

    The replay is the same market simulated again (seed + 1) over the same range, read by this
    module's driver 1 ms before each view, as an in-process replay's scorer reads; the values are
    written beside the snapshots, and ``pricestream features skew`` prints the same table from them.
    """
    from datetime import UTC

    from features.snapshots import freeze
    from feedback.monitors.drift import MIN_SAMPLES, DriftMonitor
    from market import Market, MarketConfig, simulate, training_frame
    from market.frames import STREAM_LOOKBACK
    from pricestream.settings import Settings

    settings = Settings()
    seed = settings.seed if args.seed_given is None else args.seed_given
    market = Market(MarketConfig(hotels=args.hotels, seed=seed))
    start = market.config.start
    frame = training_frame(market, n=args.rows, seed=seed, start=start, days=args.days)
    frozen = frame.drop(columns=["true_prob"]).rename(columns={"event_time": "event_timestamp"})
    manifest = freeze(frozen, root=settings.snapshots(), as_of=datetime.now(tz=UTC),
                      definitions_hash="simulator-bootstrap")
    span = STREAM_LOOKBACK + timedelta(days=args.days)
    points, served, _ = replay_reads(list(simulate(market, start=start - STREAM_LOOKBACK, duration=span,
                                                   rng_seed=seed + 1)))
    served = served[(pd.to_datetime(points["event_time"], utc=True) >= pd.Timestamp(start)).to_numpy()]
    out = settings.snapshots().parent / f"served-replay-{manifest.id}.parquet"
    served.to_parquet(out)
    names = tuple(n for n in ALL_FEATURES
                  if frame[n].notna().sum() >= MIN_SAMPLES and served[n].notna().sum() >= MIN_SAMPLES)
    report = DriftMonitor(frame, features=names).check(served)
    print(f"bootstrap frame: {len(frame):,} rows ({args.hotels} hotels, {args.days} d, seed {seed}); replay "
          f"(seed {seed + 1}): {len(served):,} reads")
    for f in report:
        print(f"  {f.feature:26s} psi {f.psi:.3f}  (noise limit {f.psi_limit:.3f})")
    worst = max(report, key=lambda f: f.psi)
    print(f"max psi {worst.psi:.3f} ({worst.feature}) over {len(report.features)} features; the same table: "
          f"pricestream features skew --snapshot {manifest.id} --served {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hotels", type=int, default=None, help="default 2 (reads), 8 (frames, skew)")
    parser.add_argument("--days", type=int, default=None, help="default 4 (reads), 60 (frames, skew)")
    parser.add_argument("--seed", type=int, default=None, help="default 3 (reads, frames), the settings' (skew)")
    parser.add_argument("--rows", type=int, default=6000, help="rows of the training frame (--frames, --skew)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--frames", action="store_true", help="time a training frame against its simulation")
    mode.add_argument("--skew", action="store_true", help="PSI of the bootstrap frame against a replay's reads")
    args = parser.parse_args()
    args.seed_given, args.seed = args.seed, 3 if args.seed is None else args.seed
    big = args.frames or args.skew
    args.hotels = args.hotels or (8 if big else 2)
    args.days = args.days or (60 if big else 4)
    print(f"load average at start: {_load()} (cores: {os.cpu_count()})")
    if args.skew:
        bench_skew(args)
    elif args.frames:
        bench_frames(args)
    else:
        bench_reads(args)
    print(f"load average at end: {_load()}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
