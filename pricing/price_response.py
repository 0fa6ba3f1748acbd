"""A pooled price response: how the booking probability falls with the price relative to the base rate.

A tree model learns the *level* of demand well (lead time, occupancy, pace,
competition) but its price response is a staircase that is flat past the
prices it was trained on, and on a few thousand labels it is often nearly flat
inside them too: the optimiser then runs to the ceiling, or stays at the
reference price whatever the inventory. The price response is one curve for
all keys, so it can be estimated pooled over every label of the training frame:

    P(book | price) = c x sigmoid(a - beta x log(price / base_rate))

fitted by maximum likelihood (``c``: the share of viewers who would book at
any price; ``a``: the log-odds at the base rate; ``beta``: the elasticity,
``> 1`` so that revenue has a maximum). A tier then takes the demand *level*
from its model at the base rate and the *shape* from this curve (see
:mod:`pricing.tiers`): monotone in price, and sensible past the trained range,
where the capacity-aware price of a scarce night often lies.

Example:
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> ratio = np.exp(rng.normal(0.0, 0.4, 20_000))
    >>> p = 0.3 / (1.0 + np.exp(-(0.5 - 2.5 * np.log(ratio))))
    >>> frame = pd.DataFrame({"price": 100.0 * ratio, "base_rate": 100.0,
    ...                       "booked": (rng.random(20_000) < p).astype(int)})
    >>> r = fit_price_response(frame)
    >>> 2.0 < r.beta < 3.0, 0.2 < r.c < 0.4
    (True, True)
    >>> float(r.shape(np.array([100.0, 200.0]), 100.0)[1]) < 0.5
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import pandas as pd

from pricing.errors import TrainingError

MIN_ROWS = 200
"""Fewer labels than this (or no booking, or no price spread) give no pooled response."""
BETA_RANGE = (1.05, 12.0)
"""Elasticity bounds: above 1, or the revenue-maximising price is the ceiling."""


class PriceResponse(NamedTuple):
    """``P(book | price) = c x sigmoid(a - beta x log(price / base_rate))``, pooled over keys."""

    c: float
    a: float
    beta: float

    def shape(self, prices: npt.ArrayLike, base_rate: float) -> npt.NDArray[np.float64]:
        """``sigmoid(a - beta x log(price / base_rate))`` per price (the level ``c`` left out)."""
        z = self.a - self.beta * np.log(np.asarray(prices, dtype=np.float64) / base_rate)
        return np.asarray(1.0 / (1.0 + np.exp(-np.clip(z, -700.0, 700.0))), dtype=np.float64)

    def to_json(self) -> dict[str, float]:
        return {"c": self.c, "a": self.a, "beta": self.beta}

    @classmethod
    def from_json(cls, value: Mapping[str, Any] | None) -> PriceResponse | None:
        """The response stored in a bundle's ``meta.json`` (``None`` if absent or malformed)."""
        if not isinstance(value, Mapping):
            return None
        try:
            c, a, beta = (float(value[k]) for k in ("c", "a", "beta"))
        except (KeyError, TypeError, ValueError):
            return None
        if not (0.0 < c <= 1.0 and math.isfinite(a) and BETA_RANGE[0] <= beta <= BETA_RANGE[1]):
            return None
        return cls(c, a, beta)


def fit_price_response(frame: pd.DataFrame) -> PriceResponse | None:
    """Maximum-likelihood pooled response from ``price``, ``base_rate``, ``booked`` (and ``weight``).

    ``None`` when the frame cannot identify it (fewer than ``MIN_ROWS`` usable rows, no booking,
    no price spread).

    Raises:
        TrainingError: if ``price``, ``base_rate`` or ``booked`` is missing.
    """
    from scipy.optimize import minimize

    missing = [c for c in ("price", "base_rate", "booked") if c not in frame.columns]
    if missing:
        raise TrainingError(field="frame.columns", value=missing, expected="price, base_rate and booked")
    price = frame["price"].to_numpy(dtype=np.float64)
    base = frame["base_rate"].to_numpy(dtype=np.float64)
    y = frame["booked"].to_numpy(dtype=np.float64)
    w = frame["weight"].to_numpy(dtype=np.float64) if "weight" in frame.columns else np.ones(len(y))
    ok = np.isfinite(price) & np.isfinite(base) & (price > 0) & (base > 0) & np.isfinite(y) & np.isfinite(w)
    x, y, w = np.log(price[ok] / base[ok]), y[ok], w[ok]
    if len(y) < MIN_ROWS or y.sum() <= 0 or np.ptp(x) <= 0.05 or w.sum() <= 0:
        return None
    w = w / w.mean()

    def nll(theta: npt.NDArray[np.float64]) -> float:
        c, a, beta = 1.0 / (1.0 + math.exp(-theta[0])), theta[1], theta[2]
        s = 1.0 / (1.0 + np.exp(-np.clip(a - beta * x, -700.0, 700.0)))
        p = np.clip(c * s, 1e-9, 1.0 - 1e-9)
        return -float(np.sum(w * (y * np.log(p) + (1.0 - y) * np.log(1.0 - p))))

    start = np.array([math.log(max(y.mean(), 1e-3) * 2.0 / max(1.0 - y.mean() * 2.0, 1e-3)), 0.0, 2.0])
    fit = minimize(nll, start, method="L-BFGS-B", bounds=[(-6.0, 8.0), (-8.0, 8.0), BETA_RANGE])
    if not np.all(np.isfinite(fit.x)):
        return None
    c = 1.0 / (1.0 + math.exp(-float(fit.x[0])))
    return PriceResponse(c, float(fit.x[1]), float(fit.x[2]))
