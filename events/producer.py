"""The producer SDK that event producers use.

Validation happens before anything is sent: an invalid event raises
:class:`~events.errors.EventValidationError` naming the field, the value and the
expectation, and nothing reaches the broker. Idempotence is on and ``acks=all``;
delivery reports reach the caller through ``on_delivery``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from confluent_kafka import KafkaError, Message
from confluent_kafka import Producer as _KafkaProducer
from pydantic import ValidationError

from events.config import KafkaConfig
from events.errors import DeliveryError, EventValidationError
from events.models import Record, dumps, parse_event, to_validation_error

DeliveryCallback = Callable[[KafkaError | None, Message], None]


@dataclass
class DeliveryStats:
    """Counts of what this producer did."""

    sent: int = 0
    delivered: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)


def producer_conf(config: KafkaConfig, *, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The confluent-kafka settings :class:`Producer` uses (idempotent, ``acks=all``, lz4), plus ``extra``.

    Example:
        >>> conf = producer_conf(KafkaConfig(), extra={"linger.ms": 20})
        >>> conf["acks"], conf["enable.idempotence"], conf["linger.ms"]
        ('all', True, 20)
    """
    conf: dict[str, Any] = {
        **config.client_conf(),
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": config.linger_ms,
        "batch.size": config.batch_size,
        "compression.type": "lz4",
        "queue.buffering.max.messages": 1_000_000,
    }
    conf.update(extra or {})
    return conf


class Producer:
    """Validate, key by ``hotel_id`` and send contract records to a topic.

    Example (needs a broker, so not run here)::

        with Producer(KafkaConfig(), topic="behaviour.events") as producer:
            producer.send(view_event)
    """

    def __init__(
        self,
        config: KafkaConfig,
        *,
        topic: str = "behaviour.events",
        on_delivery: DeliveryCallback | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.config = config
        self.topic = config.topic(topic)
        self.stats = DeliveryStats()
        self._on_delivery = on_delivery
        self._producer = _KafkaProducer(producer_conf(config, extra=extra))

    def _report(self, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            self.stats.delivered += 1
        else:
            self.stats.failed += 1
            if len(self.stats.errors) < 100:
                self.stats.errors.append(str(err))
        if self._on_delivery is not None:
            self._on_delivery(err, msg)

    def send(self, event: Record | Mapping[str, Any]) -> None:
        """Validate and enqueue one event (a model, or a dict that must parse as one).

        Raises:
            EventValidationError: the event breaks the contract; nothing was sent.
        """
        if isinstance(event, Record):
            record = _revalidate(event)
        elif isinstance(event, Mapping):
            record = parse_event(dict(event))
        else:
            kind = type(event).__name__
            raise EventValidationError(field="<record>", value=kind, expected="a contract model or a mapping")
        self.send_raw(record.key.encode(), dumps(record))

    def send_many(self, events: Iterable[Record]) -> int:
        n = 0
        for event in events:
            self.send(event)
            n += 1
        return n

    def send_raw(self, key: bytes, value: bytes, headers: list[tuple[str, str | bytes | None]] | None = None) -> None:
        """Enqueue pre-serialised bytes (no validation: the DLQ writer and benchmarks use it)."""
        while True:
            try:
                self._producer.produce(self.topic, value=value, key=key, headers=headers, on_delivery=self._report)
                break
            except BufferError:
                self._producer.poll(0.05)  # local queue full: let deliveries drain, then retry
        self.stats.sent += 1
        self._producer.poll(0)

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait for every queued record; raises DeliveryError if any is left or failed."""
        left = self._producer.flush(timeout_s)
        if left:
            msg = f"{left} records still undelivered after {timeout_s}s to {self.topic!r}"
            raise DeliveryError(msg)

    def close(self) -> None:
        self.flush()

    def __enter__(self) -> Producer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _revalidate(event: Record) -> Record:
    """Check a model again before it leaves: ``model_construct`` and mutation skip validation.

    Goes straight to the model's core validator with the field dict (what ``model_validate``
    does, minus its Python wrapper): this runs once per record sent.
    """
    try:
        return type(event).__pydantic_validator__.validate_python(event.__dict__)  # type: ignore[no-any-return]
    except ValidationError as exc:
        raise to_validation_error(exc) from exc


__all__ = ["DeliveryCallback", "DeliveryStats", "EventValidationError", "Producer", "producer_conf"]
