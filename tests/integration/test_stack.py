"""The local stack's lifecycle on a private instance (own state dir and free ports; the shared stack is untouched).

``up`` twice is a no-op; a topic, a group's committed offset and Redis keys survive
``down`` + ``up``; ``down`` leaves none of our processes behind; a missing program
gives one clear message.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import redis
from confluent_kafka import Consumer, TopicPartition

from events.admin import create_topic
from events.config import KafkaConfig
from events.producer import Producer
from infra import processes, stack
from infra.config import REPO_ROOT, StackConfig
from infra.errors import PrerequisiteMissing
from infra.prereqs import require

pytestmark = pytest.mark.integration

_RECORDS = 10
_CONSUMED_BEFORE_RESTART = 4


def _free_ports(n: int) -> list[int]:
    """``n`` distinct ports the kernel just handed out (held together so they differ)."""
    with ExitStack() as held:
        socks = [held.enter_context(socket.socket()) for _ in range(n)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]


@pytest.fixture
def private_stack(tmp_path: Path) -> Iterator[StackConfig]:
    kafka_port, controller_port, redis_port = _free_ports(3)
    config = StackConfig(
        state_dir=tmp_path / "state",
        cache_dir=REPO_ROOT / ".cache",  # reuse the resolved jars
        kafka_port=kafka_port,
        kafka_controller_port=controller_port,
        redis_port=redis_port,
        kafka_heap="256m",
    )
    try:
        yield config
    finally:
        stack.down(config)


def _pids(config: StackConfig) -> dict[str, int | None]:
    return {s.name: s.pid for s in stack.status(config)}


def _consumer(config: StackConfig, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": config.kafka_bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )


def _consume(consumer: Consumer, n: int) -> list[bytes]:
    out: list[bytes] = []
    for _ in range(60):
        if len(out) >= n:
            break
        out.extend(m.value() for m in consumer.consume(num_messages=n - len(out), timeout=1.0) if m.error() is None)
    return out


def _no_spawn(*_args: object, **_kwargs: object) -> int:
    msg = "up() spawned a process although the service was running"
    raise AssertionError(msg)


def test_up_is_idempotent_state_survives_restart_and_down_leaves_nothing(
    private_stack: StackConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = private_stack
    first = stack.up(config)
    assert [(s.name, s.ready) for s in first] == [("kafka", True), ("redis", True)]
    pids = _pids(config)
    with monkeypatch.context() as patch:
        patch.setattr(processes, "spawn", _no_spawn)  # the second up must take the fast path
        second = stack.up(config)
    assert _pids(config) == pids and all(s.ready for s in second)

    kafka = KafkaConfig(bootstrap_servers=config.kafka_bootstrap, topic_prefix=f"t{uuid.uuid4().hex[:8]}-")
    topic, group = kafka.topic("lifecycle"), f"g{uuid.uuid4().hex[:8]}"
    assert create_topic(kafka, "lifecycle", partitions=1) == "created"
    with Producer(kafka, topic="lifecycle") as producer:
        for i in range(_RECORDS):
            producer.send_raw(b"k", f"r{i}".encode())
    assert producer.stats.delivered == _RECORDS
    del producer  # no client may linger and reconnect while the broker is down
    consumer = _consumer(config, group)
    consumer.assign([TopicPartition(topic, 0)])
    assert _consume(consumer, _CONSUMED_BEFORE_RESTART) == [f"r{i}".encode() for i in range(_CONSUMED_BEFORE_RESTART)]
    consumer.commit(offsets=[TopicPartition(topic, 0, _CONSUMED_BEFORE_RESTART)], asynchronous=False)
    consumer.close()
    client = redis.Redis.from_url(config.redis_url)
    client.set("lifecycle:key", "kept")
    client.close()

    assert stack.down(config) == ["kafka", "redis"]
    assert all(not Path(f"/proc/{pid}").exists() for pid in pids.values())
    assert _pids(config) == {"kafka": None, "redis": None}

    stack.up(config)
    restarted = _pids(config)
    assert None not in restarted.values() and restarted != pids
    consumer = _consumer(config, group)
    assert consumer.list_topics(topic, timeout=10).topics[topic].partitions.keys() == {0}
    assert consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == _CONSUMED_BEFORE_RESTART
    consumer.subscribe([topic])
    rest = _consume(consumer, _RECORDS - _CONSUMED_BEFORE_RESTART)
    consumer.close()
    assert rest == [f"r{i}".encode() for i in range(_CONSUMED_BEFORE_RESTART, _RECORDS)]
    client = redis.Redis.from_url(config.redis_url)
    assert client.get("lifecycle:key") == b"kept"  # replayed from the AOF
    client.close()

    assert stack.down(config) == ["kafka", "redis"]
    assert all(not Path(f"/proc/{pid}").exists() for pid in restarted.values())
    assert not config.pid_file("kafka").exists() and not config.pid_file("redis").exists()
    assert stack.down(config) == []


def test_missing_program_names_it_and_how_to_install() -> None:
    with pytest.raises(PrerequisiteMissing) as err:
        require("pricestream-no-such-program", "it with apt-get install pricestream-no-such-program")
    message = str(err.value)
    assert message.startswith("'pricestream-no-such-program' is not installed or not on PATH")
    assert "apt-get install pricestream-no-such-program" in message
