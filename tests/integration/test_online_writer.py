"""Online writer on the real Redis and Kafka, read back through Feast and the scorer's source."""

from __future__ import annotations

import dataclasses
import json
import random
import threading
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from prometheus_client import CollectorRegistry

from events.admin import create_topics
from events.catalog import ALL_FEATURES, VIEWS
from events.config import KafkaConfig
from events.consumer import EventConsumer
from events.producer import Producer
from events.topics import TOPICS
from features.config import FeaturesConfig
from features.freshness import read_status
from features.online_source import RedisFeatureSource
from features.online_writer import OnlineWriter, run
from features.rows import parse_row
from features.store import build_store
from infra.config import StackConfig
from tests.integration._features_helpers import T0_MS, drop_project_keys, features_config, make_row

pytestmark = pytest.mark.integration


@pytest.fixture
def config(stack: StackConfig, key_prefix: str, tmp_path: Path, kafka_config: KafkaConfig) -> Iterator[FeaturesConfig]:
    cfg = features_config(stack, key_prefix, tmp_path, kafka_config)
    yield cfg
    drop_project_keys(cfg)


def _AT_T0() -> datetime:  # noqa: N802 - a constant clock, read like one
    """The rows of make_row are of 2025-11-30: read them as of then, inside every view's TTL."""
    return datetime.fromtimestamp(T0_MS / 1000 + 60, tz=UTC)


def _feast_refs() -> list[str]:
    return [f"{view}:{name}" for view, (_, names) in VIEWS.items() for name in names]


def test_rows_written_are_read_back_exactly_by_feast_and_the_source(config: FeaturesConfig) -> None:
    store = build_store(config, ttl_on_read=False)  # the rows are of 2025: this checks the layout
    writer = OnlineWriter(config, registry=CollectorRegistry())
    rows = [make_row(view, f"h{h}", version=10 + h) for view in VIEWS for h in range(3)]
    # hotel h2 has no stay_1h update: Feast and the source must both say None there
    rows = [r for r in rows if not (r.view == "stay_1h" and r.hotel_id == "h2")]
    assert writer.write_rows(rows).written == len(rows)

    entity_rows = [{"hotel_id": f"h{h}", "room_type": "std", "stay_date": "2026-12-24"} for h in range(3)]
    feast = store.get_online_features(features=_feast_refs(), entity_rows=entity_rows).to_dict()
    source = RedisFeatureSource(config, clock=_AT_T0)
    for h in range(3):
        expected = {n: v for r in rows if r.hotel_id == f"h{h}" for n, v in r.features.items()}
        got_feast = {n: feast[n][h] for _, (_, names) in VIEWS.items() for n in names}
        read = source.read(f"h{h}", "std", date(2026, 12, 24))
        if h == 2:
            assert got_feast["searches_1h"] is None and read.values["searches_1h"] is None
            expected.update(dict.fromkeys(VIEWS["stay_1h"][1]))
        assert got_feast == expected
        assert {n: read.values[n] for n in expected} == expected
        assert set(read.values) == set(ALL_FEATURES)
        assert read.version == 10 + h
        assert read.event_time == datetime.fromtimestamp((T0_MS + 10 + h) / 1000, tz=UTC)
    assert source.read("h1", "std", date(2026, 12, 24)).values["booking_pace_7d"] == pytest.approx(
        expected_pace(rows, "h1")
    )
    assert source.read("nobody", "std", date(2026, 12, 24)).version is None


def expected_pace(rows: list, hotel: str) -> float:
    b7 = next(r.features["bookings_7d"] for r in rows if r.hotel_id == hotel and r.view == "stay_7d")
    b14 = next(r.features["bookings_14d"] for r in rows if r.hotel_id == hotel and r.view == "stay_14d")
    return b7 / max(b14 - b7, 1.0)


def test_an_older_version_never_overwrites_a_newer_one(config: FeaturesConfig) -> None:
    writer = OnlineWriter(config, registry=CollectorRegistry())
    new, old = make_row("stay_24h", "h1", version=20), make_row("stay_24h", "h1", version=9)
    assert writer.write_rows([new]).written == 1
    assert tuple(writer.write_rows([new])) == (0, 1, 0)  # equal version (a replay) skipped in Redis
    assert tuple(writer.write_rows([old])) == (0, 1, 0)  # older skipped in Redis
    assert tuple(writer.write_rows([old, new])) == (0, 1, 1)  # older dropped in the batch, equal skipped
    read = RedisFeatureSource(config, clock=_AT_T0).read("h1", "std", date(2026, 12, 24))
    assert read.version == 20
    assert read.values["searches_24h"] == new.features["searches_24h"] == 20.0
    # versions beyond 2**53 still compare exactly (Lua compares them as decimal strings)
    big = make_row("stay_24h", "h1", version=1761998400000000124)
    bigger_by_one = make_row("stay_24h", "h1", version=1761998400000000125, base=0.0)
    assert writer.write_rows([bigger_by_one]) == (1, 0, 0)
    assert writer.write_rows([big]) == (0, 1, 0)  # compared by the Lua script, not in Python
    assert RedisFeatureSource(config, clock=_AT_T0).read("h1", "std", date(2026, 12, 24)).version == 1761998400000000125


