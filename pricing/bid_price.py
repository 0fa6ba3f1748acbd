"""The opportunity cost of a room: a bid price per night and room type from the streaming demand forecast.

A pricer that maximises ``P(book | p) x p`` per shopper ignores inventory: with
a logit in log price that optimum does not move with demand volume at all. The
revenue-management answer (Gallego & van Ryzin 1994; bid-price control in
Talluri & van Ryzin) is to maximise ``P(book | p) x (p - bid)``, where ``bid``
is the value of the last rooms given the demand still to come.

The forecast comes from the features the stream keeps per stay key:

* shoppers still to come: the key's shoppers of the last seven days (``searches_7d``
  x the hotel's share of searches that view an offer, not ``views_7d``, which a
  sold-out spell censors: no offers are shown) scaled by the booking curve
  (``BookingCurve``, the share of a night's shoppers arriving at each lead time)
  from the last seven days' share to the share left between now and arrival
  (a multiplicative pickup forecast);
* ``rooms_left`` (or ``capacity x (1 - occupancy)``);
* rooms kept per booking: ``rooms_per_booking`` x the share not cancelled
  (``cancellations_7d / bookings_7d`` once there are enough bookings).

The bid price is the multiplier of the fluid problem "sell the rooms left to the
shoppers still to come at one price": zero when the unconstrained best price
leaves rooms unsold, else the smallest ``bid`` whose best response
``argmax (p - bid) P(p)`` sells no more than the rooms left (bisection on the
candidate grid, no extra model calls). It moves as the features move: fewer
rooms or more shoppers raise it, the approach of arrival with rooms to spare
lowers it to zero.

Example:
    >>> from datetime import date, datetime, timezone
    >>> from events.models import PricingRequest
    >>> import numpy as np
    >>> req = PricingRequest(hotel_id="h1", room_type="std", stay_date=date(2026, 3, 1),
    ...                      event_time=datetime(2026, 2, 1, tzinfo=timezone.utc))
    >>> cfg = BidPriceConfig(curve_mean_days=30.0)
    >>> fc = forecast(req, {"views_7d": 20.0, "rooms_left": 5.0}, cfg)
    >>> round(fc.views, 1), fc.rooms_left
    (152.4, 5.0)
    >>> prices = np.linspace(50.0, 400.0, 36)
    >>> probs = 1.0 / (1.0 + np.exp(2.5 * np.log(prices) - 2.5 * np.log(150.0)))
    >>> bid = bid_price(prices, probs, fc)
    >>> bid > 0.0, bid_price(prices, probs, fc._replace(rooms_left=120.0))
    (True, 0.0)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from datetime import date, timedelta
from typing import Literal, NamedTuple

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from events.models import PricingRequest
from pricing.overbooking import OverbookingConfig, extra_rooms

_BISECTIONS = 30  # halvings of the bid interval: far below a cent on any price range
_MIN_BOOKINGS_FOR_CANCEL = 5.0  # below this the key's own cancellation share is too noisy; use the default
_MIN_VIEW_SHARE = 0.05  # a hotel sold out everywhere shows almost no offers: keep the share meaningful
DP_MAX_STEPS = 240
"""Periods of the pricer's own dynamic programme (``method="dp"``): one shopper per period while the
forecast is under this many shoppers; above it a period holds several (booking chance ``1 - (1 - q)^k``),
which keeps a quote near a millisecond on a 450-day horizon's busiest nights."""
_ENVELOPE_POINTS = 256  # costs the best-gain envelope is tabulated on (piecewise linear between them)
DP_MAX_ROOMS = 400
"""Rooms left beyond this are priced as if this many were left (their marginal value is zero anyway)."""


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
            :meth:`BookingCurve.from_leads`.
        horizon_days: nights are sold this many days ahead (with an exponential curve).
        window_days: length of the views window the pace is read from (``views_7d``).
        rooms_per_booking: mean rooms a booking takes.
        cancel_share: share of bookings cancelled, used until the key has its own figure.
        method: ``fluid`` (the multiplier of the deterministic problem), ``stochastic`` (the value of
            the last room when the rest is sold at the best single price to Poisson demand) or ``dp``
            (the marginal value of a room in the dynamic programme over the forecast shoppers, each
            quoted its best price: :func:`dp_bid_price`; positive whenever the last room might sell).
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
            (:func:`cost_per_night`). ``False``: a booking takes a room of its check-in night only.
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


def _best(prices: npt.NDArray[np.float64], probs: npt.NDArray[np.float64], bid: float) -> int:
    return int(np.argmax((prices - bid) * probs))


