"""The demand still to come for a night: the forecast inputs of the bid price (re-exported by :mod:`pricing.bid_price`).

The forecast comes from the features the stream keeps per stay key (see :mod:`pricing.bid_price`):
the shoppers of the last seven days scaled by the :class:`BookingCurve` to those still to come,
optionally pooled with the hotel's pace (``BidPriceConfig.room_shares``), the rooms left and the rooms a
booking keeps net of cancellations.

Example:
    >>> from datetime import date, datetime, timezone
    >>> req = PricingRequest(hotel_id="h1", room_type="std", stay_date=date(2026, 3, 1),
    ...                      event_time=datetime(2026, 2, 1, tzinfo=timezone.utc))
    >>> fc = forecast(req, {"views_7d": 20.0, "rooms_left": 5.0}, BidPriceConfig(curve_mean_days=30.0))
    >>> round(fc.views, 1), fc.rooms_left, forecast(req, {"rooms_left": 5.0}, BidPriceConfig())
    (152.4, 5.0, None)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from datetime import date, timedelta
from typing import NamedTuple

import numpy as np

from events.models import PricingRequest
from pricing.bid_config import BidPriceConfig
from pricing.overbooking import extra_rooms

_MIN_BOOKINGS_FOR_CANCEL = 5.0  # below this the key's own cancellation share is too noisy; use the default
_MIN_VIEW_SHARE = 0.05  # a hotel sold out everywhere shows almost no offers: keep the share meaningful


class BookingCurve:
    """Cumulative share of a night's shoppers by lead time (``share(d)``: arriving less than ``d`` days ahead).

    Example:
        >>> c = BookingCurve.exponential(10.0, 100)
        >>> round(c.between(0.0, 10.0), 3), c.between(0.0, 100.0)
        (0.632, 1.0)
    """

    def __init__(self, cumulative: Sequence[float]) -> None:
        self._cum = np.asarray(cumulative, dtype=float)

    @classmethod
    def exponential(cls, mean_days: float, horizon_days: int) -> BookingCurve:
        days = np.arange(horizon_days + 1, dtype=float)
        raw = 1.0 - np.exp(-days / mean_days)
        return cls(raw / raw[-1])

    @classmethod
    def from_leads(cls, leads: Sequence[float], horizon_days: int) -> BookingCurve:
        """The empirical curve of observed lead times (days), e.g. every view of last season."""
        counts = np.histogram(np.clip(leads, 0, horizon_days), bins=horizon_days, range=(0, horizon_days))[0]
        cum = np.concatenate([[0.0], np.cumsum(counts + 1e-3)])  # a floor keeps every lead possible
        return cls(cum / cum[-1])

    @property
    def cumulative(self) -> tuple[float, ...]:
        return tuple(float(x) for x in self._cum)

    def share(self, lead_days: float) -> float:
        return float(np.interp(lead_days, np.arange(len(self._cum)), self._cum))

    def between(self, lo: float, hi: float) -> float:
        """Share of shoppers arriving with a lead time in ``[lo, hi)`` days."""
        return max(self.share(hi) - self.share(lo), 0.0)


@functools.lru_cache(maxsize=32)
def curve_of(config: BidPriceConfig) -> BookingCurve:
    if config.curve is not None:
        return BookingCurve(config.curve)
    return BookingCurve.exponential(config.curve_mean_days, config.horizon_days)


class DemandForecast(NamedTuple):
    """What the bid price is computed from (recorded on the decision).

    Attributes:
        views: shoppers expected to see an offer for the night from now to arrival.
        rooms_left: rooms still for sale.
        rooms_kept: rooms a booking takes net of cancellations (mean).
        lead_days: days to arrival.
    """

    views: float
    rooms_left: float
    rooms_kept: float
    lead_days: float


def _number(features: Mapping[str, float | None], name: str) -> float | None:
    value = features.get(name)
    return float(value) if value is not None and math.isfinite(value) else None


def _rooms_left(features: Mapping[str, float | None]) -> float | None:
    left = _number(features, "rooms_left")
    if left is None:
        cap, occ = _number(features, "capacity"), _number(features, "occupancy")
        left = None if cap is None or occ is None else cap * (1.0 - occ)
    return None if left is None else max(left, 0.0)


def _shoppers_7d(features: Mapping[str, float | None]) -> float | None:
    """Offer views of the last 7 days as demand, not as sales allowed: searches x the hotel's view share.

    A night that was sold out shows no offers, so its ``views_7d`` is censored exactly when demand is
    high; searches go on regardless. The share of searches that view an offer comes from the hotel's
    last 24 hours (mostly open nights). Without searches, ``views_7d`` as it is.
    """
    searches, views = _number(features, "searches_7d"), _number(features, "views_7d")
    if searches is None:
        return views
    h_views, h_searches = _number(features, "hotel_views_24h"), _number(features, "hotel_searches_24h")
    share = 1.0
    if h_views is not None and h_searches:
        share = min(max(h_views / h_searches, _MIN_VIEW_SHARE), 1.0)
    return max(searches * share, views or 0.0)


def _pace_prior(
    request: PricingRequest, features: Mapping[str, float | None], config: BidPriceConfig, ahead: float
) -> float | None:
    """Shoppers still to come for the night at the hotel's pace (``BidPriceConfig.room_shares``), or ``None``.

    A day's searches over every open night are about the shoppers one night gets over its horizon (each
    night contributes its curve's daily share, and those add to one): the hotel's last 24 hours x the room
    type's share x the curve's share still to come, x the hotel's view share (as the key's own pickup).
    """
    if config.room_shares is None:
        return None
    share_of = dict(config.room_shares)
    searches = _number(features, "hotel_searches_24h")
    room = share_of.get(request.room_type)
    if room is None or not searches:
        return None
    views = _number(features, "hotel_views_24h")
    view_share = 1.0 if views is None else min(max(views / searches, _MIN_VIEW_SHARE), 1.0)
    night = 1.0
    if config.month_index is not None:
        night *= config.month_index[request.stay_date.month - 1]
    if config.weekday_index is not None:
        night *= config.weekday_index[request.stay_date.weekday()]
    return searches * room * view_share * ahead * night


def night_index(nights: Sequence[date]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``(month_index, weekday_index)`` of :class:`BidPriceConfig` from the stay nights of a year of searches.

    Each factor is the searches per night of that month (day of the week) over the searches per night of
    the whole span, so a flat year gives ones. A month or weekday with no night in the span gets 1.

    Example:
        >>> from datetime import date, timedelta
        >>> days = [date(2025, 1, 1) + timedelta(days=i) for i in range(365)]
        >>> busy = days + [d for d in days if d.month == 7]  # July's nights searched twice as often
        >>> month, weekday = night_index(busy)
        >>> round(month[6] / month[0], 2), round(month[0], 3), round(max(weekday) / min(weekday), 2)
        (2.0, 0.922, 1.02)
    """
    if not nights:
        return (1.0,) * 12, (1.0,) * 7
    first, last = min(nights), max(nights)
    span = [first + timedelta(days=i) for i in range((last - first).days + 1)]
    per_night = len(nights) / len(span)

    def factors(key: Callable[[date], int], size: int) -> tuple[float, ...]:
        searched, open_nights = np.zeros(size), np.zeros(size)
        np.add.at(searched, [key(d) for d in nights], 1.0)
        np.add.at(open_nights, [key(d) for d in span], 1.0)
        ratio = np.where(open_nights > 0, searched / np.maximum(open_nights, 1.0) / per_night, 1.0)
        return tuple(float(v) if v > 0 else 1.0 for v in ratio)

    return factors(lambda d: d.month - 1, 12), factors(date.weekday, 7)


