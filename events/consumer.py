"""Consume contract records with a callback: a thin face of :mod:`events.runtime` for scripts and tests.

:class:`EventConsumer` is a consumer-group member on one topic (read_committed, at-least-once):
:meth:`EventConsumer.process` polls a batch, parses it (a record that does not parse goes to
``<topic>.dlq`` with the five :data:`DLQ_HEADERS`: ``source_topic``, ``source_partition``,
``source_offset``, ``error_class``, ``error_message``), hands the valid records to a callback
and commits only after the callback returned and the dead letters were acknowledged. Services
plug a :class:`~events.runtime.step.Step` into :class:`~events.runtime.driver.Runtime` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import TopicPartition

from events.config import KafkaConfig
from events.models import Record as Event
from events.models import parse_event
from events.runtime import DLQ_HEADERS, Output, Record, Runtime, RuntimeConfig, Step, dlq_headers

__all__ = ["DLQ_HEADERS", "ConsumeStats", "EventConsumer", "dlq_headers"]

_IDLE_POLL_S = 0.5


@dataclass
class ConsumeStats:
    processed: int = 0
    dead_lettered: int = 0
    committed_batches: int = 0


class _Callback(Step[Any]):
    def __init__(self, parse: Callable[[bytes], Any]) -> None:
        self._parse = parse
        self.handle: Callable[[list[Any]], None] = lambda _: None

    def parse(self, record: Record[bytes]) -> object:
        return self._parse(record.value)

    def process(self, batch: Sequence[Record[Any]], ctx: object) -> Sequence[Output]:
        self.handle([r.value for r in batch])
        return []


class EventConsumer:
    """Read a topic as a consumer group member; parse, handle, dead-letter, commit.

    Args:
        config: Kafka settings.
        topic: logical topic name (the config's prefix is applied).
        group_id: consumer group.
        parse: bytes -> record; the default parses any contract record.
    """

    def __init__(
        self,
        config: KafkaConfig,
        *,
        topic: str,
        group_id: str,
        parse: Callable[[bytes], Any] = parse_event,
        auto_offset_reset: str = "earliest",
    ) -> None:
        self.config = config
        self.topic = config.topic(topic)
        self.stats = ConsumeStats()
        self._step = _Callback(parse)
        runtime_config = RuntimeConfig(name=f"consumer-{group_id}", kafka=config, inputs=(topic,), group_id=group_id,
                                       auto_offset_reset=auto_offset_reset)
        self._runtime = Runtime(runtime_config, self._step)

    def process(self, handle: Callable[[list[Any]], None], *, max_records: int = 500, timeout_s: float = 1.0) -> int:
        """Poll once, parse, hand valid records to ``handle`` as a batch, DLQ the rest, then commit.

        Offsets are committed only after ``handle`` returned and the DLQ flushed, so a
        crash replays the batch rather than losing it. Returns the records polled.
        """
        self._step.handle = handle
        runtime = self._runtime
        runtime.config = runtime.config.model_copy(update={"max_batch": max_records, "poll_timeout_s": timeout_s})
        result = runtime.batch()
        self.stats.processed += result.consumed - result.dead_lettered
        self.stats.dead_lettered += result.dead_lettered
        self.stats.committed_batches += result.committed
        return result.consumed

    def records(self, *, idle_timeout_s: float = 5.0) -> Iterator[Event]:
        """Iterate parsed records until the topic is idle for ``idle_timeout_s`` (commits per batch)."""
        buffer: list[Event] = []
        idle = 0.0
        while idle < idle_timeout_s:
            n = self.process(buffer.extend, timeout_s=_IDLE_POLL_S)
            idle = idle + _IDLE_POLL_S if n == 0 else 0.0
            yield from buffer
            buffer.clear()

    def committed(self) -> list[TopicPartition]:
        consumer = self._runtime.source._consumer
        assignment = consumer.assignment()
        return list(consumer.committed(assignment, timeout=10)) if assignment else []

    def close(self) -> None:
        self._runtime.close()

    def __enter__(self) -> EventConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
