"""Druid vs DuckDB on the same feature rows: backfill (one hotel, 7 days) and an analyst group-by.

Starts a temporary single-server Druid (assembled from Maven Central into the stack cache),
ingests the rows through the real Kafka supervisor, writes the same rows as the offline
parquet store, then times each query on both engines, interleaved, and prints p50/p99 and
the Druid/DuckDB ratio.

    .venv/bin/python bench/druid_queries.py --kafka 127.0.0.1:9092 --hotels 20 --reps 30
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from events.catalog import VIEWS
from features.analytics import QueryFailed, query
from features.backfill import backfill, offline_rows
from infra import druid_stack
from infra.config import StackConfig
from infra.druid.config import DruidPorts, DruidSettings
from infra.druid.supervisors import submit_supervisors

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DAYS = 30
BENCH_PORTS = DruidPorts(
    zookeeper=12381, derby=11727, coordinator=18281, broker=18282, historical=18283, indexer=18291, router=19088
)
GROUP_BY_SQL = (
    "SELECT hotel_id, COUNT(*) AS n, SUM(searches_24h) AS searches, AVG(mean_price_shown_24h) AS price, "
    "MAX(bookings_24h) AS peak FROM features_v1 "
    "WHERE \"__time\" >= TIMESTAMP '2026-01-01 00:00:00' AND \"__time\" < TIMESTAMP '2026-01-31 00:00:00' "
    "GROUP BY hotel_id ORDER BY hotel_id"
)


def make_rows(hotels: int, seed: int = 0) -> list[dict[str, object]]:
    """Hourly stay_24h rows for ``hotels`` x 2 room types x 4 stay dates over 30 days."""
    rng = np.random.default_rng(seed)
    names = VIEWS["stay_24h"][1]
    rows: list[dict[str, object]] = []
    for h in range(hotels):
        for room in ("std", "dlx"):
            for stay in ("2026-02-01", "2026-02-14", "2026-03-01", "2026-03-15"):
                values = rng.integers(0, 400, size=(DAYS * 24, len(names))) / 4.0
                for hour in range(DAYS * 24):
                    row: dict[str, object] = {"hotel_id": f"h{h:03d}", "room_type": room, "stay_date": stay}
                    row["view"] = "stay_24h"
                    row.update(zip(names, values[hour].tolist(), strict=True))
                    row["feature_time"] = int((T0 + timedelta(hours=hour)).timestamp() * 1000)
                    row["version"] = 1
                    rows.append(row)
    return rows


def write_offline(rows: list[dict[str, object]], root: Path) -> None:
    frame = pd.DataFrame(rows)
    frame["feature_time"] = pd.to_datetime(frame["feature_time"], unit="ms", utc=True)
    for day, part in frame.groupby(frame["feature_time"].dt.strftime("%Y-%m-%d")):
        out = root / "features_v1" / f"date={day}"
        out.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pandas(part, preserve_index=False), out / "part-0.parquet")


def ingest(rows: list[dict[str, object]], kafka: str, druid_url: str, timeout: float = 600.0) -> float:
    """Produce the rows, submit the supervisor, wait until Druid counts them; returns seconds."""
    prefix = f"bench{uuid.uuid4().hex[:8]}-"
    topic = f"{prefix}features.v1"
    admin = AdminClient({"bootstrap.servers": kafka})  # keep a reference until the futures resolve
    for fut in admin.create_topics([NewTopic(topic, 3, 1)]).values():
        fut.result(timeout=30)
    producer = Producer({"bootstrap.servers": kafka, "linger.ms": 20})
    for row in rows:
        producer.produce(topic, json.dumps(row).encode(), key=str(row["hotel_id"]))
        producer.poll(0)
    producer.flush(60)
    started = time.perf_counter()
    submit_supervisors(druid_url, kafka, topic_prefix=prefix, topics=("features.v1",))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            n = query("SELECT COUNT(*) AS n FROM features_v1", engine="druid", druid_url=druid_url).frame["n"][0]
        except QueryFailed:
            n = 0
        if n == len(rows):
            return time.perf_counter() - started
        time.sleep(1.0)
    msg = f"Druid ingested {n} of {len(rows)} rows in {timeout:.0f}s"
    raise RuntimeError(msg)


def timed(fn: Callable[[], object], reps: int) -> np.ndarray:
    out = np.empty(reps)
    for i in range(reps):
        t = time.perf_counter()
        fn()
        out[i] = (time.perf_counter() - t) * 1000.0
    return out


def run(args: argparse.Namespace) -> None:
    rows = make_rows(args.hotels)
    home = druid_stack.assemble(StackConfig().cache_dir)
    with tempfile.TemporaryDirectory() as tmp:
        settings = DruidSettings(home=home, state_dir=Path(tmp) / "druid", ports=BENCH_PORTS)
        t = time.perf_counter()
        druid_stack.start(settings)
        print(f"druid start: {time.perf_counter() - t:.1f} s")
        try:
            url = settings.sql_url
            print(f"ingest {len(rows)} rows via Kafka supervisor: {ingest(rows, args.kafka, url):.1f} s")
            mem = druid_stack.memory_mb(settings.state_dir)
            print(
                "druid RSS MiB: "
                + ", ".join(f"{k} {v:.0f}" for k, v in mem.items())
                + f" (total {sum(mem.values()):.0f})"
            )
            offline = Path(tmp) / "offline"
            write_offline(rows, offline)
            compare(url, offline, args.reps)
        finally:
            druid_stack.stop(settings.state_dir)


def compare(url: str, offline: Path, reps: int) -> None:
    start, end = T0 + timedelta(days=10), T0 + timedelta(days=17)
    cases = {
        "backfill 1 hotel x 7 days": (
            lambda: backfill(["h001"], start, end, druid_url=url),
            lambda: offline_rows(["h001"], start, end, offline_root=offline),
        ),
        f"group-by all hotels x {DAYS} days": (
            lambda: query(GROUP_BY_SQL, engine="druid", druid_url=url),
            lambda: query(GROUP_BY_SQL, engine="duckdb", offline_root=offline),
        ),
    }
    print(f"{'query':32} {'engine':7} {'p50 ms':>9} {'p99 ms':>9}")
    for name, (on_druid, on_duckdb) in cases.items():
        on_druid(), on_duckdb()  # warm caches and JIT once
        d, k = [], []
        for _ in range(reps):  # interleave so background load hits both alike
            d.append(timed(on_druid, 1)[0])
            k.append(timed(on_duckdb, 1)[0])
        for engine, ms in (("druid", d), ("duckdb", k)):
            print(f"{name:32} {engine:7} {np.percentile(ms, 50):9.1f} {np.percentile(ms, 99):9.1f}")
        print(f"{name:32} ratio druid/duckdb p50 = {np.percentile(d, 50) / np.percentile(k, 50):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kafka", default=StackConfig().kafka_bootstrap, help="Kafka bootstrap servers")
    parser.add_argument("--hotels", type=int, default=20)
    parser.add_argument("--reps", type=int, default=30)
    run(parser.parse_args())


if __name__ == "__main__":
    main()
