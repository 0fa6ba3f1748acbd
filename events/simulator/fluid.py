"""The deterministic fluid bound on revenue when stays hold every night: a network of nights.

A stay of ``n`` nights from check-in night ``d`` is a product that uses one room of
each of its nights (Talluri & van Ryzin, *The Theory and Practice of Revenue
Management*, 2004, section 3.3). Shopper class ``j`` (a check-in night, segment,
channel, stay length and lead-time period) comes ``lam[j]`` times in expectation,
books at price ``p`` with ``q_j(p) = sigmoid(a_j - b_j log p)`` and then holds
``weight[j]`` rooms (intent x rooms per booking x the share not cancelled) on each
night it covers, paying ``pay[j] x p`` per room kept. The deterministic linear
programme, with a class offered any mix of prices (the choice LP over the price
menu), is

    ``max sum_j lam_j weight_j sum_p x_jp q_j(p) pay_j p``
    ``s.t. sum_{j covers i} lam_j weight_j sum_p x_jp q_j(p) <= C_i``, ``sum_p x_jp <= 1``

and its optimum bounds the expected revenue of every policy from above: in
expectation a policy's sales satisfy the same constraints. Its dual,

    ``g(pi) = sum_i C_i pi_i + sum_j lam_j weight_j pay_j max(0, max_p q_j(p) (p - B_j(pi) / pay_j))``

with ``B_j`` the sum of the bid prices ``pi`` of the nights ``j`` holds, is at least
the LP optimum for *any* ``pi >= 0`` (weak duality), equals it at the minimum
(strong duality), and is smooth and convex in ``pi`` for a logit in log price (the
inner maximum has one maximiser, :func:`events.simulator.dp.best_response`). So
:func:`solve` minimises ``g`` with L-BFGS-B and every value it returns is a bound:
no price grid, and ``pi`` are the network's bid prices per room-night.

:func:`fluid_bound` lays the market's true demand out this way for the window a
benchmark prices (``events.simulator.compare.run_window``): check-in nights
``start .. start + days``, demand from ``start`` to check-in, each night's rooms the
ones left at ``start`` plus those its scheduled cancellations give back
(:meth:`Simulation.sellable`, the state after the warm-up at the static price that
every policy shares), and nights past the window with those rooms too (demand that
checks in later is left out: a relaxation). Approximations: demand within a
lead-time period is taken at its midpoint (``LEAD_EDGES``), the intra-day cycle
at its daily mean, stays longer than ``MAX_NIGHTS`` are left out (a share under
``TAIL``), and prices lie in the oracles' range (0.25-4x the reference price, as
every benchmarked policy's).

Example:
    >>> import numpy as np
    >>> one = Classes.single_night(lam=np.array([4.0]), a=np.array([2 * np.log(100.0)]), b=np.array([2.0]))
    >>> round(solve(np.array([100.0]), one).value, 6)  # rooms to spare: the myopic 4 x 100 x 1/2
    200.0
    >>> scarce = solve(np.array([1.0]), one)
    >>> round(scarce.value, 2), bool(scarce.bids[0] > 0)  # one room: the price at which 4 q(p) = 1, 100 x sqrt(3)
    (173.21, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize

from events.simulator.dp import best_response
from events.simulator.errors import SimulatorError
from events.simulator.evaluate import static_policy
from events.simulator.generator import Simulation
from events.simulator.market import _GRID_RANGE, Market
from events.simulator.oracle import _Classes, intercepts

Array = npt.NDArray[np.float64]
_DAY_S = 86_400.0
LEAD_EDGES = (0.0, 1.0, 2.0, 3.0, 5.0, 7.0, 10.0, 14.0, 21.0, 30.0, 45.0, 60.0, 90.0, 135.0, 200.0, 300.0, 450.0, 730.0)
"""Lead-time periods (days) of the bound's classes: a day wide near arrival, where the last-minute premium moves
willingness to pay, wider beyond (only the competitor rate moves there)."""
MAX_NIGHTS = 60
TAIL = 1e-4
"""Stay lengths are kept up to the first whose tail share is below this (at most ``MAX_NIGHTS``, the simulator's)."""


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

    @classmethod
    def single_night(
        cls, *, lam: Array, a: Array, b: Array, weight: Array | None = None, pay: Array | None = None,
        lo: float = 0.0, hi: float = np.inf,
    ) -> Classes:
        """Classes that all hold night 0 only (the single-night programme of :mod:`events.simulator.dp`)."""
        n = len(lam)
        ones = np.ones(n)
        weight = ones if weight is None else np.asarray(weight, float)
        pay = ones if pay is None else np.asarray(pay, float)
        return cls(np.asarray(lam, float), np.asarray(a, float), np.asarray(b, float), weight, pay,
                   np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64), np.full(n, lo), np.full(n, hi))


@dataclass(frozen=True)
class FluidBound:
    """The bound (``value``), the bid price per room-night of every night (``bids``) and the solver's state."""

    value: float
    bids: Array
    evaluations: int
    converged: bool


def _inner(pi: Array, cl: Classes) -> tuple[Array, Array]:
    """Per class ``(best price, q at it)`` against the bid of its nights, ``q = 0`` where no price pays."""
    cum = np.concatenate([[0.0], np.cumsum(pi)])
    cost = (cum[cl.first + cl.span] - cum[cl.first]) / cl.pay
    price, q = np.empty_like(cost), np.empty_like(cost)
    for b in np.unique(cl.b):
        k = cl.b == b
        p = best_response(cl.a[k], float(b), cost[k], lo=cl.lo[k], hi=cl.hi[k])
        price[k] = p
        q[k] = np.where(p > cost[k], 1.0 / (1.0 + np.exp(np.clip(b * np.log(p) - cl.a[k], -700.0, 700.0))), 0.0)
    return price, q


