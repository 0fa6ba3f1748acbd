"""Named markets: ``flat`` (the original default) and ``resort`` / ``city`` calibrated to real hotel data.

The targets come from the public Hotel Booking Demand dataset (Antonio, Almeida &
Nunes, *Data in Brief* 22, 2019: 40,060 bookings of a resort hotel and 79,330 of
a city hotel in Portugal, arrivals 2015-2017): mean price paid by arrival month,
lead time of bookings (mean, median, 90th percentile), cancellation rate, the mix
of market segments and each segment's mean lead time. The segment parameters
below were fitted to them (:mod:`market.calibration` measures them,
``pricestream market calibrate`` prints figure against target). What the dataset
does not give (elasticities, channels, room types, volumes) is a judgement.

Example:
    >>> preset("resort").season_peak_doy, preset("city").horizon_days
    (213.0, 450)
    >>> preset("flat") == MarketConfig()
    True
    >>> sorted(PRESETS)
    ['city', 'flat', 'resort']
"""

from __future__ import annotations

from typing import Any, NamedTuple

from market.config import MarketConfig, Segment
from market.errors import UnknownKeyError

_RATE_SCANS = 0.3
"""Competitor rate updates per stay night per day: a rate shopper scanning a 450-day horizon every few days
(at the flat market's 1.5 a day, competitor events were half of all records and half the simulation time)."""
_VOLUME = {"resort": 5.5, "city": 9.0}
"""Shoppers per room-night of capacity: a stay holds every night it covers, so a preset's shoppers per check-in
night are this divided by its mean stay. Set for the year's occupancy at the static price net of cancellations
(the ``occupancy`` target): 56% resort, 70% city (4.3, the flat market's figure, gave 50% / 41%: the presets
cancel 28-42% of bookings, the flat market 10-25%). The resort's stays a 3.9x swing of willingness to pay over a
year at one static price, so its peak sells out whatever the volume, and more volume fills May and June months
ahead (at 8.0: 4-19% of rooms left 20-120 nights out on 17 April) for a few points of the year's occupancy."""
_WEEKDAYS = (1.3, 1.4, 1.4, 1.25, 0.7, 0.4, 0.55)
_WEEKENDS = (0.8, 0.75, 0.8, 0.95, 1.35, 1.5, 0.85)


class Target(NamedTuple):
    """One dataset figure and how close the simulated market must come (absolute, in the figure's unit)."""

    value: float
    tolerance: float


def _segments(
    leads: dict[str, float], shares: dict[str, float], cancels: dict[str, float], *, resort: bool
) -> tuple[Segment, ...]:
    """The five market segments of the dataset (complementary bookings, under 1%, are left out)."""
    nights = 1.6 if resort else 1.0  # resort stays are longer (dataset: ~4.3 vs ~3 nights)
    spec: dict[str, dict[str, Any]] = {
        "online_ta": {"elasticity": 2.6, "accept_at_reference": 0.6, "intent": 0.28, "nights_mean": 2.6 * nights,
                      "dow_weights": _WEEKENDS, "channels": {"ota": 0.75, "web": 0.1, "mobile": 0.15}},
        "offline_ta": {"elasticity": 2.2, "accept_at_reference": 0.62, "intent": 0.28, "nights_mean": 2.8 * nights,
                       "channels": {"ota": 0.6, "gds": 0.4}},
        "groups": {"elasticity": 3.2, "accept_at_reference": 0.65, "intent": 0.22, "nights_mean": 2.5 * nights,
                   "rooms": (2, 5), "channels": {"direct": 0.7, "gds": 0.3}},
        "direct": {"elasticity": 2.0, "accept_at_reference": 0.62, "intent": 0.3, "nights_mean": 2.4 * nights,
                   "last_minute_premium": 0.05, "dow_weights": _WEEKENDS,
                   "channels": {"direct": 0.6, "web": 0.3, "mobile": 0.1}},
        "corporate": {"elasticity": 1.5, "accept_at_reference": 0.6, "intent": 0.32, "nights_mean": 1.5,
                      "last_minute_premium": 0.2, "dow_weights": _WEEKDAYS,
                      "channels": {"corporate": 0.8, "gds": 0.2}},
    }
    return tuple(
        Segment(name=name, share=shares[name], lead_mean_days=leads[name], cancel_rate=cancels[name], **kw)
        for name, kw in spec.items()
    )


def _holding(config: MarketConfig, volume: float) -> MarketConfig:
    """``config`` with stays holding every night, a warm start net of cancellations, check-in volume / mean stay."""
    return config.model_copy(
        update={"stays_hold_nights": True, "warm_start_net": True,
                "shoppers_per_room_night": round(volume / config.mean_nights, 4)}
    )