def test_two_racing_writers_leave_the_newest_version_for_every_key(config: FeaturesConfig) -> None:
    keys = [(f"h{i % 50}", f"2026-12-{1 + i // 50:02d}") for i in range(500)]
    versions = range(1, 7)

    def work(seed: int) -> None:
        rows = [make_row("stay_inventory", h, stay=s, version=v) for h, s in keys for v in versions]
        random.Random(seed).shuffle(rows)
        writer = OnlineWriter(config, registry=CollectorRegistry())
        for i in range(0, len(rows), 97):
            writer.write_rows(rows[i : i + 97])
        writer.close()

    threads = [threading.Thread(target=work, args=(seed,)) for seed in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    reads = RedisFeatureSource(config, clock=_AT_T0).read_many([(h, "std", date.fromisoformat(s)) for h, s in keys])
    newest = make_row("stay_inventory", "x", version=6).features
    assert sum(r.version == 6 for r in reads) == len(keys) == 500
    assert all(r.values["rooms_left"] == newest["rooms_left"] and r.values["occupancy"] == 0.06 for r in reads)


def _committed(config: FeaturesConfig, partitions: int) -> dict[int, int]:
    consumer = Consumer({**config.kafka.client_conf(), "group.id": config.online_group})
    tps = [TopicPartition(config.kafka.topic(config.topic), p) for p in range(partitions)]
    out = {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=10)}
    consumer.close()
    return out


def test_offsets_are_committed_only_after_the_write_and_a_crash_replays(config: FeaturesConfig) -> None:
    create_topics(config.kafka, [TOPICS["features.v1"], TOPICS["features.v1.dlq"]])
    views = ("stay_7d", "hotel_stats")
    rows = [make_row(v, f"h{h}", version=100 + k) for k in range(3) for h in range(20) for v in views]
    with Producer(config.kafka, topic="features.v1") as producer:
        for row in rows:
            producer.send_raw(row.hotel_id.encode(), row.to_json())
        producer.send_raw(b"h0", b'{"view": "stay_99d"}')

    class Crash(Exception):
        pass

    writer = OnlineWriter(config, registry=CollectorRegistry())
    consumer = EventConsumer(config.kafka, topic="features.v1", group_id=config.online_group, parse=parse_row)
    crashed_after = 0

    def write_then_crash(batch: list) -> None:
        nonlocal crashed_after
        crashed_after = writer.write_rows(batch).written
        raise Crash

    with pytest.raises(Crash):
        for _ in range(30):  # until the first non-empty batch (partition assignment takes a moment)
            consumer.process(write_then_crash, max_records=40, timeout_s=1.0)
    consumer.close()
    assert 0 < crashed_after <= 40
    assert all(off < 0 for off in _committed(config, 6).values())  # nothing committed: the batch will replay

    stats = run(config, max_idle_s=3.0, registry=CollectorRegistry())
    assert stats.polled == len(rows) + 1 and stats.dead_lettered == 1
    # every row is accounted for once; the replayed ones were no-ops (stale) or replaced in their batch
    assert stats.written + stats.skipped_stale + stats.superseded == len(rows)
    assert stats.skipped_stale <= crashed_after  # only rows of the crashed batch can already be in Redis
    assert sum(o for o in _committed(config, 6).values() if o > 0) == len(rows) + 1
    keys = [(f"h{h}", "std", date(2026, 12, 24)) for h in range(20)]
    reads = RedisFeatureSource(config, clock=_AT_T0).read_many(keys)
    assert [r.version for r in reads] == [102] * 20
    assert all(r.values["hotel_searches_24h"] == 102.0 for r in reads)
    status = read_status(config.status_file)
    assert status is not None and status.written == stats.written and status.p99_s is not None
    assert json.loads(config.status_file.read_text())["skipped_stale"] == stats.skipped_stale + stats.superseded



def test_a_view_older_than_its_ttl_is_served_as_null(config: FeaturesConfig) -> None:
    """Feast and the scorer's source: stay_1h (TTL 2 h) 3 h old is null, stay_24h (TTL 2 days) 1 h old is not."""
    store = build_store(config)
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    fresh, old = make_row("stay_24h", "h1", version=5), make_row("stay_1h", "h1", version=5)
    fresh = dataclasses.replace(fresh, feature_time=now_ms - 3_600_000)
    old = dataclasses.replace(old, feature_time=now_ms - 3 * 3_600_000)
    assert OnlineWriter(config, registry=CollectorRegistry()).write_rows([fresh, old]).written == 2
    entity = {"hotel_id": "h1", "room_type": "std", "stay_date": "2026-12-24"}
    feast = store.get_online_features(features=_feast_refs(), entity_rows=[entity]).to_dict()
    read = RedisFeatureSource(config).read("h1", "std", date(2026, 12, 24))
    for got in ({n: v[0] for n, v in feast.items()}, read.values):
        assert got["searches_24h"] == fresh.features["searches_24h"] and got["searches_24h"] is not None
        assert got["searches_1h"] is None and got["views_1h"] is None
    assert read.event_time == datetime.fromtimestamp(fresh.feature_time / 1000, tz=UTC)
    # once every view is past its TTL nothing is served, but the read still says how old the key is
    in_three_days = RedisFeatureSource(config, clock=lambda: datetime.now(UTC) + timedelta(days=3))
    later = in_three_days.read("h1", "std", date(2026, 12, 24))
    assert later.version is None and later.values["searches_24h"] is None
    assert later.event_time == read.event_time
