"""How the bid price is forecast and computed: :class:`BidPriceConfig` (re-exported by :mod:`pricing.bid_price`).

Split from :mod:`pricing.bid_price` so that the forecast inputs (:mod:`pricing.demand_forecast`) and the
solvers both read one frozen settings model, with no import between them.

Example:
    >>> BidPriceConfig().method, BidPriceConfig(method="dp").nights_per_booking
    ('fluid', 1.0)
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from pricing.overbooking import OverbookingConfig

PRIOR_WEIGHT = 1.0
"""Weight of the hotel-pace prior against a key's own 7-day pickup (``BidPriceConfig.room_shares``): on the city
preset, 60 days, seeds 0-7, equal weight moved pricestream from 0.936 to 0.955 of the DP oracle; a paired
check at the DP's states (seed 6) put most of the revenue lost on quotes scattered +-5% around the DP's,
not on a bias (docs/revenue-management.md, 2 December, afternoon)."""

NightsMix = tuple[tuple[float, float], ...]
"""``(nights, share)`` pairs: how long bookings stay."""


class BidPriceConfig(BaseModel):
    """How the bid price is forecast.

    Attributes:
        curve_mean_days: mean of the exponential booking curve used when ``curve`` is not given.
        curve: cumulative share of a night's shoppers that arrive at lead time < d, for
            ``d = 0, 1, ..., horizon`` (first 0, last 1); e.g. measured from history with
            :meth:`pricing.demand_forecast.BookingCurve.from_leads`.
        horizon_days: nights are sold this many days ahead (with an exponential curve).
        window_days: length of the views window the pace is read from (``views_7d``).
        rooms_per_booking: mean rooms a booking takes.
        cancel_share: share of bookings cancelled, used until the key has its own figure.
        method: ``fluid`` (the multiplier of the deterministic problem), ``stochastic`` (the value of
            the last room when the rest is sold at the best single price to Poisson demand) or ``dp``
            (the marginal value of a room in the dynamic programme over the forecast shoppers, each
            quoted its best price: :func:`pricing.bid_price.dp_bid_price`; positive whenever the last room might sell).
        beyond_trained: when the bid reaches the top of the model's trained price range, search up to
            the rules' ceiling (the model extrapolates flat there, so this trusts the bid over the model).
        nights_per_booking: mean nights a booking pays for. A booking takes a room of its check-in night
            and pays ``price x nights``: the bid is per room-night at this mean stay, and a request for
            ``n`` nights is priced against ``bid x nights_per_booking / n`` per night (a long stay pays
            more for the same room).
        nights_mix: ``(nights, share)`` of bookings (e.g. from history: :func:`nights_mix`), for the
            ``dp`` method: a long stay pays more for the same room, so the value of the last rooms is
            that of the long stays still to come. ``None``: every stay at ``nights_per_booking``.
        stays_hold_nights: a booking holds a room on every night of its stay (a real hotel; the
            ``resort`` and ``city`` markets): the bid is the value of one room of the night (no division
            by the stay), and a stay's cost per night is the mean of its nights' bids
            (:func:`pricing.bid_price.cost_per_night`). ``False``: a booking takes a room of its check-in night only.
        covering_stays: with ``stays_hold_nights``, the shoppers still to come for a night are its own
            check-ins' x ``nights_per_booking`` (every stay that would cover it); ``False``: its own
            check-ins' only, as the DP oracle does by default (counting the covering stays overpriced
            there: in a market sold out months ahead most of them cannot fit).
        extrapolate: search the rules' whole band, with the demand past the model's trained price range
            continued as a logit in log price from the range's edge, its slope the model's own over the
            upper half of the range (clipped to ``slope_range``): monotone in price, and
            ``P(book) x price`` falls far out, unlike a tree's flat extrapolation.
        slope_range: bounds of that slope (``-d logit P / d log price``); above 1 so revenue has a maximum.
        room_shares: ``(room type, share)`` of the hotel's searches (e.g. from last year's history). With
            them the key's own pickup (7-day counts of a few searches, noisy) is shrunk toward the hotel's
            pace: its searches of the last 24 hours (a day's searches over every open night, i.e. about
            the shoppers one night gets over its whole horizon) x the room type's share x the booking
            curve's share still to come (:func:`forecast`). ``None``: the key's own pickup only.
        prior_weight: weight of that prior against the key's own pickup (1: equal, a gamma prior worth
            one window of the key's own searches).
        month_index: the demand of a night of each calendar month (January first) relative to the year's mean
            night (e.g. from last year's searches: :func:`night_index`), and ``weekday_index`` the same per day
            of the week (Monday first). The hotel's pace is that of its mean open night; with them the prior is
            scaled to the request's night. ``None``: every night at the mean (in the city's May and June the
            nights carry 1.25x the mean night's demand, and the prior read 0.8x the shoppers that came).
        channel_response: a tier prices with the pooled price response shifted by the request channel's
            intercept offset (``price_response_channels`` in the bundle's meta, fitted from the labels and
            shrunk toward the pool: :mod:`pricing.channel_response`). ``False``: the channel-blind curve.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    curve_mean_days: float = Field(default=30.0, gt=0.0, allow_inf_nan=False)
    curve: tuple[float, ...] | None = None
    horizon_days: int = Field(default=120, ge=1, le=730)
    window_days: float = Field(default=7.0, gt=0.0)
    rooms_per_booking: float = Field(default=1.2, ge=1.0, allow_inf_nan=False)
    cancel_share: float = Field(default=0.15, ge=0.0, lt=1.0)
    overbooking: OverbookingConfig | None = None
    """Sell a night beyond its capacity up to its overbooking limit (:mod:`pricing.overbooking`); ``None``: never."""
    method: Literal["fluid", "stochastic", "dp"] = "fluid"
    beyond_trained: bool = False
    nights_per_booking: float = Field(default=1.0, ge=1.0, le=60.0, allow_inf_nan=False)
    nights_mix: NightsMix | None = None
    stays_hold_nights: bool = False
    covering_stays: bool = False
    extrapolate: bool = True
    slope_range: tuple[float, float] = (1.5, 8.0)
    room_shares: tuple[tuple[str, float], ...] | None = None
    prior_weight: float = Field(default=PRIOR_WEIGHT, ge=0.0, allow_inf_nan=False)
    month_index: tuple[float, ...] | None = None
    weekday_index: tuple[float, ...] | None = None
    channel_response: bool = False

    @field_validator("month_index", "weekday_index")
    @classmethod
    def _index(cls, value: tuple[float, ...] | None, info: ValidationInfo) -> tuple[float, ...] | None:
        size = 12 if info.field_name == "month_index" else 7
        if value is not None and (len(value) != size or not all(math.isfinite(v) and v > 0.0 for v in value)):
            msg = f"{info.field_name} {value}: expected {size} finite factors > 0"
            raise ValueError(msg)
        return value

    @field_validator("slope_range")
    @classmethod
    def _slopes(cls, value: tuple[float, float]) -> tuple[float, float]:
        if not (1.0 < value[0] <= value[1] and math.isfinite(value[1])):
            msg = f"slope_range {value}: expected (low, high) with 1 < low <= high, finite"
            raise ValueError(msg)
        return value

    @field_validator("room_shares")
    @classmethod
    def _shares(cls, value: tuple[tuple[str, float], ...] | None) -> tuple[tuple[str, float], ...] | None:
        if value is not None and not all(0.0 <= share <= 1.0 for _, share in value):
            msg = f"room_shares {value}: expected (room type, share) pairs with shares in [0, 1]"
            raise ValueError(msg)
        return value

    @field_validator("curve")
    @classmethod
    def _cumulative(cls, value: tuple[float, ...] | None) -> tuple[float, ...] | None:
        if value is None:
            return None
        arr = np.asarray(value)
        if len(arr) < 2 or arr[0] != 0.0 or abs(arr[-1] - 1.0) > 1e-9 or np.any(np.diff(arr) < 0):
            msg = "a non-decreasing cumulative share from 0.0 to 1.0 over lead days 0..horizon"
            raise ValueError(msg)
        return value
