"""A pooled price response: how the booking probability falls with the price relative to the base rate.

A tree model learns the *level* of demand well (lead time, occupancy, pace,
competition) but its price response is a staircase that is flat past the
prices it was trained on, and on a few thousand labels it is often nearly flat
inside them too: the optimiser then runs to the ceiling, or stays at the
reference price whatever the inventory. The price response is one curve for
all keys, so it can be estimated pooled over every label of the training frame:

    P(book | price) = c x sigmoid(a(lead, night) - beta(lead) x log(price / base_rate))

fitted by maximum likelihood (``c``: the share of viewers who would book at
any price; ``a``: the log-odds at the base rate; ``beta``: the elasticity,
``> 1`` so that revenue has a maximum). A tier then takes the demand *level*
from its model at the base rate and the *shape* from this curve (see
:mod:`pricing.tiers`): monotone in price, and sensible past the trained range,
where the capacity-aware price of a scarce night often lies.

Both ``a`` and ``beta`` move with the lead time, through ``g_k = exp(-lead /
LEAD_SCALES[k])``: near arrival the shoppers are business and direct ones, who
pay a premium and respond less to price. A training window of a few weeks sees
its near-arrival nights in one season only, so a lead term fitted alone takes
the season instead (at the resort, trained on March-April, the near nights are
low season and it priced them at 0.7x). The night's season therefore enters
``a`` as one annual harmonic of the stay date's day of year (``season``):
the far-ahead rows cover the whole year, which pins the season down, and the
lead terms keep what the season does not explain.

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
    >>> r.a_lead, r.season  # no lead time or stay date in the frame: neither term is fitted
    ((0.0, 0.0), (0.0, 0.0))
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
LEAD_SCALES = (7.0, 30.0)
"""E-folding lead times (days) of the two lead terms: a week, the last-minute window in which business shoppers
book and pay a premium; a month, over which the mix moves from agents and groups to direct and corporate
shoppers."""
LEAD_MIN_ROWS = 100
"""Rows needed both under ``LEAD_SCALES[0]`` days and over ``LEAD_SCALES[1]`` days before the lead terms are fitted."""
SEASON_MIN_MONTHS = 10
"""Distinct months of stay dates needed before the season harmonic is fitted (else it is the lead in disguise)."""
_YEAR_DAYS = 365.25
_LEAD_BOUND = 8.0
_SEASON_BOUND = 4.0


class PriceResponse(NamedTuple):
    """``P(book | price) = c x sigmoid(a(lead, night) - beta(lead) x log(price / base_rate))``, pooled over keys.

    ``a(lead, night) = a + a_lead . g(lead) + season . (cos, sin)(2 pi doy / 365.25)`` and
    ``beta(lead) = beta + beta_lead . g(lead)`` (held in ``BETA_RANGE``), ``g_k = exp(-lead / LEAD_SCALES[k])``.
    """

    c: float
    a: float
    beta: float
    a_lead: tuple[float, float] = (0.0, 0.0)
    beta_lead: tuple[float, float] = (0.0, 0.0)
    season: tuple[float, float] = (0.0, 0.0)

    def elasticity(self, lead_days: float | None = None) -> float:
        """``beta`` at a lead time (``None``: far from arrival, the lead terms at 0)."""
        g = _lead_terms(lead_days)
        beta = self.beta + self.beta_lead[0] * g[0] + self.beta_lead[1] * g[1]
        return min(max(beta, BETA_RANGE[0]), BETA_RANGE[1])

    def intercept(self, lead_days: float | None = None, day_of_year: int | None = None) -> float:
        """``a`` at a lead time and a stay night's day of year (``None``: that term at 0)."""
        g = _lead_terms(lead_days)
        a = self.a + self.a_lead[0] * g[0] + self.a_lead[1] * g[1]
        if day_of_year is not None:
            angle = 2.0 * math.pi * day_of_year / _YEAR_DAYS
            a += self.season[0] * math.cos(angle) + self.season[1] * math.sin(angle)
        return a

    def shape(
        self,
        prices: npt.ArrayLike,
        base_rate: float,
        *,
        lead_days: float | None = None,
        day_of_year: int | None = None,
        offset: float = 0.0,
    ) -> npt.NDArray[np.float64]:
        """``sigmoid(a(lead, night) + offset - beta(lead) x log(price / base_rate))`` per price (``c`` left out).

        ``offset``: a channel's shift of the intercept (:mod:`pricing.channel_response`), 0 for the pooled curve.
        """
        a, beta = self.intercept(lead_days, day_of_year) + offset, self.elasticity(lead_days)
        z = a - beta * np.log(np.asarray(prices, dtype=np.float64) / base_rate)
        return np.asarray(1.0 / (1.0 + np.exp(-np.clip(z, -700.0, 700.0))), dtype=np.float64)

    def to_json(self) -> dict[str, float]:
        return {"c": self.c, "a": self.a, "beta": self.beta, "a_lead_7": self.a_lead[0], "a_lead_30": self.a_lead[1],
                "beta_lead_7": self.beta_lead[0], "beta_lead_30": self.beta_lead[1],
                "season_cos": self.season[0], "season_sin": self.season[1]}

    @classmethod
    def from_json(cls, value: Mapping[str, Any] | None) -> PriceResponse | None:
        """The response stored in a bundle's ``meta.json`` (``None`` if absent or malformed).

        A bundle written before the lead and season terms has none of their keys: they are 0.
        """
        if not isinstance(value, Mapping):
            return None
        try:
            c, a, beta = (float(value[k]) for k in ("c", "a", "beta"))
            extra = [float(value.get(k, 0.0)) for k in _EXTRA_KEYS]
        except (KeyError, TypeError, ValueError):
            return None
        if not (0.0 < c <= 1.0 and math.isfinite(a) and BETA_RANGE[0] <= beta <= BETA_RANGE[1]):
            return None
        if not all(math.isfinite(v) for v in extra):
            return None
        return cls(c, a, beta, (extra[0], extra[1]), (extra[2], extra[3]), (extra[4], extra[5]))


