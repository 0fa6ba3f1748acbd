"""Revenue-maximising price over a grid inside ``[floor, ceiling]``.

Expected revenue of a candidate is ``price x p(book | price)``, or with a
``cost`` (the bid price of :mod:`pricing.bid_price`, the opportunity cost of the
room) ``(price - cost) x p(book | price)``. With an
ensemble (``probs`` of shape ``(grid, members)``) the objective is risk
adjusted: ``price x (mean - risk_aversion x std)``. Grids are geometric
(equal price *ratios*), because demand responds to relative price changes.
An optional refinement pass re-grids between the neighbours of the best
point, for a coarse first grid at the cost of a second model call.

If the model returns anything non-finite, the optimiser does not guess: it
returns the fallback (rules) price clamped into the bounds and flags it.

A tree model's demand is a staircase in price, and the best price of a
staircase sits at the right edge of a step, where the true demand has already
fallen: the argmax is biased upwards. ``smoothing`` averages each candidate's
probabilities over ``SMOOTHING_POINTS`` prices spread evenly over
``price x (1 +- smoothing)`` (one model call), a kernel smoother of the steps.

Example:
    >>> import numpy as np
    >>> demand = lambda p: (1 / (1 + np.exp(-(8 - 1.6 * np.log(p)))))[:, None]
    >>> best = optimise(demand, floor=50.0, ceiling=400.0, grid_size=41)
    >>> round(best.price, 1), best.fallback, len(best.candidates)  # true optimum: 204.2
    (203.5, False, 41)
    >>> optimise(lambda p: np.full((len(p), 1), np.nan), floor=50.0, ceiling=400.0,
    ...          grid_size=9, fallback_price=120.0).price
    120.0
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pricing.errors import QuoteError

SMOOTHING_POINTS = 3
"""Model evaluations per candidate price when smoothing: the price and one neighbour either side
(as good as five on the market simulator, at 3x rather than 5x the rows)."""
Predict = Callable[[npt.NDArray[np.float64]], npt.NDArray[np.floating[Any]]]
"""prices ``(g,)`` -> booking probabilities ``(g, members)``."""
ExtraStd = Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]]
"""prices ``(g,)`` -> an extra, independent std per candidate (e.g. an off-distribution term)."""


@dataclass(frozen=True, slots=True)
class Optimum:
    """The chosen price and everything that was weighed.

    Attributes:
        price: chosen price, finite and inside the bounds.
        expected_revenue: ``price x mean p(book)`` at the chosen price (0.0 on fallback).
        booking_prob: mean ``p(book)`` at the chosen price (``None`` on fallback).
        uncertainty: std of ``p(book)`` at the chosen price: the spread across ensemble members,
            plus ``extra_std`` in quadrature (0 for one member and no extra term).
        candidates: every evaluated ``(price, mean p(book))``, sorted by price.
        fallback: the model returned non-finite values and the fallback price was used.
    """

    price: float
    expected_revenue: float
    booking_prob: float | None
    uncertainty: float
    candidates: tuple[tuple[float, float], ...]
    fallback: bool = False


def check_bounds(floor: float, ceiling: float) -> None:
    """Raise :class:`QuoteError` unless ``0 < floor <= ceiling`` and both are finite."""
    if not (math.isfinite(floor) and floor > 0):
        raise QuoteError(field="floor", value=floor, expected="a finite price > 0")
    if not (math.isfinite(ceiling) and ceiling >= floor):
        raise QuoteError(field="ceiling", value=ceiling, expected=f"a finite price >= floor ({floor})")


def price_grid(floor: float, ceiling: float, size: int) -> npt.NDArray[np.float64]:
    """``size`` geometrically spaced prices from ``floor`` to ``ceiling`` (both included).

    Example:
        >>> price_grid(50.0, 200.0, 3).tolist()
        [50.0, 100.0, 200.0]
    """
    check_bounds(floor, ceiling)
    if size < 1:
        raise QuoteError(field="grid_size", value=size, expected="at least 1")
    if size == 1 or floor == ceiling:
        return np.full(size, floor)
    grid: npt.NDArray[np.float64] = floor * np.exp(_unit_grid(size) * math.log(ceiling / floor))
    grid[0], grid[-1] = floor, ceiling  # exp(log(x)) can miss the ends by an ulp
    return grid


@functools.lru_cache(maxsize=64)
def _unit_grid(size: int) -> npt.NDArray[np.float64]:
    """``linspace(0, 1, size)``, computed once per size (np.geomspace costs ~10x more per call)."""
    unit = np.linspace(0.0, 1.0, size)
    unit.flags.writeable = False
    return unit


def _objective(
    prices: npt.NDArray[np.float64],
    probs: npt.NDArray[np.floating[Any]],
    risk_aversion: float,
    extra_std: ExtraStd | None,
    cost: float = 0.0,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    p = np.clip(np.asarray(probs, dtype=np.float64).reshape(len(prices), -1), 0.0, 1.0)
    if p.shape[1] == 1:
        mean, std = p[:, 0], np.zeros(len(prices))
    else:
        mean, std = p.mean(axis=1), p.std(axis=1)
    if extra_std is not None:
        std = np.sqrt(std**2 + np.asarray(extra_std(prices), dtype=np.float64) ** 2)
    return (prices - cost) * np.maximum(mean - risk_aversion * std, 0.0), mean, std


def optimise(
    predict: Predict,
    *,
    floor: float,
    ceiling: float,
    grid_size: int,
    refine_passes: int = 0,
    risk_aversion: float = 0.0,
    fallback_price: float | None = None,
    extra_std: ExtraStd | None = None,
    smoothing: float = 0.0,
    cost: float = 0.0,
) -> Optimum:
    """Search the grid (then refine) for the best risk-adjusted expected revenue.

    Args:
        predict: prices -> ``(g, members)`` booking probabilities.
        floor: lowest allowed price.
        ceiling: highest allowed price.
        grid_size: candidates per pass.
        refine_passes: extra passes between the neighbours of the current best.
        risk_aversion: ``lambda`` in ``mean - lambda x std``.
        fallback_price: used (clamped) if the model returns non-finite values;
            ``None`` means the geometric mid-point of the bounds.
        extra_std: an extra std per candidate, added in quadrature to the member spread.
        smoothing: relative half-width of the price window each candidate's probabilities are
            averaged over (0: none; see the module docstring).
        cost: opportunity cost per unit sold (a bid price), subtracted from each candidate's price.

    Raises:
        QuoteError: if the bounds are impossible.
    """
    _check_search(smoothing, cost)
    predict = _smoothed(predict, smoothing)
    prices = price_grid(floor, ceiling, grid_size)
    seen_p: list[npt.NDArray[np.float64]] = []
    seen_m: list[npt.NDArray[np.float64]] = []
    best_i, score, mean, std = 0, np.zeros(0), np.zeros(0), np.zeros(0)
    for step in range(refine_passes + 1):
        probs = predict(prices)
        if not np.all(np.isfinite(probs)):
            return _fallback(floor, ceiling, fallback_price)
        score, mean, std = _objective(prices, probs, risk_aversion, extra_std, cost)
        seen_p.append(prices)
        seen_m.append(mean)
        best_i = int(np.argmax(score))
        if step < refine_passes:
            finer = _between_neighbours(prices, best_i, grid_size)
            if finer is None:
                break
            prices = finer
    price = float(prices[best_i])
    prob = float(mean[best_i])
    return Optimum(price, price * prob, prob, float(std[best_i]), _candidates(seen_p, seen_m))


def _check_search(smoothing: float, cost: float) -> None:
    """Raise :class:`QuoteError` for a smoothing outside ``[0, 1)`` or a negative or non-finite cost."""
    if not (math.isfinite(smoothing) and 0.0 <= smoothing < 1.0):
        raise QuoteError(field="smoothing", value=smoothing, expected="a fraction in [0, 1)")
    if not (math.isfinite(cost) and cost >= 0.0):
        raise QuoteError(field="cost", value=cost, expected="a finite opportunity cost >= 0")


def _between_neighbours(
    prices: npt.NDArray[np.float64], best_i: int, grid_size: int
) -> npt.NDArray[np.float64] | None:
    """The next pass's grid, strictly between the best candidate's neighbours (``None``: no room left)."""
    low, high = prices[max(best_i - 1, 0)], prices[min(best_i + 1, len(prices) - 1)]
    if high <= low:
        return None
    return price_grid(float(low), float(high), grid_size + 2)[1:-1]  # the ends are already scored


def _candidates(
    seen_p: list[npt.NDArray[np.float64]], seen_m: list[npt.NDArray[np.float64]]
) -> tuple[tuple[float, float], ...]:
    """Every ``(price, mean p(book))`` scored over the passes, sorted by price."""
    all_p = np.concatenate(seen_p)
    all_m = np.concatenate(seen_m)
    order = np.argsort(all_p, kind="stable")
    return tuple(zip(all_p[order].tolist(), all_m[order].tolist(), strict=True))


def _smoothed(predict: Predict, smoothing: float) -> Predict:
    if smoothing == 0.0:
        return predict
    factors = 1.0 + np.linspace(-smoothing, smoothing, SMOOTHING_POINTS)

    def smooth(prices: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        probs = np.asarray(predict(np.concatenate([prices * f for f in factors])), dtype=np.float64)
        return np.asarray(probs.reshape(len(factors), len(prices), -1).mean(axis=0), dtype=np.float64)

    return smooth


def _fallback(floor: float, ceiling: float, fallback_price: float | None) -> Optimum:
    price = math.sqrt(floor * ceiling) if fallback_price is None else fallback_price
    if not math.isfinite(price):
        price = floor
    price = min(max(price, floor), ceiling)
    return Optimum(price, 0.0, None, 0.0, (), fallback=True)
