"""Where the deployed service keeps each hotel's cold-start history: its first request and its label counts.

:class:`RedisHistoryStore` (one hash per hotel, shared by every replica and kept across restarts) in the
service, :class:`MemoryHistoryStore` in tests and in-process simulations; both are a :class:`HistoryStore`,
which :class:`~delivery.cold_start.StagedScorer` reads to find a hotel's stage.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Protocol

MATURE = "mature"
"""The first sight recorded for a hotel that traded before the service first priced it."""


class HistoryStore(Protocol):
    """Where the service keeps each hotel's first request and its label counts."""

    def first_seen(self, hotel_id: str, at: datetime, *, mature: Callable[[], bool]) -> datetime | None:
        """The recorded first sight (``None``: mature); with none yet, record ``at``, or mature if ``mature()``."""
        ...

    def counts(self, hotel_id: str) -> tuple[int, int]:
        """``(labels, bookings)`` of the hotel so far."""
        ...

    def add_labels(self, hotel_id: str, *, labels: int, bookings: int) -> tuple[int, int]:
        """Add to the hotel's counts; the new ``(labels, bookings)``."""
        ...

    def set_joined(self, counts: Mapping[str, tuple[int, int]]) -> None:
        """Set the label service's own ``(labels, bookings)`` of each hotel (totals, added to the manual ones)."""
        ...

    def recorded(self, hotel_id: str) -> str | None:
        """The recorded first sight as stored (ISO-8601 or ``mature``), ``None`` if never priced."""
        ...


class MemoryHistoryStore:
    """A dict-backed :class:`HistoryStore` (tests, in-process simulations)."""

    def __init__(self) -> None:
        self._seen: dict[str, datetime | None] = {}
        self._counts: dict[str, tuple[int, int]] = {}
        self._joined: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()

    def first_seen(self, hotel_id: str, at: datetime, *, mature: Callable[[], bool]) -> datetime | None:
        with self._lock:
            if hotel_id not in self._seen:
                self._seen[hotel_id] = None if mature() else at
            return self._seen[hotel_id]

    def counts(self, hotel_id: str) -> tuple[int, int]:
        added, joined = self._counts.get(hotel_id, (0, 0)), self._joined.get(hotel_id, (0, 0))
        return added[0] + joined[0], added[1] + joined[1]

    def add_labels(self, hotel_id: str, *, labels: int, bookings: int) -> tuple[int, int]:
        with self._lock:
            old = self._counts.get(hotel_id, (0, 0))
            self._counts[hotel_id] = (old[0] + labels, old[1] + bookings)
        return self.counts(hotel_id)

    def set_joined(self, counts: Mapping[str, tuple[int, int]]) -> None:
        with self._lock:
            self._joined.update(counts)

    def recorded(self, hotel_id: str) -> str | None:
        if hotel_id not in self._seen:
            return None
        seen = self._seen[hotel_id]
        return MATURE if seen is None else seen.isoformat()


class RedisHashes(Protocol):
    """The Redis commands :class:`RedisHistoryStore` uses (a ``redis.Redis`` or ``RedisCluster``)."""

    def hsetnx(self, name: str, key: str, value: str) -> object: ...
    def hget(self, name: str, key: str) -> object: ...
    def hmget(self, name: str, keys: list[str]) -> object: ...
    def hincrby(self, name: str, key: str, amount: int) -> object: ...
    def hset(self, name: str, *, mapping: Mapping[str | bytes, bytes | float | int | str]) -> object: ...


class RedisHistoryStore:
    """A :class:`HistoryStore` in one Redis hash per hotel, ``<prefix>{<hotel>}`` (one slot in a cluster).

    Fields: ``first_seen`` (ISO-8601, or ``mature``); ``labels``, ``bookings`` (added by hand,
    ``pricestream cold-start labels``); ``joined_labels``, ``joined_bookings`` (the label service's
    totals, set, not added: a replayed batch rewrites the same totals). The first sight is written
    with ``HSETNX``: replicas racing on a new hotel's first requests agree on one time. ``prefix``
    carries the Feast project (:func:`history_prefix`): two projects on one Redis never share a hotel.
    """

    def __init__(self, client: RedisHashes, *, prefix: str = "pricestream:cold_start:pricestream:") -> None:
        self.client, self.prefix = client, prefix

    def _key(self, hotel_id: str) -> str:
        return f"{self.prefix}{{{hotel_id}}}"

    def first_seen(self, hotel_id: str, at: datetime, *, mature: Callable[[], bool]) -> datetime | None:
        key = self._key(hotel_id)
        raw = self.client.hget(key, "first_seen")
        if raw is None:
            self.client.hsetnx(key, "first_seen", MATURE if mature() else at.isoformat())
            raw = self.client.hget(key, "first_seen")
        return _parse_seen(raw)

    def recorded(self, hotel_id: str) -> str | None:
        """The recorded first sight as stored (ISO-8601 or ``mature``), ``None`` if never priced."""
        raw = self.client.hget(self._key(hotel_id), "first_seen")
        return None if raw is None else (raw.decode() if isinstance(raw, bytes) else str(raw))

    def counts(self, hotel_id: str) -> tuple[int, int]:
        raw = self.client.hmget(self._key(hotel_id), ["labels", "bookings", "joined_labels", "joined_bookings"])
        labels, bookings, joined_labels, joined_bookings = (_count(v) for v in _values(raw, 4))
        return labels + joined_labels, bookings + joined_bookings

    def add_labels(self, hotel_id: str, *, labels: int, bookings: int) -> tuple[int, int]:
        key = self._key(hotel_id)
        self.client.hincrby(key, "labels", labels)
        self.client.hincrby(key, "bookings", bookings)
        return self.counts(hotel_id)

    def set_joined(self, counts: Mapping[str, tuple[int, int]]) -> None:
        for hotel_id, (labels, bookings) in counts.items():
            self.client.hset(self._key(hotel_id), mapping={"joined_labels": str(labels),
                                                           "joined_bookings": str(bookings)})


def _values(raw: object, n: int) -> list[object]:
    """The reply of an ``HMGET`` of ``n`` fields (a list), else a clear error."""
    if not isinstance(raw, list) or len(raw) != n:
        msg = f"HMGET reply: got {raw!r}, expected a list of {n} values"
        raise TypeError(msg)
    return raw


def _count(value: object) -> int:
    """A counter field of a history hash: missing is 0."""
    return int(value) if isinstance(value, bytes | str | int) and value not in (b"", "") else 0


def history_prefix(project: str) -> str:
    """Key prefix of the cold-start history of Feast project ``project`` (one namespace per deployment).

    Example:
        >>> history_prefix("pricestream")
        'pricestream:cold_start:pricestream:'
    """
    return f"pricestream:cold_start:{project}:"


def _parse_seen(raw: object) -> datetime | None:
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    return None if text == MATURE else datetime.fromisoformat(text)
