"""The online store on a real three-master Redis Cluster (``pricestream up --redis-cluster 3``).

One cluster for the module (3 masters, 1 replica each, on the ports after the stack's Redis port),
reused when it is already up; every test writes under its own project (key suffix). The failover
test SIGKILLs one master and restarts it afterwards (it rejoins as its old replica's replica).
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException
from typer.testing import CliRunner

from events.catalog import VIEWS
from features.config import FeaturesConfig
from features.connection import redis_client, slot_of
from features.errors import OnlineStoreError
from features.freshness import sink_status_key
from features.online_source import RedisFeatureSource
from features.online_writer import OnlineWriter, row_key, script_chunks
from features.store import build_store
from infra import processes, redis_cluster
from infra.config import StackConfig
from tests.integration._features_helpers import T0_MS, make_row
from tests.integration.test_scorer_redis import _model_priced, _requests, _rows, _scorer, bundles  # noqa: F401

pytestmark = pytest.mark.integration

MASTERS = 3


@pytest.fixture(scope="module")
def cluster(stack_config: StackConfig) -> Iterator[StackConfig]:
    """The stack's Redis Cluster: started here (and stopped at the end) unless it already runs."""
    started_here = redis_cluster.running_nodes(stack_config) == 0
    redis_cluster.start(stack_config, MASTERS)
    yield stack_config
    if started_here:
        redis_cluster.stop(stack_config)


@pytest.fixture
def config(cluster: StackConfig, key_prefix: str, tmp_path: Path) -> Iterator[FeaturesConfig]:
    cfg = FeaturesConfig(project=key_prefix.rstrip(":"), state_dir=tmp_path,
                         redis_url=redis_cluster.cluster_url(cluster, MASTERS), redis_timeout_s=1.0)
    yield cfg
    client = redis_client(cfg)
    for key in list(client.scan_iter(match=b"*" + cfg.project.encode(), count=1000)):  # every master's keys
        client.delete(key)
    client.close()


def _at_t0() -> datetime:
    return datetime.fromtimestamp(T0_MS / 1000 + 60, tz=UTC)


def _masters_holding(config: FeaturesConfig, keys: list[bytes]) -> dict[str, int]:
    client = redis_client(config)
    assert isinstance(client, RedisCluster)
    counts: dict[str, int] = {}
    for key in keys:
        node = client.get_node_from_key(key)
        assert node is not None
        counts[node.name] = counts.get(node.name, 0) + 1
    client.close()
    return counts


def test_two_racing_writers_leave_the_newest_version_for_every_key_on_the_cluster(config: FeaturesConfig) -> None:
    keys = [(f"h{i % 50}", f"2026-12-{1 + i // 50:02d}") for i in range(500)]

    def work(seed: int) -> None:
        rows = [make_row("stay_inventory", h, stay=s, version=v) for h, s in keys for v in range(1, 7)]
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
    reads = RedisFeatureSource(config, clock=_at_t0).read_many([(h, "std", date.fromisoformat(s)) for h, s in keys])
    newest = make_row("stay_inventory", "x", version=6).features
    assert sum(r.version == 6 for r in reads) == len(keys) == 500
    assert all(r.values["rooms_left"] == newest["rooms_left"] and r.values["occupancy"] == 0.06 for r in reads)
    redis_keys = [row_key(make_row("stay_inventory", h, stay=s, version=1), config.project) for h, s in keys]
    spread = _masters_holding(config, redis_keys)
    assert len(spread) == MASTERS and min(spread.values()) > 50  # the keys really are on all three masters


def test_script_calls_touch_one_slot_each(config: FeaturesConfig) -> None:
    rows = [make_row(view, f"h{h}", version=5) for view in VIEWS for h in range(40)]
    batch = [(row_key(r, config.project), r) for r in rows]
    chunks = script_chunks(batch, cluster=True)
    assert all(len({slot_of(key) for key, _ in chunk}) == 1 for chunk in chunks)
    assert sorted(id(r) for chunk in chunks for _, r in chunk) == sorted(id(r) for r in rows)
    writer = OnlineWriter(config, registry=CollectorRegistry())
    assert writer.write_rows(rows).written == len(rows)  # a CROSSSLOT script would raise here
    assert writer.write_rows(rows).skipped_stale == len(rows)
    writer.close()


