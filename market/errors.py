"""Errors raised by the market simulator.

They hang under the package root :class:`events.errors.EventsError`.

Exception tree::

    EventsError
    └── SimulatorError         the simulator was asked something it cannot answer
        ├── UnknownKeyError    a hotel id, room type, segment or channel the market does not have
        └── PolicyError        a pricing policy returned a price that is not finite and positive
"""

from __future__ import annotations

from events.errors import EventsError


class SimulatorError(EventsError, ValueError):
    """Root of the simulator's errors.

    Attributes:
        field: the offending argument or field.
        value: the value that was rejected.
        expected: what was expected instead.
    """

    def __init__(self, field: str, value: object, expected: str) -> None:
        self.field = field
        self.value = value
        self.expected = expected
        super().__init__(f"{field}: got {value!r}, expected {expected}")


class UnknownKeyError(SimulatorError, KeyError):
    """A hotel id, room type, segment or channel that this market does not have."""

    def __str__(self) -> str:  # KeyError would quote the message otherwise
        return str(self.args[0])


class PolicyError(SimulatorError):
    """A policy returned a price that is not a finite positive number."""
