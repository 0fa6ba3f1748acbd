"""The online features of ``events.catalog``, kept in-process from a simulated event stream (no Kafka, no Flink).

A :class:`StreamFeatures` is fed every record a :class:`~market.Simulation`
yields (``add``) and answers the scorer's feature reads (``read``), so an in-process
replay prices with the same scorer, rules and models the service runs, on the values
the deployed job would serve at that moment:

* a windowed view's value is the job's, as of the key's newest event ``t`` at or before the
  read: the events whose tile starts at or after ``floor(t, tile) - window`` (the catalogue's
  semantics, the tiles and windows of :data:`events.catalog.VIEW_SPECS`), null once ``t`` is
  older than the view's TTL (:data:`features.config.DEFAULT_TTLS`), as the online store serves it;
* the columns are the job's (:func:`features.replay.record_row`: rooms for bookings and
  cancellations, whole days from a search to the stay date's midnight, prices the contract flags
  as outliers left out); inventory is the newest inventory event at or before the read.

``tests/unit/test_stream_features.py`` holds every read equal to the offline history's computation
(:func:`features.replay.features_at`), which the integration tests hold equal to the job's values.
Sums keep running totals per key, so a read is a handful of bisections.

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

from events.catalog import ALL_FEATURES, SPECS, ViewSpec, derive
from events.models import Record
from features.config import DEFAULT_TTLS
from features.replay import record_row
from pricing.feature_source import FeatureRead

Key = tuple[str, str, date]
_STAY_VIEWS = ("stay_1h", "stay_24h", "stay_7d", "stay_14d")
_TILE_INPUTS = {"price_shown": "tile_price_shown", "rate": "tile_rate"}


class _Series:
    """Event times (ms) and running totals of one column of one key (events arrive in time order)."""

    __slots__ = ("n", "sq", "total", "ts")

    def __init__(self) -> None:
        self.ts: list[int] = []
        self.total: list[float] = [0.0]
        self.sq: list[float] = [0.0]
        self.n: list[int] = [0]

    def add(self, ts: int, value: float | None) -> None:
        self.ts.append(ts)
        x = 0.0 if value is None else value
        self.total.append(self.total[-1] + x)
        self.sq.append(self.sq[-1] + x * x)
        self.n.append(self.n[-1] + (value is not None))

    def window(self, lo: int, hi: int) -> tuple[int, float, float]:
        """(values, sum, sum of squares) of the events with ``lo <= ts <= hi``."""
        i, j = bisect.bisect_left(self.ts, lo), bisect.bisect_right(self.ts, hi)
        return self.n[j] - self.n[i], self.total[j] - self.total[i], self.sq[j] - self.sq[i]


def _floor(view: ViewSpec, anchor: int) -> int:
    tile, window = view.tile_ms or 0, view.window_ms or 0
    return anchor - anchor % tile - window


def _fresh(view: str, anchor: int, now: int) -> bool:
    return now - anchor <= DEFAULT_TTLS[view].total_seconds() * 1000


class StreamFeatures:
    """Per stay key and per hotel, the job's columns; ``read`` gives ``ALL_FEATURES`` as the job serves them."""

    def __init__(self) -> None:
        self._cols: dict[Key, dict[str, _Series]] = defaultdict(lambda: defaultdict(_Series))
        self._hotel: dict[str, dict[str, _Series]] = defaultdict(lambda: defaultdict(_Series))
        self._times: dict[Key, list[int]] = defaultdict(list)
        self._hotel_times: dict[str, list[int]] = defaultdict(list)
        self._rates: dict[Key, list[tuple[int, str, float]]] = defaultdict(list)
        self._inventory: dict[Key, list[tuple[int, float, float]]] = defaultdict(list)
        self._last: dict[Key, datetime] = {}

    def keys(self) -> Iterable[Key]:
        return self._cols.keys()

    def add(self, event: Record) -> None:
        if not hasattr(event, "stay_date"):
            return
        row = record_row(event)
        key: Key = (event.hotel_id, event.room_type, event.stay_date)  # type: ignore[attr-defined]
        ts = int(row["event_time"])
        self._last[key] = event.event_time
        self._times[key].append(ts)
        self._hotel_times[key[0]].append(ts)
        cols, hotel = self._cols[key], self._hotel[key[0]]
        for name in ("is_search", "is_view", "n_booked", "n_cancelled", "lead_days", "tile_price_shown"):
            cols[name].add(ts, row[name])
        for name in ("is_search", "is_view", "n_booked"):
            hotel[name].add(ts, row[name])
        if row["event_type"] == "competitor_rate" and row["tile_rate"] is not None:
            self._rates[key].append((ts, str(row["competitor_id"]), float(row["tile_rate"])))
        elif row["event_type"] == "inventory":
            self._inventory[key].append((ts, float(row["rooms_left"]), float(row["capacity"])))

    def _windowed(self, key: Key, anchor: int, now: int) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        cols = self._cols.get(key, {})
        for name in _STAY_VIEWS:
            view, fresh = SPECS[name], _fresh(name, anchor, now)
            lo = _floor(view, anchor)
            for feat in view.features:
                series = cols.get(_TILE_INPUTS.get(feat.column, feat.column))
                n, total, sq = (0, 0.0, 0.0) if series is None else series.window(lo, anchor)
                if not fresh:
                    out[feat.name] = None
                elif feat.agg == "sum":
                    out[feat.name] = total
                elif feat.agg == "mean":
                    out[feat.name] = total / n if n else None
                elif feat.agg == "std":
                    out[feat.name] = math.sqrt(max(sq / n - (total / n) ** 2, 0.0)) if n else None
                else:
                    out[feat.name] = self._competitors(key, lo, anchor, feat.agg)
        return out

    def _competitors(self, key: Key, lo: int, hi: int, agg: str) -> float | None:
        latest: dict[str, float] = {}
        for ts, comp, rate in self._rates.get(key, ()):
            if lo <= ts <= hi:
                latest[comp] = rate
        if not latest:
            return None
        return float(statistics.median(latest.values()) if agg == "comp_median" else min(latest.values()))

    def _inventory_at(self, key: Key, now: int) -> dict[str, float | None]:
        held = self._inventory.get(key, [])
        i = bisect.bisect_right(held, (now, math.inf, math.inf)) - 1
        if i < 0 or not _fresh("stay_inventory", held[i][0], now):
            return {"rooms_left": None, "capacity": None, "occupancy": None}
        _, left, cap = held[i]
        return {"rooms_left": left, "capacity": cap, "occupancy": 1.0 - left / cap}

    def _hotel_at(self, hotel_id: str, now: int) -> dict[str, float | None]:
        times = self._hotel_times.get(hotel_id, [])
        i = bisect.bisect_right(times, now) - 1
        names = (("hotel_searches_24h", "is_search"), ("hotel_bookings_24h", "n_booked"),
                 ("hotel_views_24h", "is_view"))
        if i < 0 or not _fresh("hotel_stats", times[i], now):
            return {name: None for name, _ in names}
        anchor, series = times[i], self._hotel[hotel_id]
        lo = _floor(SPECS["hotel_stats"], anchor)
        return {name: series[col].window(lo, anchor)[1] if col in series else 0.0 for name, col in names}

    def read(self, hotel_id: str, room_type: str, stay_date: date, *, at: datetime | None = None) -> FeatureRead:
        """``ALL_FEATURES`` of one key as served at ``at`` (default: the key's latest event)."""
        key = (hotel_id, room_type, stay_date)
        last = self._last.get(key)
        when = at or last
        if when is None:
            return FeatureRead({}, None, None)
        now = round(when.timestamp() * 1000)
        times = self._times.get(key, [])
        i = bisect.bisect_right(times, now) - 1
        values: dict[str, float | None] = dict.fromkeys(ALL_FEATURES)
        if i >= 0:
            values.update(self._windowed(key, times[i], now))
        values.update(self._inventory_at(key, now))
        values.update(self._hotel_at(hotel_id, now))
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
