"""Where to merge tiles: at write time (``features/tiles.lua`` in the online writer) or at read time.

Writes a full window of tiles for ``--keys`` stay keys (12 five-minute tiles of stay_1h, 24 + 168
hourly tiles of stay_24h and stay_7d, 14 daily tiles of stay_14d, 24 hourly hotel tiles) with the
online writer, then times, on the same Redis in the same run:

* write-time merge: the writer's cost per tile row (upsert + merge of the window in Lua), against
  its plain compare-and-set of a row of window values (the pre-tile cost, the peer);
* read-time merge: one key's read of the merged values (what the scorer and Feast do now) against
  a read of the same key's tiles alone (HMGET of every tile field: a lower bound of any read-time
  merge, before a single tile is decoded).

    .venv/bin/python bench/tile_merge.py --keys 200 --reads 2000
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from datetime import UTC, date, datetime

import numpy as np
from prometheus_client import CollectorRegistry

from events.catalog import SPECS, STAY_KEYS, TILED_VIEWS
from features.config import FeaturesConfig
from features.layout import redis_key
from features.online_source import RedisFeatureSource
from features.online_writer import OnlineWriter, redis_client
from features.rows import FeatureRow
from pricestream.settings import Settings

T0_MS = 1_796_000_000_000 - 1_796_000_000_000 % 86_400_000  # a UTC midnight in 2026
STAY = date(2027, 1, 15)


def tile_rows(hotel: str) -> list[FeatureRow]:
    """A full window of tiles of every tiled view for one key, oldest first, versions growing."""
    rows, version = [], 0
    for view in TILED_VIEWS:
        spec = SPECS[view]
        assert spec.tile_ms is not None and spec.window_ms is not None  # noqa: S101 - the catalogue's windowed views
        stay = "room_type" in spec.keys
        for i in range(spec.window_ms // spec.tile_ms):
            version += 1
            start = T0_MS - spec.window_ms + (i + 1) * spec.tile_ms
            partials: dict[str, float | None] = {p: float(1 + i % 5) for p in spec.partials}
            rows.append(FeatureRow(hotel, view, "std" if stay else None, STAY.isoformat() if stay else None,
                                   start + 1, version, start + 1, partials, tile_start=start,
                                   rates={"c1": 90.0 + i % 7, "c2": 100.0} if spec.competitor_rates else {}))
    return rows


def value_rows(hotel: str, n: int) -> list[FeatureRow]:
    """``n`` rows of window values (the pre-tile write) for one key."""
    names = SPECS["stay_7d"].names
    return [FeatureRow(f"{hotel}-{i}", "stay_7d", "std", STAY.isoformat(), T0_MS + i, i + 1, T0_MS + i,
                       dict.fromkeys(names, float(i))) for i in range(n)]  # distinct keys: none superseded


def timed_writes(writer: OnlineWriter, batches: list[list[FeatureRow]]) -> float:
    """Microseconds per row over all batches (each one pipelined round trip, as the writer sends them)."""
    t0, rows = time.perf_counter(), 0
    for batch in batches:
        writer.write_rows(batch)
        rows += len(batch)
    return 1e6 * (time.perf_counter() - t0) / rows


def read_latencies(fn, keys: list[str], reads: int) -> np.ndarray:  # type: ignore[no-untyped-def]
    rng, out = np.random.default_rng(7), []
    for i in rng.integers(0, len(keys), reads):
        t0 = time.perf_counter()
        fn(keys[i])
        out.append(time.perf_counter() - t0)
    return np.array(out) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=200)
    parser.add_argument("--reads", type=int, default=2000)
    args = parser.parse_args()
    stack = Settings().stack()  # the PRICESTREAM_* ports and state dir, as every command
    config = FeaturesConfig(project=f"tm{uuid.uuid4().hex[:8]}", redis_url=stack.redis_url)
    writer = OnlineWriter(config, registry=CollectorRegistry())
    client = redis_client(config)
    hotels = [f"h{k}" for k in range(args.keys)]
    load0 = os.getloadavg()[0]
    try:
        per_key = [tile_rows(h) for h in hotels]
        tile_us = timed_writes(writer, [[r for rows in per_key[k:k + 10] for r in rows]
                                        for k in range(0, len(per_key), 10)])
        plain_us = timed_writes(writer, [[r for h in hotels[k:k + 10] for r in value_rows(h + "v", 50)]
                                         for k in range(0, len(hotels), 10)])
        source = RedisFeatureSource(config, clock=lambda: datetime.fromtimestamp(T0_MS / 1000, tz=UTC))
        tile_fields = [k for k in client.hkeys(redis_key(STAY_KEYS, ("h0", "std", STAY.isoformat()), config.project))
                       if k.startswith(b"_t:")]

        def merged(hotel: str) -> object:
            return source.read(hotel, "std", STAY)

        def tiles_only(hotel: str) -> object:
            return client.hmget(redis_key(STAY_KEYS, (hotel, "std", STAY.isoformat()), config.project), tile_fields)

        merged_us, tiles_us = read_latencies(merged, hotels, args.reads), read_latencies(tiles_only, hotels, args.reads)
    finally:
        keys = list(client.scan_iter(match=f"*{config.project}".encode(), count=10_000))
        if keys:
            client.delete(*keys)
    rows_per_key = len(per_key[0])
    print(f"{args.keys} keys x {rows_per_key} tiles ({len(tile_fields)} tile fields per stay key), load {load0:.1f}")
    print(f"write: tile upsert + window merge {tile_us:,.0f} us/row vs plain compare-and-set {plain_us:,.0f} us/row "
          f"({tile_us / plain_us:.1f}x)")
    for name, lat in (("merged values (write-time merge)", merged_us), ("tiles alone (read-time merge)", tiles_us)):
        print(f"read one key, {name:34s} p50 {np.percentile(lat, 50):7,.0f} us  p99 {np.percentile(lat, 99):7,.0f} us")
    ratio = np.percentile(tiles_us, 99) / np.percentile(merged_us, 99)
    print(f"SUMMARY: write-time merge costs {tile_us / plain_us:.1f}x per written row; a read-time merge would read "
          f"{len(tile_fields)} tile fields per key, p99 {ratio:.1f}x the merged read before decoding any "
          f"(load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
