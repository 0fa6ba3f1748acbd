"""Errors raised by :mod:`pricing` (rules, models, optimiser, scorer).

Exception tree::

    PricingError
    ├── RuleSetError             a rule file is invalid (rule id, field, value, expectation)
    ├── BundleError              a model bundle is missing, unreadable or fails its checksum
    ├── TrainingError            a training frame cannot be used (missing column, one class, ...)
    ├── QuoteError               a quote was asked with impossible bounds (floor > ceiling, non-finite)
    └── FeatureStoreUnavailable  the online feature store cannot be read (the scorer degrades to rules)

Every message names the offending field, the value and what was expected.

Example:
    >>> err = RuleSetError("floor-h1", "price", -5, "a finite number > 0")
    >>> str(err)
    "rule 'floor-h1', field 'price': got -5, expected a finite number > 0"
    >>> isinstance(err, PricingError) and isinstance(err, ValueError)
    True
"""

from __future__ import annotations

from events.errors import FieldError


class PricingError(Exception):
    """Root of every error raised by :mod:`pricing`."""


class RuleSetError(PricingError, ValueError):
    """A rule set failed validation on load.

    Attributes:
        rule_id: id of the offending rule, or ``"<ruleset>"`` for file-level fields.
        field: dotted field path inside the rule (``"price"``, ``"dates.0"``).
        value: the rejected value.
        expected: what the rule set expects there.
    """

    def __init__(self, rule_id: str, field: str, value: object, expected: str) -> None:
        self.rule_id = rule_id
        self.field = field
        self.value = value
        self.expected = expected
        super().__init__(f"rule {rule_id!r}, field {field!r}: got {value!r}, expected {expected}")


class BundleError(PricingError):
    """A model bundle directory cannot be loaded (missing file, bad meta, checksum mismatch)."""


class TrainingError(PricingError, FieldError):
    """A training frame or option cannot be used.

    Attributes:
        field: the offending column or option.
        value: what was found.
        expected: what training needs.
    """


class QuoteError(PricingError, FieldError):
    """A quote was requested with bounds that no price can satisfy."""


class FeatureStoreUnavailable(PricingError):
    """The online feature store could not be read; callers fall back to the rules tier."""