def test_feast_and_the_source_read_the_writers_rows_on_the_cluster(config: FeaturesConfig) -> None:
    rows = [make_row(view, f"h{h}", version=10 + h) for view in VIEWS for h in range(3)]
    writer = OnlineWriter(config, registry=CollectorRegistry())
    assert writer.write_rows(rows).written == len(rows)
    writer.close()
    store = build_store(config, ttl_on_read=False)  # Feast's redis_type: redis_cluster, rows of 2025 (layout check)
    refs = [f"{view}:{name}" for view, (_, names) in VIEWS.items() for name in names]
    entity_rows = [{"hotel_id": f"h{h}", "room_type": "std", "stay_date": "2026-12-24"} for h in range(3)]
    feast = store.get_online_features(features=refs, entity_rows=entity_rows).to_dict()
    source = RedisFeatureSource(config, clock=_at_t0)
    for h in range(3):
        expected = {n: v for r in rows if r.hotel_id == f"h{h}" for n, v in r.features.items()}
        assert {n: feast[n][h] for n in expected} == expected
        read = source.read(f"h{h}", "std", date(2026, 12, 24))
        assert {n: read.values[n] for n in expected} == expected
        assert read.version == 10 + h


def test_the_scorer_prices_from_the_cluster(config: FeaturesConfig, bundles: tuple[Path, Path]) -> None:  # noqa: F811
    writer = OnlineWriter(config, registry=CollectorRegistry())
    assert writer.write_rows(_rows()).written == len(_rows())
    writer.close()
    scorer = _scorer(config, bundles)
    decisions = scorer.price_batch(_requests(40)) + [scorer.price(r) for r in _requests(8)]
    assert _model_priced(decisions)  # every decision by a model, with the version read from the cluster
    first = decisions[0]
    stored = next(r for r in _rows() if r.view == "stay_inventory" and r.hotel_id == first.hotel_id
                  and r.stay_date == first.stay_date.isoformat())
    assert first.features["occupancy"] == stored.features["occupancy"]


def test_features_status_reads_the_sink_status_from_the_cluster(config: FeaturesConfig, cluster: StackConfig) -> None:
    from pricestream.cli import app

    client = redis_client(config)
    buckets = b",".join([b"0", b"1234"] + [b"0"] * 17)
    client.hset(sink_status_key(config.project), mapping={"subtask-0": b"1234,5,1764000000000;" + buckets})
    client.close()
    env = {"PRICESTREAM_REDIS_URL": config.redis_url, "PRICESTREAM_FEAST_PROJECT": config.project,
           "PRICESTREAM_STATE_DIR": str(cluster.state_dir)}
    result = CliRunner().invoke(app, ["features", "status"], env=env)
    assert result.exit_code == 0, result.output
    assert "1234" in result.output


def _slot_moved(config: FeaturesConfig, key: bytes, old_port: int) -> bool:
    """The cluster (as a fresh client sees it) serves ``key``'s slot from another node than ``old_port``."""
    try:
        return _master_of(config, key)[0] != old_port
    except RedisClusterException:
        return False


def _master_of(config: FeaturesConfig, key: bytes) -> tuple[int, int]:
    """(port, node index) of the master that holds ``key`` now."""
    client = redis_client(config)
    assert isinstance(client, RedisCluster)
    node = client.get_node_from_key(key)
    client.close()
    assert node is not None
    return node.port, node.port - config_port_base(config)


def config_port_base(config: FeaturesConfig) -> int:
    """Node 0's port (the cluster URL's first seed)."""
    return int(config.redis_url.split("://", 1)[1].split(",")[0].rsplit(":", 1)[1])


