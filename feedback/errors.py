"""Errors raised by :mod:`feedback` (label join, samplers, trainers, registry, guards).

Exception tree::

    FeedbackError
    ├── FeedbackConfigError     a sampler, joiner, guard or trainer was given an impossible setting
    ├── LabelJoinError          the label joiner got an input or a checkpoint it cannot use
    ├── TrainingError           an incremental trainer cannot run on the frame it was given
    └── RegistryError           the model registry refused an operation
        └── UnknownVersionError a version id that the registry does not hold

Every message names the field, the value and what was expected.
"""

from __future__ import annotations

from events.errors import FieldError


class FeedbackError(Exception):
    """Root of every error raised by :mod:`feedback`."""


class FeedbackConfigError(FeedbackError, FieldError):
    """A setting that cannot work (field, value, expectation).

    Example:
        >>> str(FeedbackConfigError("budget_per_period", -1, "a positive integer or None"))
        "field 'budget_per_period': got -1, expected a positive integer or None"
    """


class LabelJoinError(FeedbackError, ValueError):
    """The label joiner got an input or a checkpoint that it cannot use."""


class TrainingError(FeedbackError, ValueError):
    """An incremental trainer cannot run on the frame it was given (missing columns, too few rows)."""


class RegistryError(FeedbackError):
    """The model registry refused an operation (bad bundle, nothing to roll back to, hash mismatch)."""


class UnknownVersionError(RegistryError, KeyError):
    """A version id that the registry does not hold.

    Example:
        >>> str(UnknownVersionError("light-v9", known=("light-v1",)))
        "version 'light-v9' is not registered; known versions: ['light-v1']"
    """

    def __init__(self, version: str, *, known: tuple[str, ...]) -> None:
        self.version = version
        self.known = known
        super().__init__(version)

    def __str__(self) -> str:
        return f"version {self.version!r} is not registered; known versions: {sorted(self.known)}"


def require(condition: bool, field: str, value: object, expected: str) -> None:
    """Raise :class:`FeedbackConfigError` naming ``field`` unless ``condition`` holds.

    Example:
        >>> require(3 > 0, "budget_per_period", 3, "a positive integer")
        >>> require(-1 > 0, "budget_per_period", -1, "a positive integer")
        Traceback (most recent call last):
        ...
        feedback.errors.FeedbackConfigError: field 'budget_per_period': got -1, expected a positive integer
    """
    if not condition:
        raise FeedbackConfigError(field, value, expected)
