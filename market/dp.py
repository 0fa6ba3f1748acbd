"""The revenue-management dynamic programme over rooms left and time, for logit demand in log price.

One stay night is sold over ``T`` periods. In period ``t`` a shopper of class
``j`` arrives at rate ``lam[t, j]`` (expected arrivals in the period; the
recursion is the first-order, one-arrival-per-period programme of Talluri &
van Ryzin, ch. 5, exact as the periods shrink). A shopper quoted ``p`` books with

    ``intent[j] * sigmoid(a[t, j] - b[j] * log(p))``

asking for ``k`` rooms with probability ``rooms_pmf[j, k - 1]`` for ``nights[j]``
nights, and keeps the booking with probability ``keep[j]`` (a cancelled
booking earns nothing and gives its rooms back at once). With ``V[t, x]`` the
expected revenue still to come with ``x`` rooms left at the start of period ``t``:

    ``V[t, x] = V[t+1, x] + sum_j lam[t, j] keep[j] intent[j]
    max_p sigmoid(a - b log p) W_j(x) (p - c_j(t, x))``

where ``W_j(x) = nights[j] * sum_{k <= x} pmf[k] k`` (room-nights a booking
uses) and ``c_j(t, x) = sum_{k <= x} pmf[k] (V[t+1, x] - V[t+1, x-k]) / W_j(x)``
is the bid price per room-night: the value of the rooms the booking takes.

For a logit in log price the inner maximum has a closed form up to one
monotone function: at the optimum ``s = sigmoid(a - b log p)`` solves
``logit(s) - b log(1 - 1 / (b (1 - s))) = a - b log c``, which is tabulated per
slope and inverted by interpolation, and then ``log p = (a - logit(s)) / b``.
With ``c = 0`` this is the myopic optimum, ``s = 1 - 1/b``. Every array may
carry leading batch axes (many nights at once).

Example:
    >>> import numpy as np
    >>> lam = np.ones((3, 1)); a = np.full((3, 1), 2 * np.log(100.0))
    >>> v = solve(capacity=2, lam=lam, a=a, b=np.array([2.0]), intent=np.ones(1),
    ...           rooms_pmf=np.ones((1, 1)), nights=np.ones(1), keep=np.ones(1))
    >>> round(float(v[2, 1]), 6), round(float(v[2, 2]), 6)  # last period: the myopic 100 x 1/2
    (50.0, 50.0)
    >>> bool(v[0, 2] > v[0, 1] > v[1, 1] > 0)
    True
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from market.errors import SimulatorError

Array = npt.NDArray[np.float64]
_TABLE_POINTS = 4001  # interpolation nodes of the optimality condition, per slope
_EDGE = 1e-9  # keeps the tabulated sigmoid values strictly inside their open interval


@functools.lru_cache(maxsize=64)
def _condition_table(b: float) -> tuple[Array, Array]:
    """``(F(s), s)`` on a logit-spaced grid of ``s`` in ``(0, 1 - 1/b)``, ``F`` increasing."""
    top = 1.0 - 1.0 / b
    z = np.linspace(-30.0, 30.0, _TABLE_POINTS)
    s = top / (1.0 + np.exp(-z))
    s = np.clip(s, _EDGE, top * (1.0 - _EDGE))
    f = np.log(s / (1.0 - s)) - b * np.log(1.0 - 1.0 / (b * (1.0 - s)))
    return f, s


def best_response(a: Array, b: float, cost: Array, *, lo: float = 0.0, hi: float = np.inf) -> Array:
    """The price maximising ``sigmoid(a - b log p) (p - cost)`` on ``[lo, hi]`` (elementwise, ``b > 1``).

    Example:
        >>> round(float(best_response(np.array(2 * np.log(100.0)), 2.0, np.array(0.0))), 6)
        100.0
    """
    if not b > 1.0:
        raise SimulatorError(field="b", value=b, expected="a logit slope > 1 (else revenue grows without bound)")
    f, s_tab = _condition_table(float(b))
    cost = np.asarray(cost, dtype=float)
    a = np.asarray(a, dtype=float)
    positive = cost > 0.0
    shifted = a - b * np.log(np.where(positive, cost, 1.0))
    s = np.where(positive, np.interp(shifted, f, s_tab), 1.0 - 1.0 / b)
    log_p = (a - np.log(s / (1.0 - s))) / b
    return np.asarray(np.clip(np.exp(log_p), lo, hi))


def _bid_prices(v_next: Array, pmf: Array, nights: float) -> tuple[Array, Array]:
    """``(W(x), c(x))`` for one class, from the values of the next period (last axis: rooms left)."""
    x_max = v_next.shape[-1] - 1
    weight = np.zeros(x_max + 1)
    lost = np.zeros_like(v_next)
    for k, q in enumerate(pmf, start=1):
        if q <= 0.0 or k > x_max:
            continue
        weight[k:] += q * k * nights
        lost[..., k:] += q * (v_next[..., k:] - v_next[..., :-k])
    cost = np.where(weight > 0.0, lost / np.where(weight > 0.0, weight, 1.0), 0.0)
    return weight, np.maximum(cost, 0.0)


def step(
    v_next: Array,
    *,
    lam: Array,
    a: Array,
    b: Array,
    intent: Array,
    rooms_pmf: Array,
    nights: Array,
    keep: Array,
    prices: Array | None = None,
    lo: float = 0.0,
    hi: float = np.inf,
    consume: Array | None = None,
    other: Array | None = None,
) -> Array:
    """One Bellman step: the values at the start of a period from those at its end.

    ``v_next`` is ``(..., X + 1)``; ``lam`` and ``a`` are ``(..., J)``. With
    ``prices`` (``(..., J)``) the step evaluates that fixed policy instead of
    maximising (same formula, price given). ``consume`` (``(J,)``, default ``keep``) is the
    probability that a booking's rooms count as gone: ``keep`` when a cancellation frees them at
    once, 1 when they stay held (a cancelled booking's rooms come back too late to resell).

    ``other`` (``(..., J, X + 1)``): a stay that holds every night it covers, decomposed by night
    (Talluri & van Ryzin, section 3.4): the bid price per room of the stay's other nights, so that a
    booking's value on this night is its displacement-adjusted revenue ``n p - (n - 1) other`` per
    room, less the rooms it takes here; per room-night the cost is ``(c + (n - 1) other) / n`` with
    ``c`` this night's. ``None``: a booking holds a room of this night only and pays ``n p``.
    """
    out = np.array(v_next, dtype=float, copy=True)
    for j in range(len(b)):
        weight, cost = _bid_prices(v_next, rooms_pmf[j], float(nights[j]))
        if other is not None:
            n = float(nights[j])
            cost = cost + (n - 1.0) / n * np.maximum(other[..., j, :], 0.0)
        if consume is not None:
            cost = cost * (consume[j] / keep[j])
        aj = a[..., j, None]
        if prices is None:
            p = best_response(aj, float(b[j]), cost, lo=lo, hi=hi)
        else:
            p = np.broadcast_to(prices[..., j, None], cost.shape)
        sig = 1.0 / (1.0 + np.exp(np.clip(b[j] * np.log(p) - aj, -700.0, 700.0)))
        scale = lam[..., j, None] * keep[j] * intent[j]
        out += scale * sig * weight * (p - cost)
    return out


def solve(
    *,
    capacity: int,
    lam: Array,
    a: Array,
    b: Array,
    intent: Array,
    rooms_pmf: Array,
    nights: Array,
    keep: Array,
    prices: Array | None = None,
    lo: float = 0.0,
    hi: float = np.inf,
    consume: Array | None = None,
    other: Callable[[int], Array] | None = None,
) -> Array:
    """Values ``V[..., t, x]`` for ``t = 0..T`` (``V[..., T, :] = 0``) and ``x = 0..capacity``.

    ``lam`` and ``a`` are ``(..., T, J)``; ``b``, ``intent``, ``nights``, ``keep``
    are ``(J,)``; ``rooms_pmf`` is ``(J, K)`` over ``k = 1..K`` rooms. With
    ``prices`` ``(..., T, J)`` the fixed policy is evaluated instead. ``other(t)`` gives
    :func:`step`'s ``other`` for period ``t`` (stays holding every night, decomposed by night).

    Raises:
        SimulatorError: on a negative capacity or mismatched shapes.
    """
    if capacity < 0:
        raise SimulatorError(field="capacity", value=capacity, expected="a non-negative room count")
    if lam.shape != a.shape or lam.shape[-1] != len(b):
        raise SimulatorError(field="lam/a", value=(lam.shape, a.shape), expected=f"equal shapes (..., T, {len(b)})")
    periods = lam.shape[-2]
    values = np.zeros((*lam.shape[:-2], periods + 1, capacity + 1))
    for t in range(periods - 1, -1, -1):
        values[..., t, :] = step(
            values[..., t + 1, :],
            lam=lam[..., t, :],
            a=a[..., t, :],
            b=b,
            intent=intent,
            rooms_pmf=rooms_pmf,
            nights=nights,
            keep=keep,
            prices=None if prices is None else prices[..., t, :],
            lo=lo,
            hi=hi,
            consume=consume,
            other=None if other is None else other(t),
        )
    return values


def quote(
    v_next: Array,
    x: int,
    *,
    a: float,
    b: float,
    rooms_pmf: Array,
    nights: float,
    lo: float = 0.0,
    hi: float = np.inf,
    held: float = 1.0,
) -> tuple[float, float]:
    """``(price, bid price per room-night)`` for one shopper with ``x`` rooms left, given next-period values.

    ``held`` is ``consume / keep`` of :func:`step` for the shopper's class (1: cancellations free rooms at once).

    Example:
        >>> v = np.array([0.0, 50.0, 50.0])  # one more sale worth 50 can still come
        >>> p, bid = quote(v, 1, a=2 * np.log(100.0), b=2.0, rooms_pmf=np.ones(1), nights=1.0)
        >>> bid, p > 100.0
        (50.0, True)
    """
    weight, cost = _bid_prices(np.asarray(v_next, dtype=float)[None, :], rooms_pmf, nights)
    bid = float(cost[0, x]) * held
    price = float(best_response(np.array(a), b, np.array(bid), lo=lo, hi=hi))
    return price, bid
