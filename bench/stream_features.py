"""The online features of ``events.catalog``, kept in-process from a simulated event stream (no Kafka, no Flink).

A :class:`StreamFeatures` is fed every record a :class:`~market.Simulation`
yields (``add``) and answers the scorer's feature reads (``read``), so an in-process
replay prices with the same scorer, rules and models the service runs. Windows end
at the read time (the request time); sums keep running totals per key, so a read
is a handful of bisections. The columns are those of the Flink job's ``valid`` view
(``pipelines/job_specs.py``): bookings and cancellations count rooms, ``lead_days``
is whole days from a search to the stay date, the competitor figures are the median
and minimum of each competitor's latest rate in the window.

Example:
    >>> from datetime import timedelta
    >>> from market import Market, MarketConfig, Simulation
    >>> market = Market(MarketConfig(hotels=1, horizon_days=20, seed=1))
    >>> feats = StreamFeatures()
    >>> for ev in Simulation(market, duration=timedelta(days=2), rng_seed=1):
    ...     feats.add(ev)
    >>> key = max(feats.keys(), key=lambda k: feats.read(*k).values["views_7d"] or 0)
    >>> row = feats.read(*key).values
    >>> row["views_7d"] >= row["views_24h"] >= row["views_1h"] and 0.0 <= row["occupancy"] <= 1.0
    True
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from datetime import date, datetime

from events.catalog import ALL_FEATURES, SPECS, derive
from events.models import Record
from pricing.feature_source import FeatureRead

Key = tuple[str, str, date]
_SUM_COLUMNS = ("is_search", "is_view", "n_booked", "n_cancelled")


class _Series:
    """Event times and running totals of one column of one key."""

    __slots__ = ("sq", "total", "ts")

    def __init__(self) -> None:
        self.ts: list[float] = []
        self.total: list[float] = [0.0]
        self.sq: list[float] = [0.0]

    def add(self, ts: float, value: float) -> None:
        self.ts.append(ts)
        self.total.append(self.total[-1] + value)
        self.sq.append(self.sq[-1] + value * value)

    def window(self, lo: float, hi: float) -> tuple[int, float, float]:
        """(count, sum, sum of squares) of the values with ``lo < ts <= hi``."""
        i, j = bisect.bisect_right(self.ts, lo), bisect.bisect_right(self.ts, hi)
        return j - i, self.total[j] - self.total[i], self.sq[j] - self.sq[i]


class StreamFeatures:
    """Per stay key and per hotel, the columns the feature views aggregate; ``read`` gives ``ALL_FEATURES``."""

    def __init__(self) -> None:
        self._cols: dict[Key, dict[str, _Series]] = defaultdict(lambda: defaultdict(_Series))
        self._hotel: dict[str, dict[str, _Series]] = defaultdict(lambda: defaultdict(_Series))
        self._rates: dict[Key, list[tuple[float, str, float]]] = defaultdict(list)
        self._inventory: dict[Key, tuple[float, float]] = {}
        self._last: dict[Key, datetime] = {}

    def keys(self) -> Iterable[Key]:
        return self._cols.keys()

    def add(self, event: Record) -> None:
        kind = getattr(event, "event_type", "")
        key: Key = (event.hotel_id, event.room_type, event.stay_date)  # type: ignore[attr-defined]
        ts = event.event_time.timestamp()
        cols, hotel = self._cols[key], self._hotel[key[0]]
        self._last[key] = event.event_time
        if kind == "search":
            cols["is_search"].add(ts, 1.0)
            hotel["is_search"].add(ts, 1.0)
            cols["lead_days"].add(ts, float((key[2] - event.event_time.date()).days))
        elif kind == "view":
            cols["is_view"].add(ts, 1.0)
            hotel["is_view"].add(ts, 1.0)
            cols["price_shown"].add(ts, float(event.price_shown))  # type: ignore[attr-defined]
        elif kind == "booking":
            rooms = float(event.rooms)  # type: ignore[attr-defined]
            cols["n_booked"].add(ts, rooms)
            hotel["n_booked"].add(ts, rooms)
        elif kind == "cancellation":
            cols["n_cancelled"].add(ts, float(event.rooms))  # type: ignore[attr-defined]
        elif kind == "competitor_rate":
            self._rates[key].append((ts, event.competitor_id, float(event.rate)))  # type: ignore[attr-defined]
        elif kind == "inventory":
            self._inventory[key] = (float(event.rooms_left), float(event.capacity))  # type: ignore[attr-defined]

    def _windowed(self, key: Key, now: float) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        cols = self._cols.get(key, {})
        for spec in (SPECS["stay_1h"], SPECS["stay_24h"], SPECS["stay_7d"], SPECS["stay_14d"]):
            lo = now - (spec.window_ms or 0) / 1000.0
            for feat in spec.features:
                series = cols.get(feat.column)
                n, total, sq = (0, 0.0, 0.0) if series is None else series.window(lo, now)
                if feat.agg == "sum":
                    out[feat.name] = total
                elif feat.agg == "mean":
                    out[feat.name] = total / n if n else None
                elif feat.agg == "std":
                    out[feat.name] = math.sqrt(max(sq / n - (total / n) ** 2, 0.0)) if n else None
                else:
                    out[feat.name] = self._competitors(key, lo, now, feat.agg)
        return out

    def _competitors(self, key: Key, lo: float, hi: float, agg: str) -> float | None:
        latest: dict[str, float] = {}
        for ts, comp, rate in self._rates.get(key, ()):
            if lo < ts <= hi:
                latest[comp] = rate
        if not latest:
            return None
        return float(statistics.median(latest.values()) if agg == "comp_median" else min(latest.values()))

    def read(self, hotel_id: str, room_type: str, stay_date: date, *, at: datetime | None = None) -> FeatureRead:
        """``ALL_FEATURES`` of one key with windows ending at ``at`` (default: the key's latest event)."""
        key = (hotel_id, room_type, stay_date)
        last = self._last.get(key)
        when = at or last
        if when is None:
            return FeatureRead({}, None, None)
        now = when.timestamp()
        values = self._windowed(key, now)
        left, cap = self._inventory.get(key, (None, None))
        values.update(rooms_left=left, capacity=cap, occupancy=None if not cap else 1.0 - (left or 0.0) / cap)
        hotel = self._hotel.get(hotel_id, {})
        for name, col in (("hotel_searches_24h", "is_search"), ("hotel_bookings_24h", "n_booked"),
                          ("hotel_views_24h", "is_view")):
            series = hotel.get(col)
            values[name] = 0.0 if series is None else series.window(now - 86_400.0, now)[1]
        derive(values)
        return FeatureRead({name: values.get(name) for name in ALL_FEATURES}, 1, last)


class AtRequestTime:
    """A :class:`~pricing.feature_source.FeatureSource` over :class:`StreamFeatures` with windows at a set time.

    The replay sets ``now`` to each request's time before the scorer reads.
    """

    def __init__(self, features: StreamFeatures) -> None:
        self.features = features
        self.now: datetime | None = None

    def read(self, hotel_id: str, room_type: str, stay_date: date) -> FeatureRead:
        return self.features.read(hotel_id, room_type, stay_date, at=self.now)