def forecast(
    request: PricingRequest, features: Mapping[str, float | None], config: BidPriceConfig
) -> DemandForecast | None:
    """The demand still to come for the request's night, or ``None`` without ``views_7d`` and rooms left."""
    views_7d, left = _shoppers_7d(features), _rooms_left(features)
    if views_7d is None or left is None:
        return None
    lead = max((request.stay_date - request.event_time.date()).days, 0) + 0.5
    curve = curve_of(config)
    seen = curve.between(lead, lead + config.window_days)
    ahead = curve.share(lead)
    # no views in the window yet (a night that just opened): half a view, so the forecast is not zero
    views = max(views_7d, 0.5) * ahead / max(seen, 1e-6)
    prior = _pace_prior(request, features, config, ahead)
    if prior is not None:
        views = (views + config.prior_weight * prior) / (1.0 + config.prior_weight)
    bookings, cancels = _number(features, "bookings_7d"), _number(features, "cancellations_7d")
    cancel = config.cancel_share
    if bookings is not None and cancels is not None and bookings >= _MIN_BOOKINGS_FOR_CANCEL:
        cancel = min(max(cancels / bookings, 0.0), 0.9)
    if config.stays_hold_nights and config.covering_stays:  # the stays checking in earlier that cover it too
        views *= config.nights_per_booking
    if config.overbooking is not None:  # rooms to sell beyond capacity: the forecast show-ups leave them free
        left += extra_rooms(features, cancel_share=cancel, config=config.overbooking)
    return DemandForecast(views, left, config.rooms_per_booking * (1.0 - cancel), lead)