def test_a_master_killed_mid_stream_loses_no_acknowledged_write(cluster: StackConfig, config: FeaturesConfig) -> None:
    waiting = config.model_copy(update={"redis_wait_replicas": 1, "redis_wait_ms": 500})
    hotels = [f"h{i}" for i in range(60)]
    victim_key = row_key(make_row("stay_24h", hotels[0], version=1), config.project)
    port, index = _master_of(config, victim_key)
    writer = OnlineWriter(waiting, registry=CollectorRegistry())
    acked: dict[str, int] = {}
    failed_batches, promoted, restarted, killed_at = 0, None, False, time.monotonic()
    deadline = time.monotonic() + 90.0
    for version in range(1, 121):
        rows = [make_row("stay_24h", h, version=version) for h in hotels]
        while True:
            try:
                writer.write_rows(rows)
                break
            except OnlineStoreError:
                # the slot's master is gone until its replica is promoted, and the promoted replica has no
                # replica of its own until the killed node is back: WAIT 1 fails, so nothing is acknowledged
                failed_batches += 1
                assert time.monotonic() < deadline, "the cluster did not take writes again within 90 s"
                if promoted is None and redis_cluster.roles(cluster, MASTERS)[port] == "down":
                    promoted = _master_of(config, victim_key)[0] if _slot_moved(config, victim_key, port) else None
                if promoted is not None and not restarted:
                    redis_cluster.start_node(cluster, index)  # rejoins as the replica of the promoted one
                    restarted = True
                time.sleep(0.2)
        acked.update(dict.fromkeys(hotels, version))
        if version == 40:
            pid = processes.read_pid(cluster.pid_file(redis_cluster.node_service(index)))
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            killed_at = time.monotonic()
        if version == 41:
            print(f"first batch acknowledged {time.monotonic() - killed_at:.1f} s after the SIGKILL "  # noqa: T201
                  f"({failed_batches} attempts failed; the killed node restarted: {restarted})")
    writer.close()
    try:
        assert promoted is not None and promoted != port  # the replica took over the killed master's slots
        assert redis_cluster.roles(cluster, MASTERS)[promoted] == "master"
        assert failed_batches > 0  # the kill was felt: batches failed until the failover
        reads = RedisFeatureSource(config, clock=_at_t0).read_many([(h, "std", date(2026, 12, 24)) for h in hotels])
        lost = [h for h, r in zip(hotels, reads, strict=True) if r.version is None or r.version < acked[h]]
        assert lost == []
        assert all(r.version == 120 for r in reads)
    finally:
        redis_cluster.start_node(cluster, index)  # no-op once restarted above
        redis_cluster.start(cluster, MASTERS)  # cluster_state:ok on every node before the next test


@pytest.mark.flink
def test_the_feature_jobs_sink_writes_the_cluster_as_the_python_writer_does(
    stack: StackConfig, config: FeaturesConfig, tmp_path: Path
) -> None:
    """One bounded job run: its Java sink writes the cluster; its ``features.v1`` rows, through the Python
    writer under a second project on the same cluster, must give every key the same values and versions."""
    import json
    import uuid as _uuid
    from datetime import timedelta

    from events.config import KafkaConfig
    from events.models import dumps
    from features.rows import parse_row
    from market import Market, MarketConfig, simulate
    from pipelines.config import FeatureJobConfig, OnlineSink
    from pipelines.feature_job import run
    from tests.integration.flink_helpers import make_topics, read_all

    start = datetime(2026, 11, 1, tzinfo=UTC)
    events = [json.loads(dumps(e)) for e in simulate(Market(MarketConfig(hotels=3, seed=3, start=start)), start=start,
                                                     duration=timedelta(days=30), max_events=3_000, rng_seed=3)]
    kafka = KafkaConfig(bootstrap_servers=stack.kafka_bootstrap, topic_prefix=f"rc{_uuid.uuid4().hex[:8]}-")
    make_topics(kafka, partitions=2)
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap, "enable.idempotence": True})
    for e in events:
        producer.produce(kafka.topic("behaviour.events"), json.dumps(e).encode(), e["hotel_id"].encode())
        producer.poll(0)
    assert producer.flush(60) == 0
    job = FeatureJobConfig(bootstrap_servers=stack.kafka_bootstrap, topic_prefix=kafka.topic_prefix,
                           connector_jar=stack.flink_kafka_connector_jar, bounded=True, startup="earliest-offset",
                           checkpoint_dir=tmp_path / "chk", group_id=f"rc-{_uuid.uuid4().hex[:6]}",
                           online=OnlineSink(redis_url=config.redis_url, project=config.project))
    run(job)
    python_side = config.model_copy(update={"project": config.project + "py"})
    try:
        rows = [parse_row(m.value()) for m in read_all(kafka, "features.v1")]
        writer = OnlineWriter(python_side, registry=CollectorRegistry())
        for i in range(0, len(rows), 2000):
            writer.write_rows(rows[i : i + 2000])
        writer.close()
        keys = sorted({(e["hotel_id"], e["room_type"], date.fromisoformat(e["stay_date"])) for e in events
                       if e.get("room_type") and e.get("stay_date")})
        last = datetime.fromtimestamp(max(e["event_time"] for e in events) / 1000, tz=UTC)
        as_of = lambda: last + timedelta(minutes=30)  # noqa: E731 - read inside every view's TTL
        by_sink = RedisFeatureSource(config, clock=as_of).read_many(keys)
        by_python = RedisFeatureSource(python_side, clock=as_of).read_many(keys)
    finally:
        client = redis_client(python_side)
        for key in list(client.scan_iter(match=b"*" + python_side.project.encode(), count=1000)):
            client.delete(key)
        client.close()
    assert len(keys) > 100 and sum(r.version is not None for r in by_sink) > 100
    assert [(r.version, r.values) for r in by_sink] == [(r.version, r.values) for r in by_python]
