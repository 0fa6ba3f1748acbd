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


class FieldError(ValueError):
    """A value that breaks a rule, naming the field, the value and what was expected.

    The base of every package's input errors (the contract's, the simulator's, training's, routing's, ...),
    each of which also hangs under its own package's root.

    Attributes:
        field: the offending field, argument or column (a dotted path where nested).
        value: the value that was rejected.
        expected: what was expected there.
    """

    def __init__(self, field: str, value: object, expected: str) -> None:
        self.field = field
        self.value = value
        self.expected = expected
        super().__init__(self.describe())

    def describe(self) -> str:
        """The message: ``field 'x': got 1, expected ...``."""
        return f"field {self.field!r}: got {self.value!r}, expected {self.expected}"


class EventValidationError(EventsError, FieldError):
    """An event breaks the contract (``field`` is a dotted path such as ``"price_shown"``)."""


class DeliveryError(EventsError):
    """The broker reported a failed delivery for a record."""


class TopicError(EventsError):
    """A topic could not be created or described."""
