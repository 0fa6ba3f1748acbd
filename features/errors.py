"""Errors raised by :mod:`features` (Feast repo, online and offline writers, snapshots).

Exception tree::

    FeaturesError
    ├── FeatureRowError        a features.v1 row breaks the contract (field, value, expectation)
    ├── OnlineStoreError       Redis (the online store) could not be written or read
    ├── SnapshotError          a snapshot cannot be built, found or loaded
    │   ├── ImpossibleValueError   a feature value is impossible (feature, value, key)
    │   └── SnapshotIntegrityError a frozen snapshot's bytes do not match its manifest
    └── StoreConfigError       the Feast store cannot be built from the configuration

``features.analytics.AnalyticsError`` (analyst queries, backfill) is a sibling root kept by its module.

Example:
    >>> err = ImpossibleValueError("occupancy", 1.4, {"hotel_id": "h1"})
    >>> str(err)
    "feature 'occupancy': got 1.4 for key {'hotel_id': 'h1'}, expected a share in [0, 1]"
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from events.errors import EventValidationError


class FeaturesError(Exception):
    """Root of every error raised by :mod:`features`."""


class FeatureRowError(FeaturesError, EventValidationError):
    """A ``features.v1`` row breaks the contract; the consumers dead-letter it."""


class OnlineStoreError(FeaturesError):
    """Redis could not be written or read."""


class StoreConfigError(FeaturesError, ValueError):
    """The Feast store cannot be built from the configuration."""


class SnapshotError(FeaturesError):
    """A snapshot cannot be built, found or loaded."""


class SnapshotIntegrityError(SnapshotError):
    """A frozen snapshot's data does not hash to what its manifest records."""


class ImpossibleValueError(SnapshotError, ValueError):
    """A feature value that no real market can produce.

    Attributes:
        feature: feature name.
        value: the offending value.
        key: the entity key (and time) of the row.
        expected: what the feature must satisfy.
    """

    def __init__(self, feature: str, value: object, key: Mapping[str, Any],
                 expected: str = "a share in [0, 1]") -> None:
        self.feature = feature
        self.value = value
        self.key = dict(key)
        self.expected = expected
        super().__init__(f"feature {feature!r}: got {value!r} for key {self.key}, expected {expected}")