def dual(pi: Array, capacity: Array, cl: Classes) -> tuple[float, Array]:
    """``(g(pi), gradient)``: an upper bound on the LP optimum for any ``pi >= 0``."""
    price, q = _inner(pi, cl)
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


def _nights_pmf(nights_mean: float) -> Array:
    """The simulator's stay lengths (1 + geometric, capped at 60), truncated where the tail is under ``TAIL``."""
    q = 1.0 - 1.0 / nights_mean
    if q <= 0.0:
        return np.ones(1)
    n = np.arange(1, MAX_NIGHTS + 1)
    pmf = (1.0 - q) * q ** (n - 1)
    pmf[-1] += q**MAX_NIGHTS
    keep = int(np.searchsorted(np.cumsum(pmf), 1.0 - TAIL)) + 1
    return pmf[: min(keep, MAX_NIGHTS)]


def market_classes(market: Market, h: int, r: int, *, start: datetime, days: int) -> Classes:
    """The true demand from ``start`` of the nights checking in during ``days`` after it, night 0 = ``start``'s."""
    cl = _Classes.of(market)
    cfg = market.config
    seg = np.asarray(cl.segment)
    pmfs = [_nights_pmf(s.nights_mean) for s in cfg.segments]
    lead_mean, norm = market.seg_lead_mean, 1.0 - np.exp(-cfg.horizon_days / market.seg_lead_mean)
    ref = market.reference_at(h, r)
    t0, first = start.timestamp(), start.date().toordinal()
    cols: dict[str, list[npt.NDArray[Any]]] = {k: [] for k in ("lam", "a", "b", "weight", "pay", "first", "span")}
    for i in range(days):
        o = first + i
        top = min((market.checkin_ts(o) - t0) / _DAY_S, float(cfg.horizon_days))
        if top <= 0.0:
            continue
        edges = np.array([e for e in LEAD_EDGES if e < top] + [top])
        lo_l, hi_l = edges[:-1], edges[1:]
        mid = (lo_l + hi_l) / 2.0
        mass = (np.exp(-lo_l[:, None] / lead_mean) - np.exp(-hi_l[:, None] / lead_mean)) / norm  # (P, segments)
        per_seg = mass * np.asarray(market.night_factors(h, r, o)) * 24.0
        lam = per_seg[:, seg] * cl.share * cfg.view_prob  # (P, J)
        a = intercepts(market, cl, h, r, o, mid, market.checkin_ts(o) - mid * _DAY_S)
        for j, s in enumerate(cl.segment):
            pmf = pmfs[s]
            n = np.arange(1, len(pmf) + 1)
            lam_jn = (lam[:, j, None] * pmf[None, :]).ravel()
            cols["lam"].append(lam_jn)
            cols["a"].append(np.repeat(a[:, j], len(pmf)))
            cols["b"].append(np.full(lam_jn.size, cl.b[j]))
            rooms = float(cl.rooms_pmf[j] @ np.arange(1, cl.rooms_pmf.shape[1] + 1))
            cols["weight"].append(np.full(lam_jn.size, cl.intent[j] * cl.keep[j] * rooms))
            held = np.tile(n, len(mid)) if cfg.stays_hold_nights else np.ones(lam_jn.size, dtype=np.int64)
            cols["pay"].append(np.tile(n, len(mid)).astype(float))
            cols["first"].append(np.full(lam_jn.size, i, dtype=np.int64))
            cols["span"].append(held.astype(np.int64))
    if not cols["lam"]:
        raise SimulatorError(field="days", value=days, expected="at least one night checking in after start")
    out = {k: np.concatenate(v) for k, v in cols.items()}
    size = out["lam"].size
    return Classes(out["lam"], out["a"], out["b"], out["weight"], out["pay"], out["first"], out["span"],
                   np.full(size, ref * _GRID_RANGE[0]), np.full(size, ref * _GRID_RANGE[1]))


def window_capacity(market: Market, *, start: datetime, days: int, seed: int, warmup_days: int) -> Simulation:
    """The simulation of ``run_window`` stopped at ``start``: its :meth:`Simulation.sellable` is the bound's rooms.

    Every policy prices the warm-up at the static price, so this state is the same for all of them.
    """
    sim = Simulation(market, start=start - timedelta(days=warmup_days),
                     duration=timedelta(days=warmup_days + days), policy=static_policy(market), rng_seed=seed)
    for event in sim:
        if event.event_time >= start:  # type: ignore[attr-defined]
            break
    return sim


def fluid_bound(market: Market, *, start: datetime, days: int, seed: int, warmup_days: int) -> float:
    """The fluid bound on the net revenue that ``run_window`` counts for this window and seed (see the module).

    Example:
        >>> from datetime import UTC, datetime
        >>> from events.simulator.presets import preset
        >>> m = Market(preset("city", hotels=1, horizon_days=30))
        >>> fluid_bound(m, start=datetime(2026, 5, 1, tzinfo=UTC), days=3, seed=0, warmup_days=1) > 0
        True
    """
    sellable = window_capacity(market, start=start, days=days, seed=seed, warmup_days=warmup_days).sellable()
    first = start.date().toordinal()
    total = 0.0
    for h in range(market.config.hotels):
        for r in range(len(market.config.room_types)):
            classes = market_classes(market, h, r, start=start, days=days)
            nights = int((classes.first + classes.span).max())
            cap = market.capacity_at(h, r)
            rooms = np.array([max(sellable.get((h, r, first + i), cap), 0) for i in range(nights)], dtype=float)
            total += solve(rooms, classes).value
    return total
