"""Errors raised by :mod:`routing` (complexity, router, health check, curve, delivery).

Exception tree::

    RoutingError
    ├── RoutingInputError      a value breaks a contract (field, value, expectation); also a ValueError
    ├── CalibrationError       too little recent traffic to calibrate thresholds
    └── DeliveryError          progressive delivery went wrong
        ├── RolloutStateError  an operation is not allowed in the rollout's current stage
        └── StateFileError     the rollout state file cannot be read or written

Example:
    >>> str(RoutingInputError("share", 1.5, "a number in [0, 1]"))
    "field 'share': got 1.5, expected a number in [0, 1]"
"""

from __future__ import annotations

from events.errors import FieldError


class RoutingError(Exception):
    """Root of every error raised by :mod:`routing`."""


class RoutingInputError(RoutingError, FieldError):
    """A value breaks a contract.

    Attributes:
        field: name of the offending argument or field.
        value: the rejected value.
        expected: what was expected there.
    """


class CalibrationError(RoutingError):
    """Too little recent traffic to calibrate thresholds from."""


class DeliveryError(RoutingError):
    """Root of progressive-delivery errors."""


class RolloutStateError(DeliveryError):
    """An operation is not allowed in the rollout's current stage."""


class StateFileError(DeliveryError):
    """The rollout state file cannot be read or written."""
