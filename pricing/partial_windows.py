"""A new hotel's window counts read as if its windows were full (:class:`PartialWindows`).

Split from :mod:`pricing.cold_start`, which re-exports it: stage two prices a hotel whose history is
shorter than a window with models trained on hotels whose windows are full.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from typing import Literal

from events.catalog import DERIVED_FEATURES, derive
from pricing.feature_source import FeatureRead, FeatureSource

WINDOW_DAYS: dict[str, float] = {"_1h": 1.0 / 24.0, "_24h": 1.0, "_7d": 7.0, "_14d": 14.0}
"""Length of each window suffix, in days."""
SCALED_COUNTS = frozenset({
    "searches_1h", "views_1h", "bookings_1h", "searches_24h", "views_24h", "bookings_24h", "cancellations_24h",
    "searches_7d", "views_7d", "bookings_7d", "cancellations_7d", "bookings_14d",
    "hotel_searches_24h", "hotel_bookings_24h", "hotel_views_24h",
})
"""Window counts that :class:`PartialWindows` scales to their window's length (ratios and levels are left)."""
UNKNOWN_BEFORE_14D = frozenset({"bookings_prev_7d", "booking_pace_7d"})
"""The week before last, and the pace against it: not seen until 14 days of history. ``PartialWindows``
estimates them from the scaled counts (``prior_week="estimated"``: the days seen at their own rate, so a
pace of 1 before day 7) or reads them as missing (``"missing"``, before run 7: the pooled models never saw
a missing pace, and priced a new hotel 8-9% under its full-history price up to day 14, docs/cold-start.md)."""
PriorWeek = Literal["estimated", "missing"]
MIN_SCALE_DAYS = 1.0 / 24.0
"""Default history below which ``PartialWindows`` scales as if this much were seen (``min_days``): an hour."""


class PartialWindows:
    """A feature source that reads a new hotel's window counts as if its window were full.

    A hotel that joined 2 days ago has 2 days of searches in its ``searches_7d``: to a
    model trained on mature hotels, whose windows are full, it looks like a hotel with
    2/7 of the demand, and the bid price forecasts that few shoppers. While a hotel's
    history (``first_seen(hotel)`` to ``clock()``) is shorter than a window, its counts
    are divided by the share of the window it covers, and the derived ratios (the week
    before last, the pace against it, look-to-book) are computed again from the scaled
    counts (``prior_week``, :data:`UNKNOWN_BEFORE_14D`). Hotels with no ``first_seen``
    (mature ones) are read as they are.

    Example:
        >>> from datetime import UTC, date, datetime, timedelta
        >>> from pricing.feature_source import MemoryFeatureSource
        >>> src = MemoryFeatureSource()
        >>> src.put("h-new", "std", date(2026, 5, 20), {"views_7d": 10.0, "bookings_7d": 2.0, "bookings_14d": 2.0,
        ...                                             "bookings_prev_7d": 0.0, "booking_pace_7d": 2.0})
        >>> t0 = datetime(2026, 5, 1, tzinfo=UTC)
        >>> read = PartialWindows(src, first_seen={"h-new": t0}.get, clock=lambda: t0 + timedelta(days=2))
        >>> dict(read.read("h-new", "std", date(2026, 5, 20)).values)
        {'views_7d': 35.0, 'bookings_7d': 7.0, 'bookings_14d': 14.0, 'bookings_prev_7d': 7.0, 'booking_pace_7d': 1.0}
    """

    def __init__(self, source: FeatureSource, *, first_seen: Callable[[str], datetime | None],
                 clock: Callable[[], datetime | None], prior_week: PriorWeek = "estimated",
                 min_days: float = MIN_SCALE_DAYS) -> None:
        self.source, self.first_seen, self.clock, self.prior_week = source, first_seen, clock, prior_week
        self.min_days = min_days

    def read(self, hotel_id: str, room_type: str, stay_date: date) -> FeatureRead:
        read = self.source.read(hotel_id, room_type, stay_date)
        seen, now = self.first_seen(hotel_id), self.clock()
        if seen is None or now is None:
            return read
        days = max((now - seen).total_seconds() / 86_400.0, self.min_days)
        if days >= 14.0:
            return read
        values = {k: _scaled(k, v, days) for k, v in read.values.items()}
        if self.prior_week == "missing":
            return read._replace(values={k: None if k in UNKNOWN_BEFORE_14D else v for k, v in values.items()})
        derived = derive(dict(values))  # None where its inputs are not in the read: the week before last unknown
        return read._replace(values={k: _estimated(k, v, derived.get(k)) for k, v in values.items()})


def _estimated(name: str, value: float | None, derived: float | None) -> float | None:
    if name not in DERIVED_FEATURES:
        return value
    if derived is None:
        return None if name in UNKNOWN_BEFORE_14D else value
    return derived


def _scaled(name: str, value: float | None, days: float) -> float | None:
    if value is None or name not in SCALED_COUNTS:
        return value
    window = next(w for suffix, w in WINDOW_DAYS.items() if name.endswith(suffix))
    return value * window / days if days < window else value