def resort() -> MarketConfig:
    """A seasonal resort: price paid by arrival month 48-187 (3.9x), bookings 93 days ahead on average."""
    return _holding(MarketConfig(
        horizon_days=450,
        competitor_updates_per_day=_RATE_SCANS,
        season_amplitude=0.6,
        season_wtp_exponent=1.05,
        season_peak_doy=213.0,  # August, the dataset's dearest month at the resort
        base_prices={"standard": 98.6, "deluxe": 154.8, "suite": 281.6},
        segments=_segments(
            leads={"online_ta": 85.6, "offline_ta": 135.5, "groups": 267.5, "direct": 45.6, "corporate": 17.3},
            shares={"online_ta": 44.14, "offline_ta": 19.43, "groups": 16.91, "direct": 14.24, "corporate": 6.26},
            cancels={"online_ta": 0.33, "offline_ta": 0.28, "groups": 0.3, "direct": 0.15, "corporate": 0.12},
            resort=True,
        ),
    ), _VOLUME["resort"])


def city() -> MarketConfig:
    """A city hotel: a 1.5x swing of price by month, bookings 110 days ahead, 42% cancelled."""
    return _holding(MarketConfig(
        horizon_days=450,
        competitor_updates_per_day=_RATE_SCANS,
        season_amplitude=0.25,
        season_wtp_exponent=0.727,
        season_peak_doy=135.0,  # May, the dataset's dearest month in the city
        base_prices={"standard": 91.3, "deluxe": 134.6, "suite": 220.9},
        segments=_segments(
            leads={"online_ta": 84.9, "offline_ta": 185.7, "groups": 491.4, "direct": 49.4, "corporate": 24.0},
            shares={"online_ta": 47.65, "offline_ta": 20.59, "groups": 21.22, "direct": 7.74, "corporate": 4.03},
            cancels={"online_ta": 0.38, "offline_ta": 0.42, "groups": 0.68, "direct": 0.18, "corporate": 0.18},
            resort=False,
        ),
    ), _VOLUME["city"])


PRESETS = {"flat": MarketConfig, "resort": resort, "city": city}


def preset(name: str, **overrides: object) -> MarketConfig:
    """The market config called ``name``, with ``overrides`` (e.g. ``hotels=2, seed=3``) applied.

    Raises:
        UnknownKeyError: for an unknown preset.
    """
    if name not in PRESETS:
        raise UnknownKeyError(field="preset", value=name, expected=f"one of {sorted(PRESETS)}")
    base = PRESETS[name]()
    return base.model_copy(update=overrides) if overrides else base


_SEGMENT_TARGETS = {
    "resort": {"online_ta": (0.44, 83.0), "offline_ta": (0.19, 120.0), "groups": (0.15, 167.0),
               "direct": (0.16, 48.0), "corporate": (0.06, 18.0)},
    "city": {"online_ta": (0.49, 83.0), "offline_ta": (0.21, 141.0), "groups": (0.18, 195.0),
             "direct": (0.08, 51.0), "corporate": (0.04, 26.0)},
}
_HOTEL_TARGETS = {
    "resort": {"price_month_min": 48.3, "price_month_max": 186.8, "lead_mean": 92.7, "lead_median": 57.0,
               "lead_p90": 238.0, "cancel_rate": 0.278, "occupancy": 0.60},
    "city": {"price_month_min": 82.6, "price_month_max": 121.6, "lead_mean": 109.7, "lead_median": 74.0,
             "lead_p90": 277.0, "cancel_rate": 0.417, "occupancy": 0.70},
}
PRICE_TOLERANCE = 0.12
"""Relative tolerance of the monthly price extremes and the overall lead-time figures."""
LEAD_TOLERANCE = 0.12
SHARE_TOLERANCE = 0.03
"""Absolute tolerance of segment shares and the cancellation rate (3 points)."""
OCCUPANCY_TOLERANCE = 0.10
"""Absolute tolerance of the year's occupancy at the static price. The dataset gives no capacity; hotels of its kind
run about 60-80% over a year, a seasonal resort at the low end: targets 60% (resort) and 70% (city), a judgement."""
SEGMENT_LEAD_TOLERANCE = 0.15
"""Relative tolerance of each segment's mean lead time."""


def targets(name: str) -> dict[str, Target]:
    """The dataset figures for preset ``name`` with their tolerances (``flat`` has none)."""
    if name not in _HOTEL_TARGETS:
        return {}
    hotel = _HOTEL_TARGETS[name]
    out = {}
    for key, value in hotel.items():
        if key == "cancel_rate":
            out[key] = Target(value, SHARE_TOLERANCE)
        elif key == "occupancy":
            out[key] = Target(value, OCCUPANCY_TOLERANCE)
        else:
            rel = PRICE_TOLERANCE if key.startswith("price") else LEAD_TOLERANCE
            out[key] = Target(value, round(rel * value, 2))
    for seg, (share, lead) in _SEGMENT_TARGETS[name].items():
        out[f"share_{seg}"] = Target(share, SHARE_TOLERANCE)
        out[f"lead_mean_{seg}"] = Target(lead, round(SEGMENT_LEAD_TOLERANCE * lead, 2))
    return out
