"""Errors raised by the event contract and the Kafka adapters.

Exception tree::

    EventsError
    ├── EventValidationError   an event or request breaks the contract (field, value, expectation)
    ├── DeliveryError          the broker did not acknowledge a record
    └── TopicError             a topic could not be created or described
"""

from __future__ import annotations


class EventsError(Exception):
    """Root of every error raised by :mod:`events`."""


class EventValidationError(EventsError, ValueError):
    """An event breaks the contract.

    Attributes:
        field: dotted path of the offending field (``"price_shown"``).
        value: the value that was rejected.
        expected: what the contract expects there.
    """

    def __init__(self, field: str, value: object, expected: str) -> None:
        self.field = field
        self.value = value
        self.expected = expected
        super().__init__(f"field {field!r}: got {value!r}, expected {expected}")


class DeliveryError(EventsError):
    """The broker reported a failed delivery for a record."""


class TopicError(EventsError):
    """A topic could not be created or described."""
