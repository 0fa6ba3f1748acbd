"""The untimed fluid programme of a network of nights: shopper classes, the dual, and its minimiser.

The linear programme and its dual are laid out in :mod:`market.fluid` (which lays the market's
demand out as :class:`Classes` and re-exports everything here): :func:`dual` is ``g(pi)`` and its
gradient, a bound for any bid prices ``pi >= 0``, and :func:`solve` minimises it with L-BFGS-B.
:func:`respond` is every class's best price against a cost, which the timed programme
(:func:`market.fluid.solve_held`) shares.

Example:
    >>> one = Classes.single_night(lam=np.array([4.0]), a=np.array([2 * np.log(100.0)]), b=np.array([2.0]))
    >>> value, grad = dual(np.array([0.0]), np.array([100.0]), one)
    >>> round(value, 6), bool(grad[0] > 0)  # no bid: the myopic 4 x 100 x 1/2, rooms to spare
    (200.0, True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize

from market.dp import best_response
from market.errors import SimulatorError

Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Classes:
    """Shopper classes of the fluid programme, one entry each (see the module docstring)."""

    lam: Array
    a: Array
    b: Array
    weight: Array
    pay: Array
    first: npt.NDArray[np.int64]
    span: npt.NDArray[np.int64]
    lo: Array
    hi: Array
    lead_lo: Array | None = None
    lead_hi: Array | None = None
    cancel_odds: Array | None = None

    @classmethod
    def single_night(
        cls, *, lam: Array, a: Array, b: Array, weight: Array | None = None, pay: Array | None = None,
        lo: float = 0.0, hi: float = np.inf, lead_lo: Array | None = None, lead_hi: Array | None = None,
        cancel_odds: Array | None = None,
    ) -> Classes:
        """Classes that all hold night 0 only (the single-night programme of :mod:`market.dp`).

        ``lead_lo``/``lead_hi`` (days before check-in of each class's booking period) and ``cancel_odds``
        (cancelled / kept bookings) are for :func:`solve_held`.
        """
        n = len(lam)
        ones = np.ones(n)
        weight = ones if weight is None else np.asarray(weight, float)
        pay = ones if pay is None else np.asarray(pay, float)
        opt = [None if v is None else np.asarray(v, float) for v in (lead_lo, lead_hi, cancel_odds)]
        return cls(np.asarray(lam, float), np.asarray(a, float), np.asarray(b, float), weight, pay,
                   np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64), np.full(n, lo), np.full(n, hi), *opt)


@dataclass(frozen=True)
class FluidBound:
    """The bound (``value``), the bid price per room-night of every night (``bids``) and the solver's state."""

    value: float
    bids: Array
    evaluations: int
    converged: bool


def inner(pi: Array, cl: Classes) -> tuple[Array, Array]:
    """Per class ``(best price, q at it)`` against the bid of its nights, ``q = 0`` where no price pays."""
    cum = np.concatenate([[0.0], np.cumsum(pi)])
    return respond((cum[cl.first + cl.span] - cum[cl.first]) / cl.pay, cl)


def respond(cost: Array, cl: Classes) -> tuple[Array, Array]:
    """Per class ``(best price, q at it)`` against a cost per unit of price, ``q = 0`` where no price pays."""
    price, q = np.empty_like(cost), np.empty_like(cost)
    for b in np.unique(cl.b):
        k = cl.b == b
        p = best_response(cl.a[k], float(b), cost[k], lo=cl.lo[k], hi=cl.hi[k])
        price[k] = p
        q[k] = np.where(p > cost[k], 1.0 / (1.0 + np.exp(np.clip(b * np.log(p) - cl.a[k], -700.0, 700.0))), 0.0)
    return price, q


def dual(pi: Array, capacity: Array, cl: Classes) -> tuple[float, Array]:
    """``(g(pi), gradient)``: an upper bound on the LP optimum for any ``pi >= 0``."""
    price, q = inner(pi, cl)
    cum = np.concatenate([[0.0], np.cumsum(pi)])
    cost = (cum[cl.first + cl.span] - cum[cl.first]) / cl.pay
    sales = cl.lam * cl.weight * q
    value = float(capacity @ pi + np.sum(sales * cl.pay * (price - cost)))
    diff = np.zeros(len(capacity) + 1)
    np.add.at(diff, cl.first, sales)
    np.add.at(diff, cl.first + cl.span, -sales)
    return value, capacity - np.cumsum(diff)[:-1]


def solve(capacity: Array, classes: Classes, *, max_evaluations: int = 2000) -> FluidBound:
    """Minimise the dual over ``pi >= 0``; ``capacity[i]`` is night ``i``'s rooms (all classes' nights inside).

    Raises:
        SimulatorError: on negative capacity or a class holding nights outside ``capacity``.
    """
    capacity = np.asarray(capacity, dtype=float)
    if np.any(capacity < 0):
        raise SimulatorError(field="capacity", value=capacity.min(), expected="non-negative rooms per night")
    if len(classes.first) and (classes.first.min() < 0 or (classes.first + classes.span).max() > len(capacity)):
        raise SimulatorError(field="classes.first/span", value=int((classes.first + classes.span).max()),
                             expected=f"nights inside 0..{len(capacity) - 1}")
    scale = max(dual(np.zeros(len(capacity)), capacity, classes)[0], 1e-12)

    def fun(pi: Array) -> tuple[float, Array]:
        v, grad = dual(pi, capacity, classes)
        return v / scale, grad / scale

    top = float(np.max(classes.hi * classes.pay)) if np.all(np.isfinite(classes.hi)) else None
    res = minimize(fun, np.zeros(len(capacity)), jac=True, method="L-BFGS-B",
                   bounds=[(0.0, top)] * len(capacity), options={"maxfun": max_evaluations, "ftol": 1e-10})
    pi = np.maximum(np.asarray(res.x, dtype=float), 0.0)
    value = min(dual(pi, capacity, classes)[0], scale)  # g(0) is a bound too
    return FluidBound(value, pi if value < scale else np.zeros(len(capacity)), int(res.nfev), bool(res.success))
