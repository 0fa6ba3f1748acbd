"""The event contract, topic registry, serde, producer SDK and market simulator."""

from __future__ import annotations

from events.config import KafkaConfig
from events.errors import DeliveryError, EventsError, EventValidationError, TopicError
from events.models import SCHEMA_VERSION, dumps, parse_event

__all__ = [
    "SCHEMA_VERSION",
    "DeliveryError",
    "EventValidationError",
    "EventsError",
    "KafkaConfig",
    "TopicError",
    "dumps",
    "parse_event",
]


def __getattr__(name: str) -> object:
    # The producer pulls in confluent-kafka; import it lazily so the contract stays light.
    if name == "Producer":
        from events.producer import Producer

        return Producer
    if name == "EventConsumer":
        from events.consumer import EventConsumer

        return EventConsumer
    msg = f"module 'events' has no attribute {name!r}"
    raise AttributeError(msg)
