"""Offline writer on real Kafka: both parquet layouts, flush manifests with offsets, Feast reads it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest

from events.admin import create_topics
from events.catalog import VIEWS
from events.config import KafkaConfig
from events.producer import Producer
from events.topics import TOPICS
from features.offline_writer import OfflineWriter, read_features_v1, read_manifests, run
from features.store import build_store
from infra.config import StackConfig
from tests.integration._features_helpers import T0_MS, features_config, make_row

pytestmark = pytest.mark.integration
DAY_MS = 86_400_000


def test_kafka_rows_land_in_both_layouts_with_their_offsets(
    stack: StackConfig, key_prefix: str, tmp_path: Path, kafka_config: KafkaConfig
) -> None:
    config = features_config(stack, key_prefix, tmp_path, kafka_config)
    create_topics(config.kafka, [TOPICS["features.v1"], TOPICS["features.v1.dlq"]])
    rows = [make_row(v, f"h{h}", version=1 + d, offset_ms=d * DAY_MS) for d in range(2) for h in range(4)
            for v in VIEWS]
    with Producer(config.kafka, topic="features.v1") as producer:
        for row in rows:
            producer.send_raw(row.hotel_id.encode(), row.to_json())
        producer.send_raw(b"h1", b"not json")

    stats = run(config, max_idle_s=3.0)
    assert (stats.written, stats.dead_lettered, stats.polled) == (len(rows), 1, len(rows) + 1)

    frame = read_features_v1(config.offline)
    assert len(frame) == len(rows)
    assert sorted(p.name for p in (config.offline / "features_v1").iterdir()) == ["date=2025-11-30", "date=2025-12-01"]
    hotel = frame[frame["view"] == "hotel_stats"]
    assert hotel["room_type"].isna().all() and hotel["searches_24h"].isna().all()
    assert hotel["hotel_views_24h"].notna().all()
    assert str(frame["feature_time"].dtype) == "datetime64[ms, UTC]"
    one = frame[(frame["view"] == "stay_7d") & (frame["hotel_id"] == "h2")].sort_values("version")
    assert one["bookings_7d"].tolist() == [r.features["bookings_7d"] for r in rows if r.view == "stay_7d" and
                                           r.hotel_id == "h2"]

    per_view = pq.read_table(config.offline / "feast" / "stay_inventory").to_pandas()
    assert len(per_view) == 8 and per_view["event_timestamp"].min() == pd.Timestamp(T0_MS + 1, unit="ms", tz="UTC")

    manifests = read_manifests(config.offline)
    offsets = [o for m in manifests for o in m["offsets"]]
    # every record, the dead-lettered one included, is accounted for exactly once
    assert sum(o["last"] - o["first"] + 1 for o in offsets) == len(rows) + 1
    assert {f for m in manifests for f in m["files"]} == {
        p.relative_to(config.offline).as_posix() for p in config.offline.glob("*/**/part-*.parquet")
    }
    # a second run finds everything committed and writes nothing
    assert run(config, max_idle_s=2.0).written == 0

    con = duckdb.connect()
    n = con.execute(f"SELECT count(*) FROM read_parquet('{config.offline}/features_v1/*/*.parquet')").fetchone()
    assert n == (len(rows),)
    assert json.loads((config.offline / "_manifests" / f"part-{manifests[0]['part_id']}.json").read_text())["rows"] > 0


def test_feast_reads_the_per_view_layout_point_in_time(stack: StackConfig, key_prefix: str, tmp_path: Path) -> None:
    config = features_config(stack, key_prefix, tmp_path)
    OfflineWriter(config.offline).write_rows(
        [make_row("stay_24h", "h1", version=v, offset_ms=v * 3_600_000) for v in (1, 5, 9)]
        + [make_row("stay_24h", "h1", version=7, offset_ms=5 * 3_600_000 - 7 + 5)]  # same event time as v5
    )
    store = build_store(config)
    ts = [T0_MS + 5 * 3_600_000 + 5 + 1, T0_MS + 9 * 3_600_000 + 9 - 1]
    entity_df = pd.DataFrame({"hotel_id": ["h1", "h1"], "room_type": ["std"] * 2, "stay_date": ["2026-12-24"] * 2,
                              "event_timestamp": pd.to_datetime(ts, unit="ms", utc=True)})
    got = store.get_historical_features(entity_df=entity_df, features=["stay_24h:searches_24h"]).to_df()
    # at the first instant v5 and v7 share the event time: the higher version wins (version_time)
    assert got.sort_values("event_timestamp")["searches_24h"].tolist() == [7.0, 7.0]


def test_feast_cli_applies_the_repo(stack: StackConfig, tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2] / "features" / "repo"
    host, port = stack.redis_url.split("//")[1].split("/")[0].split(":")
    env = {**os.environ, "PRICESTREAM_FEAST_REGISTRY": str(tmp_path / "registry.db"),
           "PRICESTREAM_FEAST_REDIS": f"{host}:{port},db=0", "PRICESTREAM_OFFLINE_ROOT": str(tmp_path / "offline")}
    feast = Path(sys.executable).with_name("feast")
    subprocess.run([str(feast), "-c", str(repo), "apply"], env=env, check=True, capture_output=True, timeout=300)
    listed = subprocess.run([str(feast), "-c", str(repo), "feature-views", "list"], env=env, check=True,
                            capture_output=True, text=True, timeout=300).stdout
    assert sorted(line.split()[0] for line in listed.splitlines()[1:] if line.strip()) == sorted(VIEWS)
