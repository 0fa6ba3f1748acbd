"""The producer SDK that event producers use.

Validation happens before anything is sent: an invalid event raises
:class:`~events.errors.EventValidationError` naming the field, the value and the
expectation, and nothing reaches the broker. So does a record (key and value) larger
than ``max_record_bytes``: the contract's :data:`~events.models.MAX_RECORD_BYTES`, or a
smaller ``message.max.bytes`` given in ``extra``. Idempotence is on and ``acks=all``; delivery reports reach the
caller through ``on_delivery``.

Nothing is lost without a word: :meth:`Producer.flush` and :meth:`Producer.close`
raise :class:`~events.errors.DeliveryError`, naming how many records failed and the
first error, when any delivery since the previous flush failed or a record is still
queued. ``with Producer(...)`` flushes on exit; when the body itself raised, that
exception is the one that propagates, and a delivery failure is attached to it as a
note (and logged) rather than raised over it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from confluent_kafka import KafkaError, Message
from confluent_kafka import Producer as _KafkaProducer
from pydantic import ValidationError

from events.config import KafkaConfig
from events.contract import FLAGS_HEADER, HotelProfile, flags
from events.errors import DeliveryError, EventValidationError
from events.models import MAX_RECORD_BYTES, Record, dumps, parse_event, to_validation_error
from events.redact import redact

log = logging.getLogger(__name__)

_KEPT_ERRORS = 100
"""Delivery error texts kept in :class:`DeliveryStats` (the counts are exact; the texts are for reading)."""

DeliveryCallback = Callable[[KafkaError | None, Message], None]


@dataclass
class DeliveryStats:
    """Counts of what this producer did."""

    sent: int = 0
    delivered: int = 0
    failed: int = 0
    flagged: int = 0
    """Sent with plausibility flags (header ``pricestream-flags``: complimentary, day_use, price_outlier)."""
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
        hotels: Mapping[str, HotelProfile] | None = None,
    ) -> None:
        self.config = config
        self.hotels = dict(hotels or {})
        # the hotel profiles of the contract's stay-date rule (the Flink job gets the same ones)
        self._context = {"hotels": self.hotels}
        self.topic = config.topic(topic)
        self.stats = DeliveryStats()
        self._on_delivery = on_delivery
        conf = producer_conf(config, extra=extra)
        # the contract's limit, which is also librdkafka's message.max.bytes default; a smaller one set in
        # ``extra`` is the broker-side limit this producer must respect
        self.max_record_bytes = min(int(conf.get("message.max.bytes", MAX_RECORD_BYTES)), MAX_RECORD_BYTES)
        self._secrets = [config.sasl_password.get_secret_value()] if config.sasl_password else []
        self._failed_since_flush = 0
        self._first_error: str | None = None
        self._producer = _KafkaProducer(conf)

    def _report(self, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            self.stats.delivered += 1
        else:
            self.stats.failed += 1
            self._failed_since_flush += 1
            text = redact(str(err), secrets=self._secrets)
            if self._first_error is None:
                self._first_error = text
            if len(self.stats.errors) < _KEPT_ERRORS:
                self.stats.errors.append(text)
        if self._on_delivery is not None:
            self._on_delivery(err, msg)

    def send(self, event: Record | Mapping[str, Any]) -> None:
        """Validate and enqueue one event (a model, or a dict that must parse as one).

        Raises:
            EventValidationError: the event breaks the contract; nothing was sent.
        """
        if isinstance(event, Record):
            record = _revalidate(event, self._context)
        elif isinstance(event, Mapping):
            # the SDK fills the envelope (a new event_id, now, the current version) like the model does
            record = parse_event(dict(event), context=self._context, envelope=False)
        else:
            kind = type(event).__name__
            raise EventValidationError(field="<record>", value=kind, expected="a contract model or a mapping")
        marks = flags(record, self.hotels)
        headers: list[tuple[str, str | bytes | None]] | None = [(FLAGS_HEADER, ",".join(marks))] if marks else None
        if marks:
            self.stats.flagged += 1
        self.send_raw(record.key.encode(), dumps(record), headers)

    def send_many(self, events: Iterable[Record]) -> int:
        n = 0
        for event in events:
            self.send(event)
            n += 1
        return n

    def send_raw(self, key: bytes, value: bytes, headers: list[tuple[str, str | bytes | None]] | None = None) -> None:
        """Enqueue pre-serialised bytes (no contract validation: the DLQ writer and benchmarks use it).

        Raises:
            EventValidationError: key and value together exceed :attr:`max_record_bytes`; nothing was sent.
        """
        size = len(value) + len(key)
        if size > self.max_record_bytes:
            raise EventValidationError(field="<record>", value=f"{size} bytes",
                                       expected=f"at most {self.max_record_bytes} bytes (key and value)")
        while True:
            try:
                self._producer.produce(self.topic, value=value, key=key, headers=headers, on_delivery=self._report)
                break
            except BufferError:
                self._producer.poll(0.05)  # local queue full: let deliveries drain, then retry
        self.stats.sent += 1
        self._producer.poll(0)

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait for every queued record.

        Raises:
            DeliveryError: a record is still queued after ``timeout_s``, or a delivery failed since the
                previous flush (the count and the first error are in the message; the count restarts).
        """
        left = self._producer.flush(timeout_s)
        failed, first = self._failed_since_flush, self._first_error
        self._failed_since_flush, self._first_error = 0, None
        problems = []
        if failed:
            problems.append(f"{failed} records failed delivery since the last flush (first error: {first})")
        if left:
            problems.append(f"{left} records still undelivered after {timeout_s}s")
        if problems:
            msg = f"topic {self.topic!r}: " + "; ".join(problems)
            raise DeliveryError(msg)

    def close(self, timeout_s: float = 30.0) -> None:
        """Flush (see :meth:`flush`, which raises the same way)."""
        self.flush(timeout_s)

    def __enter__(self) -> Producer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None:
            self.close()
            return
        try:
            self.close()
        except DeliveryError as delivery:  # the body's own exception wins; this one rides along with it
            exc.add_note(f"also, on closing the producer: {delivery}")
            log.error("closing the producer after %s: %s", type(exc).__name__, delivery)


def _revalidate(event: Record, context: dict[str, Any] | None = None) -> Record:
    """Check a model again before it leaves: ``model_construct`` and mutation skip validation.

    Goes straight to the model's core validator with the field dict (what ``model_validate``
    does, minus its Python wrapper): this runs once per record sent.
    """
    try:
        validator = type(event).__pydantic_validator__
        checked: Record = validator.validate_python(event.__dict__, context=context)  # the model's own validator
        return checked
    except ValidationError as exc:
        raise to_validation_error(exc) from exc


__all__ = ["DeliveryCallback", "DeliveryStats", "EventValidationError", "Producer", "producer_conf"]
