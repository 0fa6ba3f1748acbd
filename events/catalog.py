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
                "bookings_prev_7d",
                "cancellations_7d",
                "look_to_book_7d",
                "booking_pace_7d",
                "lead_time_mean_days_7d",
                "lead_time_std_days_7d",
            ),
        ),
        "stay_inventory": (STAY_KEYS, ("rooms_left", "capacity", "occupancy")),
        "hotel_stats": (HOTEL_KEYS, ("hotel_searches_24h", "hotel_bookings_24h", "hotel_views_24h")),
    }
)

STAY_FEATURES: tuple[str, ...] = tuple(
    name for keys, names in VIEWS.values() if keys == STAY_KEYS for name in names
)
HOTEL_FEATURES: tuple[str, ...] = VIEWS["hotel_stats"][1]
ALL_FEATURES: tuple[str, ...] = STAY_FEATURES + HOTEL_FEATURES

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
    msg = f"feature {feature!r} is in no view; known: {sorted(ALL_FEATURES)}"
    raise KeyError(msg)
