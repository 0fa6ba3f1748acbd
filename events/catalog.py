"""The feature catalogue: names and meaning of every feature on ``features.v1``.

One place for names so that the Flink job, the Feast repo, the models and the
monitors agree. Features are grouped in *views* (:data:`VIEW_SPECS`, declared once); a
windowed view is one tiled Flink SQL aggregation, one Feast feature view and a set of fields
in one Redis hash per entity key.

Window semantics (every windowed view): the value served for a key is the aggregate, *as of the
key's newest event* ``t`` (its feature time), over the key's events whose tile starts at or after
``floor(t, tile) - window``: every event of the last ``window`` plus the head of the oldest tile,
so the span covered is between ``window`` and ``window + tile`` (Chronon's tail rounding). Both
ends are closed. A value whose feature time is older than its view's TTL is served as null.

Example:
    >>> "bookings_24h" in STAY_FEATURES
    True
    >>> view_of("hotel_searches_24h")
    'hotel_stats'
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

STAY_KEYS: tuple[str, ...] = ("hotel_id", "room_type", "stay_date")
HOTEL_KEYS: tuple[str, ...] = ("hotel_id",)

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS

AggKind = Literal["sum", "mean", "std", "comp_median", "comp_min", "latest"]


@dataclass(frozen=True, slots=True)
class Feature:
    """One feature: an aggregation ``agg`` of the ``valid`` column ``column``.

    ``sum``, ``mean`` and ``std`` (population) merge from the tile partials ``sum:<column>``,
    ``n:<column>`` and ``sq:<column>``; ``comp_median`` / ``comp_min`` take the latest rate of each
    competitor in the window, then the median / minimum across competitors; ``latest`` is the value
    of the newest event (a state, not a window).
    """

    name: str
    agg: AggKind
    column: str


@dataclass(frozen=True, slots=True)
class ViewSpec:
    """A feature view: its entity keys, its window and tile (both None for a state view), its features.

    Tile sizes follow Chronon's: 5 min tiles for windows under 12 h, 1 h under 12 days, 1 day beyond.
    """

    name: str
    keys: tuple[str, ...]
    features: tuple[Feature, ...]
    window_ms: int | None = None
    tile_ms: int | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.features)

    @property
    def partials(self) -> tuple[str, ...]:
        """Names of the mergeable partial aggregates a tile of this view holds, in a stable order."""
        out: dict[str, None] = {"n": None}
        for f in self.features:
            if f.agg in ("sum", "mean", "std"):
                out[f"sum:{f.column}"] = None
            if f.agg in ("mean", "std"):
                out[f"n:{f.column}"] = None
            if f.agg == "std":
                out[f"sq:{f.column}"] = None
        return tuple(out)

    @property
    def competitor_rates(self) -> bool:
        return any(f.agg in ("comp_median", "comp_min") for f in self.features)


def tile_for(window_ms: int) -> int:
    """Chronon's tile size for a window.

    Example:
        >>> [tile_for(w) // MINUTE_MS for w in (HOUR_MS, DAY_MS, 14 * DAY_MS)]
        [5, 60, 1440]
    """
    if window_ms < 12 * HOUR_MS:
        return 5 * MINUTE_MS
    return HOUR_MS if window_ms < 12 * DAY_MS else DAY_MS


def _windowed(name: str, keys: tuple[str, ...], window_ms: int, *features: tuple[str, AggKind, str]) -> ViewSpec:
    return ViewSpec(name, keys, tuple(Feature(*f) for f in features), window_ms, tile_for(window_ms))


def _counts(suffix: str, *which: str) -> list[tuple[str, AggKind, str]]:
    columns = {"searches": "is_search", "views": "is_view", "bookings": "n_booked", "cancellations": "n_cancelled"}
    return [(f"{w}_{suffix}", "sum", columns[w]) for w in which]


# The one declaration of the feature views: the feature job's JVM specs (pipelines/job_specs.py: the
# tile operator's tile_spec, the sinks' layouts), the Feast repo and the readers are generated from it.
VIEW_SPECS: tuple[ViewSpec, ...] = (
    _windowed("stay_1h", STAY_KEYS, HOUR_MS, *_counts("1h", "searches", "views", "bookings")),
    _windowed("stay_24h", STAY_KEYS, DAY_MS, *_counts("24h", "searches", "views", "bookings", "cancellations"),
              ("mean_price_shown_24h", "mean", "price_shown"), ("comp_rate_median_24h", "comp_median", "rate"),
              ("comp_rate_min_24h", "comp_min", "rate")),
    _windowed("stay_7d", STAY_KEYS, 7 * DAY_MS, *_counts("7d", "searches", "views", "bookings", "cancellations"),
              ("lead_time_mean_days_7d", "mean", "lead_days"), ("lead_time_std_days_7d", "std", "lead_days")),
    _windowed("stay_14d", STAY_KEYS, 14 * DAY_MS, *_counts("14d", "bookings")),
    ViewSpec("stay_inventory", STAY_KEYS, (Feature("rooms_left", "latest", "rooms_left"),
                                           Feature("capacity", "latest", "capacity"),
                                           Feature("occupancy", "latest", "occupancy"))),
    _windowed("hotel_stats", HOTEL_KEYS, DAY_MS, ("hotel_searches_24h", "sum", "is_search"),
              ("hotel_bookings_24h", "sum", "n_booked"), ("hotel_views_24h", "sum", "is_view")),
)
SPECS: MappingProxyType[str, ViewSpec] = MappingProxyType({v.name: v for v in VIEW_SPECS})
TILED_VIEWS: tuple[str, ...] = tuple(v.name for v in VIEW_SPECS if v.tile_ms is not None)

# view name -> (entity keys, feature names), for the readers that only need names.
VIEWS: MappingProxyType[str, tuple[tuple[str, ...], tuple[str, ...]]] = MappingProxyType(
    {v.name: (v.keys, v.names) for v in VIEW_SPECS}
)

# Ratios of stored aggregates, computed on read ("bookings in the 7 days before the last 7"
# comes from the 14-day and 7-day views).
DERIVED_FEATURES: tuple[str, ...] = ("bookings_prev_7d", "booking_pace_7d", "look_to_book_7d")

STORED_STAY_FEATURES: tuple[str, ...] = tuple(
    name for keys, names in VIEWS.values() if keys == STAY_KEYS for name in names
)
STAY_FEATURES: tuple[str, ...] = STORED_STAY_FEATURES + DERIVED_FEATURES
HOTEL_FEATURES: tuple[str, ...] = VIEWS["hotel_stats"][1]
ALL_FEATURES: tuple[str, ...] = STAY_FEATURES + HOTEL_FEATURES


def derive(values: dict[str, float | None]) -> dict[str, float | None]:
    """Add the derived ratios to a feature mapping (in place, and returned).

    Example:
        >>> derive({"bookings_7d": 6.0, "bookings_14d": 9.0, "views_7d": 30.0})["booking_pace_7d"]
        2.0
    """
    b7, b14, v7 = values.get("bookings_7d"), values.get("bookings_14d"), values.get("views_7d")
    prev = None if b7 is None or b14 is None else max(b14 - b7, 0.0)
    values["bookings_prev_7d"] = prev
    values["booking_pace_7d"] = None if prev is None or b7 is None else b7 / max(prev, 1.0)
    values["look_to_book_7d"] = None if v7 is None or b7 is None else v7 / max(b7, 1.0)
    return values

# Request-side inputs that every model sees next to the stored features.
REQUEST_FEATURES: tuple[str, ...] = ("price", "lead_time_days", "nights", "stay_dow", "channel_code")


def view_of(feature: str) -> str:
    """Name of the view that holds ``feature``.

    Raises:
        KeyError: if no view holds it.
    """
    for view, (_, names) in VIEWS.items():
        if feature in names:
            return view
    if feature in DERIVED_FEATURES:
        return "derived"
    msg = f"feature {feature!r} is in no view; known: {sorted(ALL_FEATURES)}"
    raise KeyError(msg)
