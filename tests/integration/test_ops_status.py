"""Issue 31 item 8: ``status`` reports a healthy 3-broker Kafka as ready and shows each Redis Cluster node."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from infra import kafka_cluster, redis_cluster
from infra.config import StackConfig
from pricestream.deployment import free_ports
from pricestream.supervision import executable

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def clusters(stack_config: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackConfig]:
    """``up --kafka-brokers 3 --redis-cluster 3`` on a state dir and ports of this module's own."""
    kafka_base, redis_base = free_ports("127.0.0.1", 6), free_ports("127.0.0.1", 7)
    config = StackConfig(state_dir=tmp_path_factory.mktemp("clusters"), cache_dir=stack_config.cache_dir,
                         kafka_port=kafka_base, kafka_controller_port=kafka_base + 1, redis_port=redis_base,
                         kafka_heap="320m", ready_timeout_s=180.0)
    try:
        kafka_cluster.start(config, 3)
        redis_cluster.start(config, 3)
        yield config
    finally:
        kafka_cluster.stop(config)
        redis_cluster.stop(config)


def _status(config: StackConfig) -> dict[str, tuple[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRICESTREAM_")}
    env |= {"PRICESTREAM_STATE_DIR": str(config.state_dir), "PRICESTREAM_KAFKA_PORT": str(config.kafka_port),
            "PRICESTREAM_KAFKA_CONTROLLER_PORT": str(config.kafka_controller_port),
            "PRICESTREAM_REDIS_PORT": str(config.redis_port), "PRICESTREAM_CACHE_DIR": str(config.cache_dir)}
    done = subprocess.run([executable(), "status"], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {}
    for line in done.stdout.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if len(cells) == 4 and cells[0] not in ("service", ""):
            rows[cells[0]] = (cells[2], cells[3])
    return rows


def test_a_healthy_three_broker_kafka_is_ready(clusters: StackConfig) -> None:
    rows = _status(clusters)
    assert "kafka" not in rows  # was: the single node's row, "no", while the cluster was healthy
    assert {name: ready for name, (ready, _) in rows.items() if name.startswith("kafka")} == {
        "kafka-cluster-0": "yes", "kafka-cluster-1": "yes", "kafka-cluster-2": "yes"}
    assert rows["kafka-cluster-1"][1] == f"127.0.0.1:{clusters.kafka_port + 2}"


def test_each_redis_cluster_node_is_shown(clusters: StackConfig) -> None:
    rows = _status(clusters)
    nodes = {name: cells for name, cells in rows.items() if name.startswith("redis-cluster")}
    assert sorted(nodes) == [f"redis-cluster-{i}" for i in range(6)]
    assert all(ready == "yes" for ready, _ in nodes.values())
    assert nodes["redis-cluster-3"][1] == f"127.0.0.1:{clusters.redis_port + 4} (replica)"
    assert rows["redis"][0] == "no"  # the single server was not started here: said, not hidden


def test_a_stopped_node_is_not_ready(clusters: StackConfig) -> None:
    from infra import processes

    processes.stop(clusters.pid_file(redis_cluster.node_service(5)))  # a replica: the cluster stays ok
    rows = _status(clusters)
    assert rows["redis-cluster-5"][0] == "no" and rows["redis-cluster-0"][0] == "yes"
