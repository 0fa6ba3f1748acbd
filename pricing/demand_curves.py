"""The demand curve a tier prices on: the model's own, the pooled price response, or the extrapolated tail.

A bundle's trees say how many book in a context, but they extrapolate flat past the trained price
range and answer in steps inside it. The curves here are built once per quote around the model's
``predict`` (prices -> ``(g, members)`` booking probabilities), and :func:`off_distribution_std`
says how far a candidate's inputs sit outside what the model was trained on. Split from
:mod:`pricing.tiers`, which chooses between them.

Example:
    >>> import numpy as np
    >>> extra = off_distribution_std(1, 3, (50.0, 200.0))
    >>> [round(float(s), 4) for s in extra(np.array([100.0, 300.0]))]  # 1 of 4, then 2 of 4 inputs outside
    [0.0722, 0.1443]
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from pricing.bid_price import logit_tail
from pricing.optimiser import ExtraStd, Predict, price_grid
from pricing.price_response import PriceResponse

TAIL_GRID = 9
"""Prices over the trained range whose demand gives the slope of the extrapolated tail."""
OOD_STD = 1.0 / math.sqrt(12.0)
"""Std of a probability we know nothing about (uniform on [0, 1]).

Price search is also held inside the trained price range (1st-99th
percentile) where that overlaps ``[floor, ceiling]``: past it the trees
predict a flat ``p(book)``, so revenue would look linear in price and the
optimiser would run to the ceiling.

Trees extrapolate flat, so members agree off the training support exactly where
they know least; the member spread alone cannot see that. A candidate whose
inputs leave the training envelope gets ``OOD_STD x share of inputs outside``
added in quadrature to the spread."""

Demand = Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]]
"""prices ``(g,)`` -> booking probabilities ``(g, members)`` as float64."""


def pooled_demand(
    predict: Predict,
    response: PriceResponse | None,
    base: float | None,
    *,
    price_range: tuple[float, float],
    lead_days: float,
    day_of_year: int,
    offset: float,
) -> Demand | None:
    """Demand as the model's level at the base rate times the bundle's pooled price response.

    ``P(p) = P_model(anchor) x shape(p) / shape(anchor)`` per member, ``anchor`` the base rate held
    inside the trained price range, ``shape`` the curve of :class:`pricing.price_response.PriceResponse`
    (one model call per quote): the model says how many book in this context, the pooled curve how
    that falls with price; monotone, and sensible past the trained range. The curve is taken at the
    request's lead time and its night's day of year, so the myopic best price moves with the lead
    (business shoppers near arrival) and the season, not with the model's level; the bid price moves
    it further. (Setting the curve's intercept from the model's level instead, a busier context
    meaning a higher willingness to pay, earned 68,117 against 69,235 on the resort, seed 0, 60 days.)
    ``offset`` is the request channel's intercept offset (0 for the channel-blind curve).
    ``None`` when there is no response or no finite positive base rate, or the model answers non-finite.
    """
    if response is None or base is None or not (math.isfinite(base) and base > 0.0):
        return None
    lo, hi = price_range
    anchor = min(max(float(base), lo), hi)
    level = np.asarray(predict(np.array([anchor])), dtype=np.float64).reshape(1, -1)
    if not np.all(np.isfinite(level)):
        return None
    at_anchor = float(response.shape(np.array([anchor]), float(base), lead_days=lead_days, day_of_year=day_of_year,
                                     offset=offset)[0])

    def pooled(prices: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        shaped = response.shape(prices, float(base), lead_days=lead_days, day_of_year=day_of_year, offset=offset)
        ratio = shaped / max(at_anchor, 1e-12)
        return np.asarray(np.clip(level * ratio[:, None], 0.0, 1.0), dtype=np.float64)

    return pooled


def extended_demand(
    predict: Predict,
    *,
    price_range: tuple[float, float],
    floor: float,
    ceiling: float,
    slope_range: tuple[float, float],
) -> Demand | None:
    """The model's demand continued past its trained price range ``(lo, hi)``.

    Inside the range, the model. Past its top ``hi``: each member's ``logit P(hi)`` minus
    ``slope x log(p / hi)``; below its bottom ``lo``: ``logit P(lo)`` plus ``slope x log(lo / p)``,
    with the slope of :func:`pricing.bid_price.logit_tail` (one extra model call on ``TAIL_GRID``
    prices), bounded by ``slope_range``. ``None`` when the range is unknown, when ``[floor, ceiling]``
    stays inside it, or when the model answers non-finite values.
    """
    lo, hi = price_range
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi) or (floor >= lo and ceiling <= hi):
        return None
    grid = price_grid(lo, hi, TAIL_GRID)
    probs = np.asarray(predict(grid), dtype=np.float64).reshape(len(grid), -1).mean(axis=1)
    if not np.all(np.isfinite(probs)):
        return None
    slope = logit_tail(grid, np.minimum.accumulate(probs), slope_range)
    log_lo, log_hi = math.log(lo), math.log(hi)

    def extended(prices: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        p = np.asarray(prices, dtype=np.float64)
        q = np.clip(np.asarray(predict(np.clip(p, lo, hi)), dtype=np.float64), 1e-9, 1.0 - 1e-9)
        q = q.reshape(len(p), -1)
        logp = np.log(p)
        shift = -slope * np.maximum(logp - log_hi, 0.0) + slope * np.maximum(log_lo - logp, 0.0)
        return np.asarray(1.0 / (1.0 + np.exp(-(np.log(q / (1.0 - q)) + shift[:, None]))), dtype=np.float64)

    return extended


def off_distribution_std(outside: int, known: int, price_range: tuple[float, float]) -> ExtraStd:
    """The off-distribution std per candidate price: ``OOD_STD x share of inputs outside``.

    ``outside`` of the ``known`` non-price inputs leave the training envelope; the price is one more
    input, outside when it leaves ``price_range`` (pass ``(-inf, inf)`` when the demand past the trained
    range is an extrapolated curve, not a tree's flat guess).
    """
    low, high = price_range

    def extra(prices: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        price_out = (prices < low) | (prices > high)
        share: npt.NDArray[np.float64] = (outside + price_out) / (known + 1)
        return OOD_STD * share

    return extra
