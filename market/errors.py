"""Errors raised by the market simulator.

They hang under the package root :class:`events.errors.EventsError`.

Exception tree::

    EventsError
    └── SimulatorError         the simulator was asked something it cannot answer
        ├── UnknownKeyError    a hotel id, room type, segment or channel the market does not have
        └── PolicyError        a pricing policy returned a price that is not finite and positive
"""

from __future__ import annotations

from events.errors import EventsError, FieldError


class SimulatorError(EventsError, FieldError):
    """Root of the simulator's errors (the field, the value, what was expected instead)."""

    def describe(self) -> str:
        return f"{self.field}: got {self.value!r}, expected {self.expected}"


class UnknownKeyError(SimulatorError, KeyError):
    """A hotel id, room type, segment or channel that this market does not have."""

    def __str__(self) -> str:  # KeyError would quote the message otherwise
        return str(self.args[0])


class PolicyError(SimulatorError):
    """A policy returned a price that is not a finite positive number."""