_EXTRA_KEYS = ("a_lead_7", "a_lead_30", "beta_lead_7", "beta_lead_30", "season_cos", "season_sin")


def _lead_terms(lead_days: float | None) -> tuple[float, float]:
    if lead_days is None or not math.isfinite(lead_days):
        return (0.0, 0.0)
    lead = max(float(lead_days), 0.0)
    return (math.exp(-lead / LEAD_SCALES[0]), math.exp(-lead / LEAD_SCALES[1]))


def fit_price_response(frame: pd.DataFrame, *, lead: bool = True, season: bool = True) -> PriceResponse | None:
    """Maximum-likelihood pooled response from ``price``, ``base_rate``, ``booked`` (and ``weight``).

    With ``lead_time_days`` (rows both near and far from arrival: ``LEAD_MIN_ROWS``) the lead terms are
    fitted, with ``stay_date`` covering ``SEASON_MIN_MONTHS`` months the season harmonic; else, or with
    ``lead`` / ``season`` off, they are 0.
    ``None`` when the frame cannot identify the curve (fewer than ``MIN_ROWS`` usable rows, no booking,
    no price spread).

    Raises:
        TrainingError: if ``price``, ``base_rate`` or ``booked`` is missing.
    """
    missing = [c for c in ("price", "base_rate", "booked") if c not in frame.columns]
    if missing:
        raise TrainingError(field="frame.columns", value=missing, expected="price, base_rate and booked")
    price = frame["price"].to_numpy(dtype=np.float64)
    base = frame["base_rate"].to_numpy(dtype=np.float64)
    y = frame["booked"].to_numpy(dtype=np.float64)
    w = frame["weight"].to_numpy(dtype=np.float64) if "weight" in frame.columns else np.ones(len(y))
    lead_days = frame_column(frame, "lead_time_days")
    doy = frame_day_of_year(frame)
    ok = np.isfinite(price) & np.isfinite(base) & (price > 0) & (base > 0) & np.isfinite(y) & np.isfinite(w)
    x, y, w = np.log(price[ok] / base[ok]), y[ok], w[ok]
    if len(y) < MIN_ROWS or y.sum() <= 0 or np.ptp(x) <= 0.05 or w.sum() <= 0:
        return None
    lead_days, doy = lead_days[ok], doy[ok]
    near, far = np.sum(lead_days < LEAD_SCALES[0]), np.sum(lead_days > LEAD_SCALES[1])
    use_lead = lead and bool(near >= LEAD_MIN_ROWS and far >= LEAD_MIN_ROWS)
    use_season = season and _months(doy) >= SEASON_MIN_MONTHS
    g = np.exp(-np.maximum(np.nan_to_num(lead_days, nan=np.inf), 0.0)[:, None] / np.array(LEAD_SCALES))
    angle = 2.0 * math.pi * np.nan_to_num(doy, nan=0.0) / _YEAR_DAYS
    harm = np.where(np.isfinite(doy)[:, None], np.stack([np.cos(angle), np.sin(angle)], axis=1), 0.0)
    theta = _maximise(x, y, w / w.mean(), g if use_lead else None, harm if use_season else None)
    if theta is None:
        return None
    c = 1.0 / (1.0 + math.exp(-float(theta[0])))
    t = [float(v) for v in theta]
    return PriceResponse(c, t[1], t[2], (t[3], t[4]), (t[5], t[6]), (t[7], t[8]))