def bid_price(
    prices: npt.ArrayLike,
    probs: npt.ArrayLike,
    fc: DemandForecast,
    *,
    method: str = "fluid",
    nights: NightsMix | None = None,
    holds: bool = False,
) -> float:
    """The fluid bid price: the smallest ``bid >= 0`` whose best price sells at most the rooms left.

    ``prices`` ascending, ``probs`` the booking probability per view at each (made
    non-increasing first: a tree model's staircase can wiggle).
    """
    if method == "stochastic":
        return stochastic_bid_price(prices, probs, fc)
    if method == "dp":
        return dp_bid_price(prices, probs, fc, nights=nights, holds=holds)
    p = np.asarray(prices, dtype=float)
    q = np.minimum.accumulate(np.clip(np.asarray(probs, dtype=float), 0.0, 1.0))
    demand = fc.views * fc.rooms_kept * q  # rooms the remaining shoppers would keep at each price
    if fc.rooms_left <= 0.0:
        return float(p[-1])
    if demand[_best(p, q, 0.0)] <= fc.rooms_left:
        return 0.0
    lo, hi = 0.0, float(p[-1])
    if demand[_best(p, q, hi)] > fc.rooms_left:
        return hi  # even the ceiling oversells: the bid is at least the top of the range
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2.0
        if demand[_best(p, q, mid)] > fc.rooms_left:
            lo = mid
        else:
            hi = mid
    return hi


def stochastic_bid_price(prices: npt.ArrayLike, probs: npt.ArrayLike, fc: DemandForecast) -> float:
    """``V(x) - V(x - 1)``, with ``V(x) = max_p p E[min(D_p, x)]`` and ``D_p`` Poisson demand for rooms at ``p``.

    Unlike the fluid bid it is positive whenever the last room might sell, and it falls to zero near
    arrival with rooms to spare. Example:

        >>> p = np.array([100.0, 150.0, 200.0]); q = np.array([0.5, 0.3, 0.1])
        >>> few, many = (stochastic_bid_price(p, q, DemandForecast(40.0, x, 1.0, 10.0)) for x in (3.0, 30.0))
        >>> few > 100.0 > many >= 0.0
        True
    """
    from scipy.stats import poisson

    p = np.asarray(prices, dtype=float)
    q = np.minimum.accumulate(np.clip(np.asarray(probs, dtype=float), 0.0, 1.0))
    x = int(round(fc.rooms_left))
    if x <= 0:
        return float(p[-1])
    mu = np.maximum(fc.views * fc.rooms_kept * q, 1e-12)
    tails = poisson.sf(np.arange(x)[:, None], mu[None, :])  # P(D > k), k = 0..x-1
    e_min = np.cumsum(tails, axis=0)  # E[min(D, k + 1)]
    value = (p[None, :] * e_min).max(axis=1)
    return float(value[-1] - (value[-2] if x >= 2 else 0.0))


def dp_bid_price(
    prices: npt.ArrayLike,
    probs: npt.ArrayLike,
    fc: DemandForecast,
    *,
    nights: NightsMix | None = None,
    holds: bool = False,
) -> float:
    """The marginal value of a room in the dynamic programme over the forecast shoppers (Gallego & van Ryzin).

    ``fc.views`` shoppers arrive one per period (``DP_MAX_STEPS`` periods at most). A shopper stays
    ``n`` nights with the shares of ``nights`` (``(n, share)`` pairs; one night when ``None``), pays
    ``n`` x the nightly price, takes a room of the night, and is quoted
    ``argmax_p q(p) (n p - (V(x) - V(x - 1)))``; she books a room with ``q(p) x fc.rooms_kept``
    (``probs`` per view, made non-increasing). Unlike the fluid bid it values the risk that demand runs
    ahead of the rooms when the expected demand is just below them; unlike the single-price
    ``stochastic`` bid the later shoppers are priced as the rooms go, and a long stay can take a room
    that a short one would not get. Returned per room-night at the mix's mean stay (as
    :func:`cost_per_night` expects).

    ``holds`` (``BidPriceConfig.stays_hold_nights``): a stay holds a room on each of its nights, so
    the programme is this night's share of a network one, decomposed by night: a shopper covering it
    pays ``n p`` less her other nights' bid prices, taken equal to this night's, so she is quoted
    ``argmax_p q(p) n (p - (V(x) - V(x - 1)))``; returned per room of the night.

    Example:
        >>> p = np.array([100.0, 150.0, 200.0]); q = np.array([0.5, 0.3, 0.1])
        >>> few, many = (dp_bid_price(p, q, DemandForecast(40.0, x, 1.0, 10.0)) for x in (3.0, 30.0))
        >>> few > 100.0 > many >= 0.0, dp_bid_price(p, q, DemandForecast(0.0, 3.0, 1.0, 0.5))
        (True, 0.0)
    """
    p = np.asarray(prices, dtype=float)
    q = np.minimum.accumulate(np.clip(np.asarray(probs, dtype=float), 0.0, 1.0)) * min(max(fc.rooms_kept, 0.0), 1.0)
    x = min(int(round(fc.rooms_left)), DP_MAX_ROOMS)
    if x <= 0:
        return float(p[-1])
    steps = min(int(math.ceil(max(fc.views, 0.0))), DP_MAX_STEPS)
    if steps == 0:
        return 0.0
    per_step = fc.views / steps  # shoppers per period: 1 or less, or several on the busiest nights
    book = q * per_step if per_step <= 1.0 else 1.0 - (1.0 - q) ** per_step
    stays = np.array([n for n, _ in nights] if nights else [1.0])
    shares = np.array([w for _, w in nights] if nights else [1.0])
    shares = shares / shares.sum()
    # best gain per shopper-night against a cost c per night: max_p book(p) (p - c), convex in c;
    # tabulated once on _ENVELOPE_POINTS costs, so each period is an interpolation per stay class
    costs = np.linspace(0.0, float(p[-1]), _ENVELOPE_POINTS)
    envelope = np.maximum((book[:, None] * (p[:, None] - costs[None, :])).max(axis=0), 0.0)
    value = np.zeros(x + 1)  # V(0..x) with no shopper left
    weight = (shares * stays)[:, None]
    divide = np.ones_like(stays) if holds else stays
    for _ in range(steps - 1):
        marginal = np.diff(value)  # V(k) - V(k - 1), k = 1..x
        per_night = marginal[None, :] / divide[:, None]  # the cost per night each stay class faces
        value[1:] += (weight * np.interp(per_night.ravel(), costs, envelope, right=0.0).reshape(per_night.shape)).sum(0)
    if holds:
        return float(value[x] - value[x - 1])
    return float(value[x] - value[x - 1]) / float(stays @ shares)


