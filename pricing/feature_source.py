"""The scorer's view of the online feature store: the :class:`FeatureSource` protocol.

Production reads Redis through Feast (the lead's adapter); :class:`MemoryFeatureSource`
is a real, dict-backed implementation for simulations, backtests, benchmarks and tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from typing import NamedTuple, Protocol, runtime_checkable

from events.models import PricingRequest
from pricing.degraded import FEATURE_SOURCE_ERROR, FEATURE_STORE_UNAVAILABLE, Degradation
from pricing.errors import FeatureStoreUnavailable

Observe = Callable[[float], None]
"""Receives the wall time of a read, in seconds (a Prometheus histogram's ``observe``)."""


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


def _ignore(seconds: float) -> None:
    del seconds


def safe_read(
    source: FeatureSource, request: PricingRequest, *, observe: Observe = _ignore
) -> tuple[FeatureRead, Degradation | None]:
    """Read one request's features; a failing source yields an empty read and the :class:`Degradation`.

    Example:
        >>> from datetime import timezone
        >>> req = PricingRequest(hotel_id="h1", room_type="std", stay_date=date(2026, 1, 2),
        ...                      event_time=datetime(2026, 1, 1, tzinfo=timezone.utc))
        >>> safe_read(MemoryFeatureSource(), req)
        (FeatureRead(values={}, version=None, event_time=None), None)
    """
    started = time.perf_counter()
    try:
        read = source.read(request.hotel_id, request.room_type, request.stay_date)
    except FeatureStoreUnavailable as exc:
        return EMPTY_READ, Degradation.from_exception(FEATURE_STORE_UNAVAILABLE, exc)
    except Exception as exc:  # noqa: BLE001 - a source adapter may fail any way; the scorer must still answer
        return EMPTY_READ, Degradation.from_exception(FEATURE_SOURCE_ERROR, exc)
    finally:
        observe(time.perf_counter() - started)
    return read, None


def safe_read_many(
    source: FeatureSource, requests: Sequence[PricingRequest], *, observe: Observe = _ignore
) -> list[tuple[FeatureRead, Degradation | None]]:
    """Batch read through ``source.read_many`` when it has one (else key by key); failures as in :func:`safe_read`.

    A failing batch read degrades the whole batch: when the store is down, retrying key by
    key would only multiply the timeouts.
    """
    many = getattr(source, "read_many", None)
    if many is None:
        return [safe_read(source, request, observe=observe) for request in requests]
    started = time.perf_counter()
    try:
        reads = list(many([(r.hotel_id, r.room_type, r.stay_date) for r in requests]))
    except FeatureStoreUnavailable as exc:
        return [(EMPTY_READ, Degradation.from_exception(FEATURE_STORE_UNAVAILABLE, exc))] * len(requests)
    except Exception as exc:  # noqa: BLE001 - same as safe_read
        return [(EMPTY_READ, Degradation.from_exception(FEATURE_SOURCE_ERROR, exc))] * len(requests)
    finally:
        observe(time.perf_counter() - started)
    if len(reads) != len(requests):
        problem = Degradation(FEATURE_SOURCE_ERROR, f"read_many returned {len(reads)} rows for {len(requests)} keys")
        return [(EMPTY_READ, problem)] * len(requests)
    return [(read, None) for read in reads]
