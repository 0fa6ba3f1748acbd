"""Cost of the monitors on the decision stream, against a bare loop over the same stream.

A synthetic stream of decisions (hotel, the full feature mapping with some
nulls and some stale reads, a canonical input hash drawn from a pool so that
inputs repeat, model version, price) is replayed three times in one process:

* ``bare``: a loop that touches the same fields and does nothing else;
* ``monitored``: per event ``CoverageMonitor.update`` + ``FlipMonitor.update`` +
  ``DriftMonitor.update`` (the drift-window accumulation);
* each monitor alone, to show where the time goes.

Prints events/s and the slowdown ratio against ``bare``, and the cost of one
``DriftMonitor.check`` on the accumulated window (per check, not per event), and
the drift false-alarm rate over ``--windows`` unchanged windows (same generator
as the reference; ``--windows 0`` skips it).

Run: ``.venv/bin/python bench/monitor_cost.py [--events 50000] [--hotels 200] [--seed 0]``
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd

from events.catalog import ALL_FEATURES
from feedback.monitors import CoverageMonitor, DriftMonitor, FlipMonitor, false_alarm_rate

T0 = datetime(2026, 6, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Event:
    hotel_id: str
    features: dict[str, float | None]
    feature_time: datetime
    now: datetime
    input_hash: str
    model_version: str
    price: float


def make_stream(n: int, *, hotels: int, seed: int) -> list[Event]:
    rng = np.random.default_rng(seed)
    values = rng.gamma(2.0, 10.0, size=(n, len(ALL_FEATURES)))
    nulls = rng.random((n, len(ALL_FEATURES))) < 0.03
    hotel = rng.integers(0, hotels, n)
    pool = rng.integers(0, max(n // 4, 1), n)  # each input repeats ~4 times
    lag = rng.exponential(60.0, n)
    events = []
    for i in range(n):
        now = T0 + timedelta(milliseconds=20 * i)
        row = {name: (None if nulls[i, j] else float(values[i, j])) for j, name in enumerate(ALL_FEATURES)}
        price = 100.0 + float(pool[i] % 50) + (0.5 if rng.random() < 0.01 else 0.0)
        events.append(
            Event(f"h{hotel[i]}", row, now - timedelta(seconds=float(lag[i])), now, f"{pool[i]:016x}", "v1", price)
        )
    return events


def bare(stream: list[Event]) -> float:
    total = 0.0
    for ev in stream:
        total += ev.price + len(ev.features) + len(ev.hotel_id) + len(ev.input_hash)
    return total


def run(label: str, fn: Callable[[list[Event]], object], stream: list[Event], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(stream)
        best = min(best, time.perf_counter() - start)
    return len(stream) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--hotels", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--windows", type=int, default=100)
    args = parser.parse_args()
    stream = make_stream(args.events, hotels=args.hotels, seed=args.seed)
    reference = pd.DataFrame([ev.features for ev in stream[:5000]], columns=list(ALL_FEATURES), dtype=float)

    def coverage(s: list[Event]) -> None:
        mon = CoverageMonitor(timedelta(minutes=15), timedelta(minutes=5))
        for ev in s:
            mon.update(ev.hotel_id, ev.features, feature_time=ev.feature_time, now=ev.now)

    def flips(s: list[Event]) -> None:
        mon = FlipMonitor()
        for ev in s:
            mon.update(ev.input_hash, ev.model_version, ev.price)

    drift_monitor = DriftMonitor(reference, features=ALL_FEATURES)

    def drift(s: list[Event]) -> None:
        for ev in s:
            drift_monitor.update(ev.features)

    def monitored(s: list[Event]) -> None:
        cov, flip = CoverageMonitor(timedelta(minutes=15), timedelta(minutes=5)), FlipMonitor()
        for ev in s:
            cov.update(ev.hotel_id, ev.features, feature_time=ev.feature_time, now=ev.now)
            flip.update(ev.input_hash, ev.model_version, ev.price)
            drift_monitor.update(ev.features)

    base = run("bare", bare, stream, args.repeats)
    print(f"{'path':<28}{'events/s':>14}{'slowdown vs bare':>20}")
    print(f"{'bare loop':<28}{base:>14,.0f}{1.0:>19.1f}x")
    for label, fn in (("coverage", coverage), ("flips", flips), ("drift window", drift), ("all three", monitored)):
        rate = run(label, fn, stream, args.repeats)
        print(f"{label:<28}{rate:>14,.0f}{base / rate:>19.1f}x")
    start = time.perf_counter()
    report = drift_monitor.check(at=T0)
    check_ms = 1000 * (time.perf_counter() - start)
    print(f"drift check on {report.n_window} rows x {len(ALL_FEATURES)} features: {check_ms:.1f} ms per check")
    if args.windows:

        def unchanged(i: int) -> pd.DataFrame:
            window = make_stream(2000, hotels=args.hotels, seed=10_000 + i)
            return pd.DataFrame([ev.features for ev in window], columns=list(ALL_FEATURES), dtype=float)

        rate = false_alarm_rate(reference, unchanged, args.windows, features=ALL_FEATURES)
        print(f"drift false-alarm rate over {args.windows} unchanged windows of 2000 rows: {rate:.1%}")


if __name__ == "__main__":
    main()
