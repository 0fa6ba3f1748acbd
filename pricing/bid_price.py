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

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from pricing.bid_config import PRIOR_WEIGHT as PRIOR_WEIGHT
from pricing.bid_config import BidPriceConfig as BidPriceConfig
from pricing.bid_config import NightsMix as NightsMix
from pricing.demand_forecast import BookingCurve as BookingCurve
from pricing.demand_forecast import DemandForecast as DemandForecast
from pricing.demand_forecast import curve_of as curve_of
from pricing.demand_forecast import forecast as forecast
from pricing.demand_forecast import night_index as night_index

_BISECTIONS = 30  # halvings of the bid interval: far below a cent on any price range
DP_MAX_STEPS = 240
"""Periods of the pricer's own dynamic programme (``method="dp"``): one shopper per period while the
forecast is under this many shoppers; above it a period holds several (booking chance ``1 - (1 - q)^k``),
which keeps a quote near a millisecond on a 450-day horizon's busiest nights."""
_ENVELOPE_POINTS = 256  # costs the best-gain envelope is tabulated on (piecewise linear between them)
DP_MAX_ROOMS = 400
"""Rooms left beyond this are priced as if this many were left (their marginal value is zero anyway)."""


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
    stays, shares = _stay_classes(nights)
    value = _dp_values(p, _per_period(q, fc.views, steps), stays, shares, steps=steps, holds=holds, rooms=x)
    if holds:
        return float(value[x] - value[x - 1])
    return float(value[x] - value[x - 1]) / float(stays @ shares)


def _per_period(q: npt.NDArray[np.float64], views: float, steps: int) -> npt.NDArray[np.float64]:
    """Booking chance per period of ``steps`` over ``views`` shoppers: 1 or less, or several on the busiest nights."""
    per_step = views / steps
    return q * per_step if per_step <= 1.0 else 1.0 - (1.0 - q) ** per_step


def _stay_classes(nights: NightsMix | None) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(stay lengths, their shares summing to one) of a nights mix; one night when ``None``."""
    stays = np.array([n for n, _ in nights] if nights else [1.0])
    shares = np.array([w for _, w in nights] if nights else [1.0])
    return stays, shares / shares.sum()


def _dp_values(
    p: npt.NDArray[np.float64],
    book: npt.NDArray[np.float64],
    stays: npt.NDArray[np.float64],
    shares: npt.NDArray[np.float64],
    *,
    steps: int,
    holds: bool,
    rooms: int,
) -> npt.NDArray[np.float64]:
    """``V(0..rooms)`` with ``steps`` periods to go, each period's shopper quoted her best price."""
    # best gain per shopper-night against a cost c per night: max_p book(p) (p - c), convex in c;
    # tabulated once on _ENVELOPE_POINTS costs, so each period is an interpolation per stay class
    costs = np.linspace(0.0, float(p[-1]), _ENVELOPE_POINTS)
    envelope = np.maximum((book[:, None] * (p[:, None] - costs[None, :])).max(axis=0), 0.0)
    value = np.zeros(rooms + 1)  # V(0..x) with no shopper left
    weight = (shares * stays)[:, None]
    divide = np.ones_like(stays) if holds else stays
    for _ in range(steps - 1):
        marginal = np.diff(value)  # V(k) - V(k - 1), k = 1..x
        per_night = marginal[None, :] / divide[:, None]  # the cost per night each stay class faces
        value[1:] += (weight * np.interp(per_night.ravel(), costs, envelope, right=0.0).reshape(per_night.shape)).sum(0)
    return value


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
