"""events.runtime.service on the real local Kafka: a service's runtime settings and one run to the end."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest
from confluent_kafka import Consumer, Producer
from pydantic import ValidationError

from events.admin import create_topics
from events.config import KafkaConfig
from events.runtime import BatchContext, Output, Record, RunStats, Runtime, Step, run_service, service_config
from events.topics import TopicSpec
from infra.config import StackConfig

IN, OUT = "words", "shouts"


class Shout(Step[str]):
    """Upper-cases each word; a record that is not UTF-8 fails its parse (DLQ); counts what it shouted."""

    def __init__(self) -> None:
        self.shouted = 0
        self.closed = False

    def parse(self, record: Record[bytes]) -> str:
        return record.value.decode("utf-8")

    def process(self, batch: Sequence[Record[str]], ctx: BatchContext | None) -> list[Output]:
        self.shouted += len(batch)
        return [Output(OUT, (r.key or b""), r.value.upper().encode()) for r in batch]

    def counters(self) -> dict[str, object]:
        return {"shouted": self.shouted}


class Broken(Shout):
    """Fails every batch with an error that is not a record's fault: the run raises."""

    def process(self, batch: Sequence[Record[str]], ctx: BatchContext | None) -> list[Output]:
        self.shouted += len(batch)
        msg = "disk full"
        raise OSError(msg)


def _fields(kafka: KafkaConfig) -> dict[str, object]:
    return {"name": "shout", "kafka": kafka, "inputs": (IN,), "group_id": f"g-{uuid.uuid4().hex[:8]}",
            "max_batch": 4, "poll_timeout_s": 0.2}


def _produce(kafka: KafkaConfig, values: list[bytes]) -> None:
    create_topics(kafka, [TopicSpec(name=n, partitions=1) for n in (IN, f"{IN}.dlq", OUT)])
    producer = Producer(kafka.client_conf())
    for i, value in enumerate(values):
        producer.produce(kafka.topic(IN), key=f"k{i}".encode(), value=value)
    assert producer.flush(30) == 0


def _read(kafka: KafkaConfig, topic: str, n: int) -> list[bytes]:
    consumer = Consumer({**kafka.client_conf(), "group.id": f"r-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([kafka.topic(topic)])
    out: list[bytes] = []
    try:
        for _ in range(100):
            if len(out) >= n:
                break
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                out.append(msg.value() or b"")
    finally:
        consumer.close()
    return out


def test_service_config_puts_overrides_over_the_services_fields() -> None:
    kafka = KafkaConfig(bootstrap_servers="127.0.0.1:1")
    rc = service_config(_fields(kafka), max_batch=9, max_idle_s=1.5)
    assert (rc.name, rc.inputs, rc.max_batch, rc.max_idle_s, rc.poll_timeout_s) == ("shout", (IN,), 9, 1.5, 0.2)
    with pytest.raises(ValidationError, match="max_batch"):
        service_config(_fields(kafka), max_batch=0)
    with pytest.raises(ValidationError, match="no_such_field"):
        service_config(_fields(kafka), no_such_field=1)


def test_run_service_returns_the_runtimes_totals_and_the_steps_counters(
    stack: StackConfig, kafka_config: KafkaConfig,
) -> None:
    _produce(kafka_config, [b"a", b"bb", b"\xff\xfe", b"ccc", b"dd", b"e", b"ff"])
    step = Shout()
    stats = run_service(Runtime(service_config(_fields(kafka_config), max_idle_s=2.0), step))
    assert isinstance(stats, RunStats)
    # produced counts every record the sink wrote: six shouts and the one dead letter
    assert (stats.consumed, stats.dead_lettered, stats.produced) == (7, 1, 7)
    assert stats.dead_by_topic == {IN: 1}
    assert stats.step == {"shouted": 6}
    assert stats.stopped_by == "idle"
    assert stats.commits >= 1
    assert sorted(_read(kafka_config, OUT, 6)) == [b"A", b"BB", b"CCC", b"DD", b"E", b"FF"]
    assert _read(kafka_config, f"{IN}.dlq", 1) == [b"\xff\xfe"]


def test_a_second_run_of_the_same_group_starts_after_the_committed_offsets(
    stack: StackConfig, kafka_config: KafkaConfig,
) -> None:
    _produce(kafka_config, [b"x", b"y", b"z"])
    fields = _fields(kafka_config)
    run_service(Runtime(service_config(fields, max_idle_s=2.0), Shout()))
    again = run_service(Runtime(service_config(fields, max_idle_s=2.0), Shout()))
    assert (again.consumed, again.produced, again.step) == (0, 0, {"shouted": 0})


def test_the_steps_counters_are_set_when_the_run_raises(stack: StackConfig, kafka_config: KafkaConfig) -> None:
    _produce(kafka_config, [b"p", b"q"])
    runtime = Runtime(service_config(_fields(kafka_config), max_idle_s=2.0), Broken())
    with pytest.raises(OSError, match="disk full"):
        run_service(runtime)
    assert runtime.stats.step == {"shouted": 2}
    assert runtime.stats.produced == 0
