"""The feature catalogue: names and meaning of every feature on ``features.v1``.

One place for names so that the Flink job, the Feast repo, the models and the
monitors agree. Features are grouped in *views*; each view is one Flink SQL
aggregation, one Feast feature view and one Redis hash per entity key.

Example:
    >>> "bookings_24h" in STAY_FEATURES
    True
    >>> view_of("hotel_searches_24h")
    'hotel_stats'
"""

from __future__ import annotations

from types import MappingProxyType

STAY_KEYS: tuple[str, ...] = ("hotel_id", "room_type", "stay_date")
HOTEL_KEYS: tuple[str, ...] = ("hotel_id",)

# view name -> (entity keys, feature names). Windows are RANGE windows ending at
# the feature event time, so every row is "the state of the key as of then".
VIEWS: MappingProxyType[str, tuple[tuple[str, ...], tuple[str, ...]]] = MappingProxyType(
    {
        "stay_1h": (STAY_KEYS, ("searches_1h", "views_1h", "bookings_1h")),
        "stay_24h": (
            STAY_KEYS,
            (
                "searches_24h",
                "views_24h",
                "bookings_24h",
                "cancellations_24h",
                "mean_price_shown_24h",
                "comp_rate_median_24h",
                "comp_rate_min_24h",
            ),
        ),
        "stay_7d": (
            STAY_KEYS,
            (
                "searches_7d",
                "views_7d",
                "bookings_7d",
                "cancellations_7d",
                "lead_time_mean_days_7d",
                "lead_time_std_days_7d",
            ),
        ),
        "stay_14d": (STAY_KEYS, ("bookings_14d",)),
        "stay_inventory": (STAY_KEYS, ("rooms_left", "capacity", "occupancy")),
        "hotel_stats": (HOTEL_KEYS, ("hotel_searches_24h", "hotel_bookings_24h", "hotel_views_24h")),
    }
)

# Ratios of stored aggregates, computed on read (Flink allows one OVER frame per query, so
# "bookings in the 7 days before the last 7" comes from the 14-day and 7-day views).
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
