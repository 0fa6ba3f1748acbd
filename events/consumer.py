"""Consume contract records: read_committed, commit after processing, DLQ for the unparseable.

A record that cannot be parsed (or that the handler rejects with
:class:`~events.errors.EventValidationError`) goes to ``<topic>.dlq`` with five
headers: ``source_topic``, ``source_partition``, ``source_offset``,
``error_class`` and ``error_message``. The consumer then goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer as _KafkaConsumer
from confluent_kafka import KafkaError, Message, TopicPartition

from events.config import KafkaConfig
from events.errors import EventsError, EventValidationError
from events.models import Record, parse_event
from events.producer import Producer

DLQ_HEADERS: tuple[str, ...] = ("source_topic", "source_partition", "source_offset", "error_class", "error_message")


@dataclass
class ConsumeStats:
    processed: int = 0
    dead_lettered: int = 0
    committed_batches: int = 0


def dlq_headers(msg: Message, exc: BaseException) -> list[tuple[str, str | bytes | None]]:
    """The five DLQ headers for a record that failed with ``exc``."""
    return [
        ("source_topic", str(msg.topic()).encode()),
        ("source_partition", str(msg.partition()).encode()),
        ("source_offset", str(msg.offset()).encode()),
        ("error_class", type(exc).__name__.encode()),
        ("error_message", str(exc)[:2000].encode()),
    ]


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
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.config = config
        self.topic = config.topic(topic)
        self.stats = ConsumeStats()
        self._parse = parse
        self._consumer = _KafkaConsumer(
            {
                **config.client_conf(),
                "group.id": group_id,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": auto_offset_reset,
                **(extra or {}),
            }
        )
        self._consumer.subscribe([self.topic])
        self._dlq = Producer(config, topic=f"{topic}.dlq")

    def poll_batch(self, *, max_records: int = 500, timeout_s: float = 1.0) -> list[Message]:
        """Raw messages (errors other than partition EOF raise)."""
        out = []
        for msg in self._consumer.consume(num_messages=max_records, timeout=timeout_s):
            err = msg.error()
            if err is None:
                out.append(msg)
            elif err.code() != KafkaError._PARTITION_EOF:
                raise EventsError(str(err))
        return out

    def dead_letter(self, msg: Message, exc: BaseException) -> None:
        self._dlq.send_raw(msg.key() or b"", msg.value() or b"", headers=dlq_headers(msg, exc))
        self.stats.dead_lettered += 1

    def process(self, handle: Callable[[list[Any]], None], *, max_records: int = 500, timeout_s: float = 1.0) -> int:
        """Poll once, parse, hand valid records to ``handle`` as a batch, DLQ the rest, then commit.

        Offsets are committed only after ``handle`` returned and the DLQ flushed, so a
        crash replays the batch rather than losing it.
        """
        msgs = self.poll_batch(max_records=max_records, timeout_s=timeout_s)
        if not msgs:
            return 0
        good = []
        for msg in msgs:
            try:
                good.append(self._parse(msg.value() or b""))
            except EventValidationError as exc:
                self.dead_letter(msg, exc)
        if good:
            handle(good)
        self._dlq.flush()
        self._consumer.commit(asynchronous=False)
        self.stats.processed += len(good)
        self.stats.committed_batches += 1
        return len(msgs)

    def records(self, *, idle_timeout_s: float = 5.0) -> Iterator[Record]:
        """Iterate parsed records until the topic is idle for ``idle_timeout_s`` (commits per batch)."""
        buffer: list[Record] = []
        idle = 0.0
        while idle < idle_timeout_s:
            n = self.process(buffer.extend, timeout_s=0.5)
            idle = idle + 0.5 if n == 0 else 0.0
            yield from buffer
            buffer.clear()

    def committed(self) -> list[TopicPartition]:
        assignment = self._consumer.assignment()
        return list(self._consumer.committed(assignment, timeout=10)) if assignment else []

    def close(self) -> None:
        self._dlq.close()
        self._consumer.close()

    def __enter__(self) -> EventConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
