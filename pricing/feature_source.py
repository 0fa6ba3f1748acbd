"""The scorer's view of the online feature store: the :class:`FeatureSource` protocol.

Production reads Redis through Feast (the lead's adapter); :class:`MemoryFeatureSource`
is a real, dict-backed implementation for simulations, backtests, benchmarks and tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import NamedTuple, Protocol, runtime_checkable


class FeatureRead(NamedTuple):
    """One online feature read: values keyed by ``ALL_FEATURES``, their version and event time."""

    values: Mapping[str, float | None]
    version: int | None = None
    event_time: datetime | None = None


EMPTY_READ = FeatureRead({}, None, None)


@runtime_checkable
class FeatureSource(Protocol):
    """Where the scorer reads online features (Redis/Feast in production).

    ``read`` raises :class:`~pricing.errors.FeatureStoreUnavailable` when the store is down.
    A source may also offer ``read_many(keys) -> Sequence[FeatureRead]`` for batches.
    """

    def read(self, hotel_id: str, room_type: str, stay_date: date) -> FeatureRead: ...


class MemoryFeatureSource:
    """A dict-backed :class:`FeatureSource` (simulations, backtests, benchmarks, tests).

    Example:
        >>> src = MemoryFeatureSource()
        >>> src.put("h1", "std", date(2026, 1, 2), {"occupancy": 0.4}, version=3)
        >>> src.read("h1", "std", date(2026, 1, 2)).version
        3
        >>> src.read("h2", "std", date(2026, 1, 2)).values
        {}
    """

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str, date], FeatureRead] = {}

    def put(
        self,
        hotel_id: str,
        room_type: str,
        stay_date: date,
        values: Mapping[str, float | None],
        *,
        version: int | None = None,
        event_time: datetime | None = None,
    ) -> None:
        """Store the features of one stay key."""
        self._rows[(hotel_id, room_type, stay_date)] = FeatureRead(dict(values), version, event_time)

    def read(self, hotel_id: str, room_type: str, stay_date: date) -> FeatureRead:
        """Features of one stay key (an empty read when unknown)."""
        return self._rows.get((hotel_id, room_type, stay_date), EMPTY_READ)

    def read_many(self, keys: Sequence[tuple[str, str, date]]) -> list[FeatureRead]:
        """Features of many stay keys, in order."""
        return [self._rows.get(key, EMPTY_READ) for key in keys]
