"""Online read latency: Feast ``get_online_features`` vs :class:`RedisFeatureSource.read`, same Redis, same data.

Writes ``--keys`` stay keys (all six views) with the online writer under a private project, then
reads random keys one at a time through both paths, interleaved in blocks so that machine noise
hits both alike. Prints p50/p99 per path and the Feast/ours ratio.

    .venv/bin/python bench/online_read.py --keys 2000 --reads 3000
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry

from events.catalog import VIEWS
from features.config import FeaturesConfig
from features.online_source import RedisFeatureSource
from features.online_writer import OnlineWriter, redis_client
from features.rows import FeatureRow
from features.store import build_store

T0_MS = 1_764_460_800_000
BLOCK = 100  # reads per block before switching paths


def seed_rows(n_keys: int, *, seed: int = 0) -> tuple[list[tuple[str, str, date]], list[FeatureRow]]:
    rng = np.random.default_rng(seed)
    keys = [(f"h{i % 200:04d}", "std", date(2026, 12, 1) + timedelta(days=i // 200)) for i in range(n_keys)]
    rows = []
    for hotel, room, stay in keys:
        for view, (vkeys, names) in VIEWS.items():
            if view == "hotel_stats" and stay != date(2026, 12, 1):
                continue
            values = {n: float(rng.integers(0, 50)) for n in names}
            if "occupancy" in values:
                values["occupancy"] = float(rng.uniform())
            stay_key = "room_type" in vkeys
            rows.append(FeatureRow(hotel, view, room if stay_key else None, stay.isoformat() if stay_key else None,
                                   T0_MS, 1, T0_MS, values))
    return keys, rows


def measure(fn: Callable[[Any], object], items: Sequence[Any]) -> np.ndarray:
    out = np.empty(len(items))
    for i, item in enumerate(items):
        started = time.perf_counter()
        fn(item)
        out[i] = (time.perf_counter() - started) * 1000.0
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=2000)
    parser.add_argument("--reads", type=int, default=3000)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        config = FeaturesConfig(project=f"bench{uuid.uuid4().hex[:8]}", state_dir=Path(tmp), redis_url=args.redis_url)
        store = build_store(config)
        keys, rows = seed_rows(args.keys, seed=args.seed)
        writer = OnlineWriter(config, registry=CollectorRegistry())
        for i in range(0, len(rows), 1000):
            writer.write_rows(rows[i : i + 1000])
        source = RedisFeatureSource(config)
        refs = [f"{v}:{n}" for v, (_, names) in VIEWS.items() for n in names]
        picks = [keys[k] for k in np.random.default_rng(args.seed).integers(0, len(keys), args.reads)]

        def feast_read(key: tuple[str, str, date]) -> object:
            row = {"hotel_id": key[0], "room_type": key[1], "stay_date": key[2].isoformat()}
            return store.get_online_features(features=refs, entity_rows=[row]).to_dict()

        def ours(key: tuple[str, str, date]) -> object:
            return source.read(*key)

        # same answers first (the bench compares equal work)
        probe = picks[0]
        f, o = feast_read(probe), ours(probe).values
        if any(f[name][0] != o[name] for _, (_, names) in VIEWS.items() for name in names):
            msg = f"Feast and RedisFeatureSource disagree on {probe}: {f} vs {o}"
            raise SystemExit(msg)
        measure(feast_read, picks[:200])
        measure(ours, picks[:200])  # warm-up
        feast_ms, ours_ms = [], []
        for i in range(0, len(picks), BLOCK):
            block = picks[i : i + BLOCK]
            feast_ms.append(measure(feast_read, block))
            ours_ms.append(measure(ours, block))
        fe, ou = np.concatenate(feast_ms), np.concatenate(ours_ms)
        print(f"{'path':<34}{'n':>7}{'p50 ms':>10}{'p99 ms':>10}")
        for name, ms in (("feast get_online_features", fe), ("RedisFeatureSource.read", ou)):
            print(f"{name:<34}{len(ms):>7}{np.percentile(ms, 50):>10.3f}{np.percentile(ms, 99):>10.3f}")
        print(f"ratio feast/ours: p50 {np.percentile(fe, 50) / np.percentile(ou, 50):.1f}x, "
              f"p99 {np.percentile(fe, 99) / np.percentile(ou, 99):.1f}x")
        client = redis_client(config)
        stale = list(client.scan_iter(match=b"*" + config.project.encode(), count=1000))
        if stale:
            client.delete(*stale)


if __name__ == "__main__":
    main()
