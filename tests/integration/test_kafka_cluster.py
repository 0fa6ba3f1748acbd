"""A three-node KRaft cluster: a partition leader's broker SIGKILLed mid-stream loses no acknowledged record.

Kafka's own replication test, on the cluster ``pricestream up --kafka-brokers 3`` starts: a topic
with replication factor 3 and ``min.insync.replicas`` 2, 100,000 records sent with the SDK's
producer (idempotent, ``acks=all``), the broker leading partition 0 killed with SIGKILL at 30%;
every acknowledged record is consumed, none twice.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from events.admin import create_topics
from events.config import KafkaConfig
from events.models import ViewEvent
from events.producer import Producer
from events.topics import TopicSpec
from infra import kafka_cluster, processes
from infra.config import StackConfig

pytestmark = pytest.mark.integration

RECORDS = 100_000
KILL_AT = 30_000
BASE_PORT = 39200
"""Nodes on 39200/39202/39204, controllers on the odd ports above each (this suite's port range)."""


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@pytest.fixture(scope="module")
def cluster(stack_config: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackConfig]:
    base = next(p for p in range(BASE_PORT, BASE_PORT + 400, 10) if all(_free(p + k) for k in range(6)))
    config = StackConfig(state_dir=tmp_path_factory.mktemp("kafka3"), cache_dir=stack_config.cache_dir,
                         kafka_port=base, kafka_controller_port=base + 1, kafka_heap="320m", ready_timeout_s=180.0)
    try:
        kafka_cluster.start(config, 3)
        yield config
    finally:
        kafka_cluster.stop(config)


def _partitions_with_leaders(admin: AdminClient, topic: str, wait_s: float = 60.0) -> dict:
    """The topic's partitions once every one has a leader (a new topic's metadata spreads in a few seconds)."""
    deadline = time.monotonic() + wait_s
    while True:
        partitions = admin.list_topics(topic, timeout=30).topics[topic].partitions
        if len(partitions) == 3 and all(p.leader >= 0 for p in partitions.values()):
            return dict(partitions)
        assert time.monotonic() < deadline, f"topic {topic}: partitions {partitions} without leaders"
        time.sleep(0.5)


def _leader_node(admin: AdminClient, topic: str) -> int:
    return int(admin.list_topics(topic, timeout=30).topics[topic].partitions[0].leader)


def test_every_acknowledged_record_survives_the_leaders_broker_being_killed(cluster: StackConfig) -> None:
    kafka = KafkaConfig(bootstrap_servers=kafka_cluster.bootstrap(cluster, 3), topic_prefix=f"t{uuid.uuid4().hex[:8]}-")
    create_topics(kafka, [TopicSpec(name="replicated", partitions=3)])
    topic = kafka.topic("replicated")
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    partitions = _partitions_with_leaders(admin, topic)
    assert {len(p.replicas) for p in partitions.values()} == {3}
    configs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    described = next(iter(configs.values())).result(timeout=30)
    assert described["min.insync.replicas"].value == "2"

    acked: set[str] = set()
    failed: list[str] = []

    def delivered(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            acked.add(json.loads(msg.value() or b"{}")["event_id"])
        else:
            failed.append(str(err))

    victim = None
    with Producer(kafka, topic="replicated", on_delivery=delivered) as producer:
        for i in range(RECORDS):
            if i == KILL_AT:
                producer.flush(60)  # the first 30% acknowledged, then the partition-0 leader's broker dies
                victim = _leader_node(admin, topic)
                pid = processes.read_pid(cluster.pid_file(kafka_cluster.node_service(victim - 1)))
                assert pid is not None
                os.kill(pid, signal.SIGKILL)
            producer.send(ViewEvent(hotel_id=f"h{i % 50}", room_type="std", stay_date=date(2027, 1, 1 + i % 28),
                                    event_time=datetime(2026, 12, 1, tzinfo=UTC), price_shown=100.0 + i % 7))
        producer.flush(180)
    assert victim is not None and _leader_node(admin, topic) != victim  # a follower in sync took over

    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions}
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    seen: Counter[str] = Counter()
    left = {p for p, end in ends.items() if end > 0}
    while left:
        msg = consumer.poll(10.0)
        assert msg is not None, f"partitions {sorted(left)} stopped short of their end"
        if msg.error():
            continue
        seen[json.loads(msg.value() or b"{}")["event_id"]] += 1
        if (msg.offset() or 0) + 1 >= ends[msg.partition() or 0]:
            left.discard(msg.partition() or 0)
    consumer.close()
    print(f"\nkafka cluster: {len(acked)} acknowledged, {len(failed)} failed, {sum(seen.values())} consumed; "
          f"broker {victim} killed at {KILL_AT}")
    assert len(acked) + len(failed) == RECORDS
    assert acked <= set(seen)  # 100% of acknowledged records consumed
    assert max(seen.values()) == 1  # 0 duplicates (idempotent producer)
    assert not failed, failed[:3]  # librdkafka retried every record across the leader change


def test_the_cli_refuses_a_secure_cluster(stack_config: StackConfig) -> None:
    config = stack_config.model_copy(update={"secure": True, "state_dir": Path("/nonexistent")})
    with pytest.raises(kafka_cluster.StartError, match="field 'secure'"):
        kafka_cluster.start(config, 3)
