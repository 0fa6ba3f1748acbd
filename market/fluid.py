"""The deterministic fluid bound on revenue when stays hold every night: a network of nights.

The programme itself (:class:`Classes`, :func:`dual`, :func:`solve`) is in :mod:`market.fluid_lp`;
this module adds the timed variant (:func:`solve_held`) and lays the market's demand out.

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
inner maximum has one maximiser, :func:`market.dp.best_response`). So
:func:`solve` minimises ``g`` with L-BFGS-B and every value it returns is a bound:
no price grid, and ``pi`` are the network's bid prices per room-night.

:func:`fluid_bound` lays the market's true demand out this way for the window a
benchmark prices (``market.compare.run_window``): check-in nights
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

from market.errors import SimulatorError
from market.evaluate import static_policy
from market.fluid_lp import Array, Classes, FluidBound, dual, respond, solve
from market.generator import Simulation
from market.market import _GRID_RANGE, Market
from market.oracle import _Classes, intercepts

__all__ = [  # the untimed programme lives in market.fluid_lp; importable from here as before
    "CANCEL_SPAN", "HELD_EVALUATIONS", "HOLD_LEADS", "LEAD_EDGES", "MAX_NIGHTS", "TAIL", "Array", "Classes",
    "FluidBound", "Holding", "dual", "dual_held", "fluid_bound", "hold_share", "market_classes", "solve",
    "solve_held", "window_capacity",
]
_DAY_S = 86_400.0
LEAD_EDGES = (0.0, 1.0, 2.0, 3.0, 5.0, 7.0, 10.0, 14.0, 21.0, 30.0, 45.0, 60.0, 90.0, 135.0, 200.0, 300.0, 450.0, 730.0)
"""Lead-time periods (days) of the bound's classes: a day wide near arrival, where the last-minute premium moves
willingness to pay, wider beyond (only the competitor rate moves there)."""
MAX_NIGHTS = 60
TAIL = 1e-4
"""Stay lengths are kept up to the first whose tail share is below this (at most ``MAX_NIGHTS``, the simulator's)."""


HOLD_LEADS = (0.0, 1.0, 2.0, 4.0, 7.0, 14.0, 30.0)
"""Days before each night's check-in at which :func:`solve_held` caps the rooms held (0: at check-in, the rows of
:func:`solve`)."""
HELD_EVALUATIONS = 40
"""Dual evaluations of :func:`fluid_bound`'s held programme (from the untimed optimum; any point is a bound, and on
the resort's busiest room type 30 were within 0.1% of the optimum after 83)."""
CANCEL_SPAN = (0.05, 0.95)
"""A cancellation lands this share of the time from booking to check-in after the booking, uniformly
(``market.generator``)."""


def hold_share(lead: Array, booked: Array) -> Array:
    """Share of the bookings that will cancel still holding their rooms ``lead`` days before check-in.

    A booking made ``booked`` days ahead cancels at ``booked x (1 - u)`` days ahead, ``u`` uniform on
    ``CANCEL_SPAN``: it still holds ``lead`` days ahead when ``u > 1 - lead / booked``. Zero at check-in.

    Example:
        >>> hold_share(np.array([0.0, 5.0, 10.0, 30.0]), np.array([10.0, 10.0, 10.0, 10.0])).round(3).tolist()
        [0.0, 0.5, 1.0, 1.0]
    """
    lo, hi = CANCEL_SPAN
    x = np.divide(lead, booked, out=np.ones_like(np.asarray(lead, float)), where=np.asarray(booked) > 0)
    return np.clip((x - (1.0 - hi)) / (hi - lo), 0.0, 1.0)


@dataclass(frozen=True)
class Holding:
    """The timed capacity rows of :func:`solve_held`, per class group (classes that differ by stay length only).

    ``use[g, k, l]``: rooms held per kept room, ``HOLD_LEADS[l]`` days before night ``first[g] + k``'s check-in,
    by a booking of group ``g`` that covers that night (0 where not counted); ``group`` per class;
    ``capacity[i, l]`` the rooms night ``i`` can hold then (``nan``: no such row, the time is before the start).
    """

    group: npt.NDArray[np.int64]
    first: npt.NDArray[np.int64]
    use: Array
    capacity: Array

    @classmethod
    def of(cls, classes: Classes, capacity: Array, *, leads: tuple[float, ...] = HOLD_LEADS) -> Holding:
        """Rows from the classes' booking periods and cancel odds; ``capacity[i, l]`` the rooms (``nan``: no row).

        A row caps, at its time, the rooms held by bookings of the window: the kept ones and the cancelled
        ones not yet cancelled. A group is counted in a row only if its whole booking period is before the
        row's time, and its cancellers at the share still holding for the longest lead of the period
        (:func:`hold_share`): both undercount the rooms held, so every row is a true constraint on any
        policy's expected bookings and the programme stays a relaxation (a bound).

        Raises:
            SimulatorError: without the classes' booking periods and cancel odds, or on a capacity of the
                wrong shape.
        """
        if classes.lead_lo is None or classes.lead_hi is None or classes.cancel_odds is None:
            raise SimulatorError(field="classes.lead_lo/lead_hi/cancel_odds", value=None,
                                 expected="booking periods and cancel odds per class (market_classes sets them)")
        nights = int((classes.first + classes.span).max())
        capacity = np.asarray(capacity, dtype=float)
        if capacity.shape != (nights, len(leads)):
            raise SimulatorError(field="capacity", value=capacity.shape, expected=f"({nights}, {len(leads)})")
        keys = np.stack([classes.first.astype(float), classes.lead_lo, classes.lead_hi, classes.cancel_odds], 1)
        uniq, group = np.unique(keys, axis=0, return_inverse=True)
        span = int(classes.span.max())
        k = np.arange(span, dtype=float)[None, :, None]
        ell = np.asarray(leads, dtype=float)[None, None, :]
        lead_d = ell - k  # days before the group's own check-in at the row's time
        lo_l, hi_l, odds = (uniq[:, c, None, None] for c in (1, 2, 3))
        shape = np.broadcast_shapes(lead_d.shape, hi_l.shape)
        held = 1.0 + odds * hold_share(np.broadcast_to(np.maximum(lead_d, 0.0), shape), np.broadcast_to(hi_l, shape))
        use = np.where(lead_d < 0.0, 1.0, np.where(lo_l >= lead_d, held, 0.0))
        return cls(np.asarray(group, dtype=np.int64).ravel(), uniq[:, 0].astype(np.int64), use, capacity)


def dual_held(pi: Array, holding: Holding, cl: Classes) -> tuple[float, Array]:
    """``(g(pi), gradient)`` of the timed programme, ``pi[i, l]`` per row (flattened): a bound for any ``pi >= 0``."""
    rows = holding.capacity.shape
    pi2 = np.where(np.isnan(holding.capacity), 0.0, np.asarray(pi, dtype=float).reshape(rows))
    g_count, span = holding.use.shape[:2]
    pad = np.vstack([pi2, np.zeros((span, rows[1]))])
    night = holding.first[:, None] + np.arange(span)[None, :]  # (G, K)
    per = np.einsum("gkl,gkl->gk", holding.use, pad[night])  # cost of covering night first + k, per kept room
    cum = np.concatenate([np.zeros((g_count, 1)), np.cumsum(per, axis=1)], axis=1)
    cost = cum[holding.group, cl.span] / cl.pay
    price, q = respond(cost, cl)
    sales = cl.lam * cl.weight * q
    value = float(np.nansum(holding.capacity * pi2) + np.sum(sales * cl.pay * (price - cost)))
    # kept rooms per group still covering offset k: sales of its classes with span > k
    by_span = np.bincount(holding.group * (span + 1) + cl.span, weights=sales,
                          minlength=g_count * (span + 1)).reshape(g_count, span + 1)
    covering = by_span[:, ::-1].cumsum(axis=1)[:, ::-1][:, 1:]  # (G, K): sum over span > k
    flat = (holding.use * covering[:, :, None]).reshape(-1, rows[1])
    used = np.stack([np.bincount(night.ravel(), weights=flat[:, c], minlength=len(pad)) for c in range(rows[1])], 1)
    grad = np.where(np.isnan(holding.capacity), 0.0, holding.capacity - used[: rows[0]])
    return value, grad.ravel()


def solve_held(holding: Holding, classes: Classes, *, max_evaluations: int = 2000) -> FluidBound:
    """Minimise :func:`dual_held` over ``pi >= 0``: the fluid bound with cancelled bookings holding their rooms.

    ``bids`` are the multipliers per row, ``(nights, len(HOLD_LEADS))``. Example (one room, one class booking
    30-40 days ahead, half of it cancelling; a class booking 0-1 day ahead can resell the cancelled rooms):

        >>> one = Classes.single_night(lam=np.array([4.0]), a=np.array([2 * np.log(100.0)]), b=np.array([2.0]),
        ...     lead_lo=np.array([30.0]), lead_hi=np.array([40.0]), cancel_odds=np.array([1.0]))
        >>> cap = np.full((1, len(HOLD_LEADS)), 1.0)
        >>> held, free = solve_held(Holding.of(one, cap), one).value, solve(np.array([1.0]), one).value
        >>> bool(held < free), round(free, 2)
        (True, 173.21)
    """
    cap = holding.capacity
    scale = max(dual_held(np.zeros(cap.size), holding, classes)[0], 1e-12)
    # start from the check-in rows' own optimum (solve): the search can only go below the untimed bound
    x0 = np.zeros(cap.shape)
    x0[:, 0] = solve(cap[:, 0], classes, max_evaluations=max_evaluations).bids

    def fun(pi: Array) -> tuple[float, Array]:
        v, grad = dual_held(pi, holding, classes)
        return v / scale, grad / scale

    top = float(np.max(classes.hi * classes.pay)) if np.all(np.isfinite(classes.hi)) else None
    bounds = [(0.0, 0.0) if np.isnan(c) else (0.0, top) for c in cap.ravel()]
    res = minimize(fun, x0.ravel(), jac=True, method="L-BFGS-B", bounds=bounds,
                   options={"maxfun": max_evaluations, "ftol": 1e-12, "gtol": 1e-12, "maxcor": 30})
    pi = np.maximum(np.asarray(res.x, dtype=float), 0.0)
    value = min(dual_held(pi, holding, classes)[0], scale)
    return FluidBound(value, (pi if value < scale else np.zeros(cap.size)).reshape(cap.shape), int(res.nfev),
                      bool(res.success))


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
    cols: dict[str, list[npt.NDArray[Any]]] = {
        k: [] for k in ("lam", "a", "b", "weight", "pay", "first", "span", "lead_lo", "lead_hi", "cancel_odds")
    }
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
            _add_class(cols, cl, j, pmfs[s], lam[:, j], a[:, j], i, (lo_l, hi_l), cfg.stays_hold_nights)
    if not cols["lam"]:
        raise SimulatorError(field="days", value=days, expected="at least one night checking in after start")
    out = {k: np.concatenate(v) for k, v in cols.items()}
    size = out["lam"].size
    return Classes(out["lam"], out["a"], out["b"], out["weight"], out["pay"], out["first"], out["span"],
                   np.full(size, ref * _GRID_RANGE[0]), np.full(size, ref * _GRID_RANGE[1]),
                   out["lead_lo"], out["lead_hi"], out["cancel_odds"])


def _add_class(
    cols: dict[str, list[npt.NDArray[Any]]], cl: _Classes, j: int, pmf: Array, lam: Array, a: Array, night: int,
    periods: tuple[Array, Array], hold: bool,
) -> None:
    """Append shopper class ``j``'s columns of one check-in night: one entry per lead-time period x stay length."""
    n = np.arange(1, len(pmf) + 1)
    lo_l, hi_l = periods
    lam_jn = (lam[:, None] * pmf[None, :]).ravel()
    cols["lam"].append(lam_jn)
    cols["a"].append(np.repeat(a, len(pmf)))
    cols["b"].append(np.full(lam_jn.size, cl.b[j]))
    rooms = float(cl.rooms_pmf[j] @ np.arange(1, cl.rooms_pmf.shape[1] + 1))
    cols["weight"].append(np.full(lam_jn.size, cl.intent[j] * cl.keep[j] * rooms))
    held = np.tile(n, len(lo_l)) if hold else np.ones(lam_jn.size, dtype=np.int64)
    cols["pay"].append(np.tile(n, len(lo_l)).astype(float))
    cols["first"].append(np.full(lam_jn.size, night, dtype=np.int64))
    cols["span"].append(held.astype(np.int64))
    cols["lead_lo"].append(np.repeat(lo_l, len(pmf)))
    cols["lead_hi"].append(np.repeat(hi_l, len(pmf)))
    cols["cancel_odds"].append(np.full(lam_jn.size, (1.0 - cl.keep[j]) / max(cl.keep[j], 1e-9)))


def window_capacity(market: Market, *, start: datetime, days: int, seed: int, warmup_days: int) -> Simulation:
    """The simulation of ``run_window`` stopped at ``start``: its :meth:`Simulation.sellable` is the bound's rooms.

    Every policy prices the warm-up at the static price, so this state is the same for all of them.
    """
    sim = Simulation(market, start=start - timedelta(days=warmup_days),
                     duration=timedelta(days=warmup_days + days), policy=static_policy(market), rng_seed=seed)
    for event in sim:
        if event.event_time >= start:
            break
    return sim


def fluid_bound(
    market: Market, *, start: datetime, days: int, seed: int, warmup_days: int, held: bool = False
) -> float:
    """The fluid bound on the net revenue that ``run_window`` counts for this window and seed (see the module).

    ``held``: a booking that will cancel holds its rooms from booking to its cancellation, and the
    warm-up's cancellations give rooms back when they land, as in the simulator (:func:`solve_held`:
    the rooms held are capped ``HOLD_LEADS`` days before each check-in too); tighter, still a bound.

    Example:
        >>> from datetime import UTC, datetime
        >>> from market.presets import preset
        >>> m = Market(preset("city", hotels=1, horizon_days=30))
        >>> fluid_bound(m, start=datetime(2026, 5, 1, tzinfo=UTC), days=3, seed=0, warmup_days=1) > 0
        True
    """
    sim = window_capacity(market, start=start, days=days, seed=seed, warmup_days=warmup_days)
    sellable = sim.sellable()
    first = start.date().toordinal()
    total = 0.0
    for h in range(market.config.hotels):
        for r in range(len(market.config.room_types)):
            classes = market_classes(market, h, r, start=start, days=days)
            nights = int((classes.first + classes.span).max())
            cap = market.capacity_at(h, r)
            if not held:
                rooms = np.array([max(sellable.get((h, r, first + i), cap), 0) for i in range(nights)], dtype=float)
                total += solve(rooms, classes).value
                continue
            holding = Holding.of(classes, _held_rooms(market, sim, h, r, start, nights))
            total += solve_held(holding, classes, max_evaluations=HELD_EVALUATIONS).value
    return total


def _held_rooms(market: Market, sim: Simulation, h: int, r: int, start: datetime, nights: int) -> Array:
    """``rooms[i, l]``: what night ``i`` can hold ``HOLD_LEADS[l]`` days before its check-in (``nan`` before start)."""
    first, cap = start.date().toordinal(), market.capacity_at(h, r)
    t0_ms = int(round(start.timestamp() * 1000.0))
    now = sim.sellable(until_ms=t0_ms)
    back: dict[int, list[tuple[int, int]]] = {}
    for ms, (hh, rr, o), rooms in sim.returns():
        if hh == h and rr == r:
            back.setdefault(o, []).append((ms, rooms))
    out = np.full((nights, len(HOLD_LEADS)), np.nan)
    for i in range(nights):
        checkin = market.checkin_ts(first + i)
        left = now.get((h, r, first + i), cap)
        for col, lead in enumerate(HOLD_LEADS):
            at = int(round((checkin - lead * _DAY_S) * 1000.0))
            if col and at <= t0_ms:
                continue
            out[i, col] = max(left + sum(n for ms, n in back.get(first + i, []) if ms <= at), 0)
    return out