def nights_mix(stays: Sequence[int], *, longest: int = 14) -> NightsMix:
    """Shares of stay lengths from observed bookings, stays over ``longest`` nights pooled at their mean.

    Example:
        >>> nights_mix([1, 1, 2, 4, 30], longest=7)
        ((1.0, 0.4), (2.0, 0.2), (4.0, 0.2), (30.0, 0.2))
    """
    arr = np.asarray(stays, dtype=float)
    if arr.size == 0:
        return ((1.0, 1.0),)
    out = [(float(n), float(np.mean(arr == n))) for n in np.unique(arr[arr <= longest])]
    if np.any(arr > longest):
        out.append((float(arr[arr > longest].mean()), float(np.mean(arr > longest))))
    return tuple(out)


def cost_per_night(
    bid: float, nights: int, config: BidPriceConfig, *, stay_bids: Sequence[float] | None = None
) -> float:
    """The opportunity cost per night of a request for ``nights`` nights (see ``nights_per_booking``).

    With ``config.stays_hold_nights`` a stay takes a room on each of its nights: the cost is the sum of
    their bid prices spread over the nights, i.e. their mean; ``stay_bids`` are the bids of the nights
    after check-in that are known (missing ones, e.g. nights with no features, are taken at ``bid``,
    the check-in night's).

    Example:
        >>> cost_per_night(100.0, 4, BidPriceConfig(nights_per_booking=2.0))
        50.0
        >>> cost_per_night(100.0, 4, BidPriceConfig(stays_hold_nights=True), stay_bids=[20.0, 0.0])
        55.0
    """
    if config.stays_hold_nights:
        n = max(nights, 1)
        known = list(stay_bids or [])[: n - 1]
        return (bid + sum(known) + bid * (n - 1 - len(known))) / n
    return bid * config.nights_per_booking / max(nights, 1)


def logit_tail(
    prices: npt.NDArray[np.float64], probs: npt.NDArray[np.float64], slope_range: tuple[float, float]
) -> float:
    """``-d logit P / d log price`` of a demand curve over its upper half, clipped to ``slope_range``.

    ``prices`` ascending with ``probs`` (one per price): the slope of the least-squares line of
    ``logit P`` on ``log price`` over the dearer half of the points, as the model's own price response
    where it was trained; a flat curve gets the low bound.

    Example:
        >>> p = np.linspace(80.0, 200.0, 9)
        >>> q = 1.0 / (1.0 + np.exp(3.0 * np.log(p / 120.0)))
        >>> round(logit_tail(p, q, (1.5, 8.0)), 6)
        3.0
    """
    half = len(prices) // 2
    x = np.log(np.asarray(prices[half:], dtype=float))
    q = np.clip(np.asarray(probs[half:], dtype=float), 1e-6, 1.0 - 1e-6)
    y = np.log(q / (1.0 - q))
    if len(x) < 2 or np.ptp(x) <= 0.0:
        return slope_range[0]
    slope = -float(np.polyfit(x, y, 1)[0])
    return min(max(slope, slope_range[0]), slope_range[1]) if math.isfinite(slope) else slope_range[0]