def _maximise(
    x: npt.NDArray[np.float64],
    y: npt.NDArray[np.float64],
    w: npt.NDArray[np.float64],
    g: npt.NDArray[np.float64] | None,
    harm: npt.NDArray[np.float64] | None,
) -> npt.NDArray[np.float64] | None:
    """``(logit c, a, beta, a_lead x2, beta_lead x2, season x2)`` by L-BFGS-B; unused terms pinned at 0."""
    from scipy.optimize import minimize

    g0 = np.zeros((len(x), 2)) if g is None else g
    h0 = np.zeros((len(x), 2)) if harm is None else harm

    def nll(theta: npt.NDArray[np.float64]) -> float:
        c = 1.0 / (1.0 + math.exp(-theta[0]))
        a = theta[1] + g0 @ theta[3:5] + h0 @ theta[7:9]
        beta = np.clip(theta[2] + g0 @ theta[5:7], *BETA_RANGE)
        s = 1.0 / (1.0 + np.exp(-np.clip(a - beta * x, -700.0, 700.0)))
        p = np.clip(c * s, 1e-9, 1.0 - 1e-9)
        return -float(np.sum(w * (y * np.log(p) + (1.0 - y) * np.log(1.0 - p))))

    mean = y.mean()
    start = np.zeros(9)
    start[0], start[2] = math.log(max(mean, 1e-3) * 2.0 / max(1.0 - mean * 2.0, 1e-3)), 2.0
    lead_b = (-_LEAD_BOUND, _LEAD_BOUND) if g is not None else (0.0, 0.0)
    season_b = (-_SEASON_BOUND, _SEASON_BOUND) if harm is not None else (0.0, 0.0)
    bounds = [(-6.0, 8.0), (-8.0, 8.0), BETA_RANGE, lead_b, lead_b, lead_b, lead_b, season_b, season_b]
    fit = minimize(nll, start, method="L-BFGS-B", bounds=bounds)
    return np.asarray(fit.x, dtype=np.float64) if np.all(np.isfinite(fit.x)) else None


def frame_column(frame: pd.DataFrame, name: str) -> npt.NDArray[np.float64]:
    """``frame[name]`` as floats (unparsable values and a missing column: NaN)."""
    if name not in frame.columns:
        return np.full(len(frame), np.nan)
    return np.asarray(pd.to_numeric(frame[name], errors="coerce"), dtype=np.float64)


def frame_day_of_year(frame: pd.DataFrame) -> npt.NDArray[np.float64]:
    """The day of year of ``frame["stay_date"]`` as floats (NaN where unparsable or missing)."""
    if "stay_date" not in frame.columns:
        return np.full(len(frame), np.nan)
    days = pd.to_datetime(frame["stay_date"], errors="coerce").dt.dayofyear
    return np.asarray(days.astype("float64"), dtype=np.float64)


def _months(doy: npt.NDArray[np.float64]) -> int:
    known = doy[np.isfinite(doy)]
    return len(np.unique(np.minimum((known - 1.0) // (_YEAR_DAYS / 12.0), 11.0))) if len(known) else 0
