"""Feature coverage: how often each feature is null or stale, per hotel, over a sliding window.

Memory is bounded: each hotel keeps at most ``n_buckets`` time buckets, each a
pair of per-feature counters (nulls, stale values) plus an event count. Old
buckets fall out as time moves on, so the report always covers the last
``window`` of traffic, at the resolution of one bucket.

A value is *null* when it is ``None``, NaN or missing from the mapping. A
non-null value is *stale* when the read's ``feature_time`` is older than
``staleness`` at ``now`` (or unknown: ``feature_time=None``).

Example:
    >>> from datetime import UTC, datetime, timedelta
    >>> mon = CoverageMonitor(timedelta(hours=1), timedelta(minutes=10), features=("a", "b"))
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> mon.update("h1", {"a": 1.0, "b": None}, feature_time=t, now=t)
    >>> mon.update("h1", {"a": 2.0, "b": 3.0}, feature_time=t - timedelta(hours=2), now=t)
    >>> rep = mon.report()
    >>> rep.share("h1", "b"), rep.null_share_of("h1", "b"), rep.by_feature()["a"]
    (1.0, 0.5, 0.5)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import cast

import numpy as np
import pandas as pd

from events.catalog import ALL_FEATURES
from feedback.monitors.errors import MonitorInputError

DEFAULT_BUCKETS = 12
"""Buckets per window: 12 gives a report that lags the true window by at most 1/12 of it."""


class _Bucket:
    # Stale counts are derived: stale[f] = stale_events - stale_nulls[f]; so an
    # update only walks the (few) null features, not all of them twice.
    __slots__ = ("n", "nulls", "stale_events", "stale_nulls")

    def __init__(self, n_features: int) -> None:
        self.n = 0
        self.stale_events = 0
        self.nulls = [0] * n_features
        self.stale_nulls = [0] * n_features

    def stale(self) -> list[int]:
        return [self.stale_events - k for k in self.stale_nulls]


@dataclass(frozen=True)
class CoverageReport:
    """Null and stale shares per hotel and feature over the window.

    Attributes:
        window_end: the latest ``now`` seen by the monitor.
        features: column order of the share matrices.
        hotels: row order of the share matrices (sorted).
        counts: events per hotel in the window, shape ``(hotels,)``.
        null_share: share of null values, shape ``(hotels, features)``.
        stale_share: share of non-null but stale values, same shape.
    """

    window_end: datetime | None
    features: tuple[str, ...]
    hotels: tuple[str, ...]
    counts: np.ndarray
    null_share: np.ndarray
    stale_share: np.ndarray

    @property
    def missing_share(self) -> np.ndarray:
        """Share of values that are null or stale (the usable-value gap), ``(hotels, features)``."""
        return self.null_share + self.stale_share

    def _index(self, hotel_id: str, feature: str) -> tuple[int, int]:
        if hotel_id not in self.hotels:
            raise MonitorInputError(
                field="hotel_id",
                value=hotel_id,
                expected=f"one of the {len(self.hotels)} hotels in the window",
            )
        if feature not in self.features:
            raise MonitorInputError(field="feature", value=feature, expected="a monitored feature")
        return self.hotels.index(hotel_id), self.features.index(feature)

    def share(self, hotel_id: str, feature: str) -> float:
        """Null-or-stale share of one feature for one hotel."""
        i, j = self._index(hotel_id, feature)
        return float(self.missing_share[i, j])

    def null_share_of(self, hotel_id: str, feature: str) -> float:
        """Null share of one feature for one hotel."""
        i, j = self._index(hotel_id, feature)
        return float(self.null_share[i, j])

    def by_feature(self) -> dict[str, float]:
        """Null-or-stale share per feature, pooled over hotels (weighted by traffic)."""
        total = self.counts.sum()
        if total == 0:
            return {name: 0.0 for name in self.features}
        pooled = (self.missing_share * self.counts[:, None]).sum(axis=0) / total
        return {name: float(v) for name, v in zip(self.features, pooled, strict=True)}

    def worst_hotel(self) -> dict[str, float]:
        """Highest null-or-stale share across hotels, per feature (0.0 when no traffic)."""
        if not self.hotels:
            return {name: 0.0 for name in self.features}
        worst = self.missing_share.max(axis=0)
        return {name: float(v) for name, v in zip(self.features, worst, strict=True)}

    def to_frame(self) -> pd.DataFrame:
        """Long table: ``hotel_id, feature, n, null_share, stale_share, missing_share``."""
        h, f = len(self.hotels), len(self.features)
        return pd.DataFrame(
            {
                "hotel_id": np.repeat(np.asarray(self.hotels, dtype=object), f),
                "feature": np.tile(np.asarray(self.features, dtype=object), h),
                "n": np.repeat(self.counts, f),
                "null_share": self.null_share.ravel(),
                "stale_share": self.stale_share.ravel(),
                "missing_share": self.missing_share.ravel(),
            }
        )


class CoverageMonitor:
    """Sliding-window null/stale counters per hotel and feature.

    Args:
        window: length of the sliding window.
        staleness: a value read with ``now - feature_time`` above this is stale.
        features: monitored feature names (default: the whole catalogue).
        n_buckets: time buckets per window (memory per hotel is ``n_buckets × 2 × features``).
    """

    def __init__(
        self,
        window: timedelta,
        staleness: timedelta,
        *,
        features: Sequence[str] = ALL_FEATURES,
        n_buckets: int = DEFAULT_BUCKETS,
    ) -> None:
        if window <= timedelta(0):
            raise MonitorInputError(field="window", value=window, expected="a positive timedelta")
        if staleness <= timedelta(0):
            raise MonitorInputError(field="staleness", value=staleness, expected="a positive timedelta")
        if n_buckets < 1:
            raise MonitorInputError(field="n_buckets", value=n_buckets, expected="an int >= 1")
        if not features:
            raise MonitorInputError(field="features", value=features, expected="at least one feature name")
        self._window = window
        self._staleness_s = staleness.total_seconds()
        self._features = tuple(features)
        self._n_buckets = n_buckets
        self._bucket_s = window.total_seconds() / n_buckets
        self._hotels: dict[str, dict[int, _Bucket]] = {}
        self._latest: datetime | None = None

    @property
    def features(self) -> tuple[str, ...]:
        """Monitored feature names, in report column order."""
        return self._features

    @property
    def n_hotels(self) -> int:
        """Hotels currently holding at least one bucket."""
        return len(self._hotels)

    def update(
        self,
        hotel_id: str,
        features: Mapping[str, float | None],
        *,
        feature_time: datetime | None,
        now: datetime,
    ) -> None:
        """Count one feature read.

        Args:
            hotel_id: the hotel the read was for.
            features: feature values (missing keys count as null).
            feature_time: event time of the read (``None``: unknown, so non-null values count as stale).
            now: the time of the read, timezone-aware.
        """
        if now.tzinfo is None:
            raise MonitorInputError(field="now", value=now, expected="a timezone-aware datetime")
        now_s = now.timestamp()
        key = math.floor(now_s / self._bucket_s)
        if self._latest is None or now > self._latest:
            self._latest = now
        buckets = self._hotels.setdefault(hotel_id, {})
        bucket = buckets.get(key)
        if bucket is None:
            bucket = buckets[key] = _Bucket(len(self._features))
            self._evict(buckets, key)
        stale = feature_time is None or now_s - feature_time.timestamp() > self._staleness_s
        bucket.n += 1
        values = tuple(map(features.get, self._features))
        if None not in values and not math.isnan(sum(cast("tuple[float, ...]", values))):
            null_idx: list[int] = []  # fast path: no null, no NaN (a NaN makes the sum NaN)
        else:  # NaN != NaN, so ``v != v`` flags NaN without a call to math.isnan
            null_idx = [i for i, v in enumerate(values) if v is None or v != v]
        nulls = bucket.nulls
        for i in null_idx:
            nulls[i] += 1
        if stale:
            bucket.stale_events += 1
            stale_nulls = bucket.stale_nulls
            for i in null_idx:
                stale_nulls[i] += 1

    def _evict(self, buckets: dict[int, _Bucket], newest: int) -> None:
        oldest_kept = newest - self._n_buckets + 1
        for key in [k for k in buckets if k < oldest_kept]:
            del buckets[key]

    def report(self, *, now: datetime | None = None) -> CoverageReport:
        """Shares over the window ending at ``now`` (default: the latest update time).

        Buckets older than the window of the latest update are freed; a ``now``
        earlier than that only narrows what is counted, it never drops data.
        """
        if self._latest is not None:
            latest_key = math.floor(self._latest.timestamp() / self._bucket_s)
            for hotel in list(self._hotels):
                self._evict(self._hotels[hotel], latest_key)
                if not self._hotels[hotel]:
                    del self._hotels[hotel]
        end = now or self._latest
        newest = math.floor(end.timestamp() / self._bucket_s) if end is not None else 0
        oldest = newest - self._n_buckets + 1
        hotels = tuple(sorted(self._hotels))
        f = len(self._features)
        counts = np.zeros(len(hotels), dtype=np.int64)
        nulls = np.zeros((len(hotels), f), dtype=np.float64)
        stale = np.zeros((len(hotels), f), dtype=np.float64)
        for i, hotel in enumerate(hotels):
            for key, bucket in self._hotels[hotel].items():
                if oldest <= key <= newest:
                    counts[i] += bucket.n
                    nulls[i] += bucket.nulls
                    stale[i] += bucket.stale()
        keep = counts > 0
        denom = np.maximum(counts[keep], 1)[:, None]
        return CoverageReport(
            window_end=end.astimezone(UTC) if end is not None else None,
            features=self._features,
            hotels=tuple(h for h, k in zip(hotels, keep, strict=True) if k),
            counts=counts[keep],
            null_share=nulls[keep] / denom,
            stale_share=stale[keep] / denom,
        )
