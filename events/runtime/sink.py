"""The producer side of the runtime: outputs and dead letters, made durable before offsets are committed.

* :class:`AtLeastOnceSink`: an idempotent producer (``acks=all``); :meth:`~AtLeastOnceSink.commit`
  waits until the broker acknowledged every record of the batch and only then commits the input
  offsets to the group. A failed delivery raises :class:`~events.runtime.errors.DeliveryFailed`
  with nothing committed, so a restart replays the batch.
* :class:`TransactionalSink`: a transactional producer whose ``transactional.id`` is stable per
  instance (a restarted instance fences its zombie and aborts what the dead one left open); a
  batch's outputs, its dead letters and its input offsets commit in one transaction
  (``send_offsets_to_transaction``).

A dead letter goes to ``<logical topic>.dlq`` with the five :data:`DLQ_HEADERS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer, TopicPartition

from events.config import KafkaConfig
from events.contract import DLQ_PAYLOAD_BYTES
from events.runtime.errors import DeliveryFailed, StreamRuntimeError
from events.runtime.source import Source
from events.runtime.step import Headers, Output, split_key

DLQ_HEADERS: tuple[str, ...] = ("source_topic", "source_partition", "source_offset", "error_class", "error_message")
_MAX_ERROR_TEXT = 2000  # a header, not a log: the class and the start of the message are what an operator reads
_POLL_WHEN_FULL_S = 0.05


def dlq_headers(msg: Message, exc: BaseException) -> Headers:
    """The five DLQ headers for a record that failed with ``exc``."""
    return [
        ("source_topic", str(msg.topic()).encode()),
        ("source_partition", str(msg.partition()).encode()),
        ("source_offset", str(msg.offset()).encode()),
        ("error_class", type(exc).__name__.encode()),
        ("error_message", str(exc)[:_MAX_ERROR_TEXT].encode()),
    ]


def _conf(kafka: KafkaConfig) -> dict[str, Any]:
    return {
        **kafka.client_conf(),
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": kafka.linger_ms,
        "compression.type": "lz4",
    }


class _Base:
    def __init__(self, kafka: KafkaConfig, producer: Producer, *, timeout_s: float) -> None:
        self._kafka = kafka
        self._producer = producer
        self._timeout = timeout_s
        self.produced: dict[str, int] = {}

    def produce(self, out: Output) -> None:
        """Enqueue one output (``out.topic`` is logical)."""
        while True:
            try:
                self._producer.produce(self._kafka.topic(out.topic), value=out.value, key=out.key,
                                       headers=out.headers, on_delivery=self._delivered)
                break
            except BufferError:
                self._producer.poll(_POLL_WHEN_FULL_S)  # local queue full: let deliveries drain, then retry
        self.produced[out.topic] = self.produced.get(out.topic, 0) + 1

    def dead_letter(self, topic: str, msg: Message, exc: BaseException) -> None:
        """Send ``msg`` to ``<topic>.dlq`` (logical ``topic``) with the DLQ headers.

        A value over :data:`~events.contract.DLQ_PAYLOAD_BYTES` is kept cut to that size, with its size in a
        ``payload_bytes`` header (as the Flink job does): a record too large to produce must not stop the service.
        """
        value = msg.value() or b""
        headers = [*dlq_headers(msg, exc), ("payload_bytes", str(len(value)).encode())]
        self.produce(Output(f"{topic}.dlq", (msg.key() or b"")[:1024], value[:DLQ_PAYLOAD_BYTES], headers))

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        """Delivery report (at-least-once counts failures; a transaction fails as a whole)."""

    def begin(self) -> None:
        """Open the batch."""

    def flush(self) -> None:
        """Make the batch's outputs durable (at-least-once: wait for their acknowledgement)."""

    def abort(self) -> None:
        """Drop an open batch (transactional only)."""

    def commit(self, offsets: Mapping[str, int], source: Source) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.abort()
        self._producer.flush(self._timeout)


class AtLeastOnceSink(_Base):
    """Outputs acknowledged first, then offsets committed to the group."""

    def __init__(self, kafka: KafkaConfig, *, timeout_s: float) -> None:
        super().__init__(kafka, Producer(_conf(kafka)), timeout_s=timeout_s)
        self._failed: list[str] = []

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self._failed.append(f"{msg.topic()}: {err}")

    def flush(self) -> None:
        """Wait for every queued output.

        Raises:
            DeliveryFailed: an output was not acknowledged (the caller must not commit).
        """
        left = self._producer.flush(self._timeout)
        if left or self._failed:
            failed, self._failed = self._failed, []
            msg = (f"{left} outputs undelivered after {self._timeout}s, {len(failed)} failed "
                   f"({failed[:3]}); input offsets not committed")
            raise DeliveryFailed(msg)

    def commit(self, offsets: Mapping[str, int], source: Source) -> None:
        """Commit ``offsets`` to the group (call :meth:`flush` first)."""
        source.commit(offsets)


class TransactionalSink(_Base):
    """One Kafka transaction per batch: outputs, dead letters and input offsets together."""

    def __init__(self, kafka: KafkaConfig, *, transactional_id: str, timeout_s: float) -> None:
        producer = Producer({**_conf(kafka), "transactional.id": transactional_id})
        try:
            producer.init_transactions(timeout_s)
        except KafkaException as exc:
            msg = f"transactional_id {transactional_id!r}: init_transactions failed: {exc}"
            raise StreamRuntimeError(msg) from exc
        super().__init__(kafka, producer, timeout_s=timeout_s)
        self._open = False

    def begin(self) -> None:
        if not self._open:
            self._producer.begin_transaction()
            self._open = True

    def commit(self, offsets: Mapping[str, int], source: Source) -> None:
        """Add the input offsets to the open transaction and commit it.

        Raises:
            DeliveryFailed: the commit failed; the transaction was aborted (nothing of it is visible).
        """
        if not self._open:
            return
        parts = [TopicPartition(*split_key(k), v) for k, v in offsets.items()]
        try:
            if parts:
                self._producer.send_offsets_to_transaction(parts, source.group_metadata(), self._timeout)
            self._producer.commit_transaction(self._timeout)
        except KafkaException as exc:
            self.abort()
            msg = f"transaction commit failed, batch aborted: {exc}"
            raise DeliveryFailed(msg) from exc
        self._open = False

    def abort(self) -> None:
        if self._open:
            self._open = False
            self._producer.abort_transaction(self._timeout)
