"""Errors raised by the monitors and the off-policy estimators.

Exception tree::

    FeedbackError                 root of :mod:`feedback` (see :mod:`feedback.errors`)
    └── MonitorError              root of :mod:`feedback.monitors`, :mod:`feedback.offpolicy`, :mod:`feedback.dashboard`
        └── MonitorInputError     an argument or a column breaks the contract (field, value, expectation)

``MonitorInputError`` is also a ``ValueError``.
"""

from __future__ import annotations

from feedback.errors import FeedbackError


class MonitorError(FeedbackError):
    """Root of every error raised by the monitors."""


class MonitorInputError(MonitorError, ValueError):
    """An argument or a column breaks the contract.

    Attributes:
        field: the offending argument or column.
        value: the value that was rejected (or a short summary of it).
        expected: what was expected there.

    Example:
        >>> str(MonitorInputError("alpha", 2.0, "a float in (0, 1)"))
        "field 'alpha': got 2.0, expected a float in (0, 1)"
    """

    def __init__(self, field: str, value: object, expected: str) -> None:
        self.field = field
        self.value = value
        self.expected = expected
        super().__init__(f"field {field!r}: got {value!r}, expected {expected}")
