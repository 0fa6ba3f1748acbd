"""Per-channel offsets of the pooled price response, shrunk toward the pool (partial pooling).

The pooled response (:mod:`pricing.price_response`) is one curve for every shopper, but
the channels carry different segments: corporate shoppers pay a premium (a higher
willingness to pay at the same price) and so sit higher on the sigmoid, where it is
flatter: at the base rate their local elasticity ``beta x (1 - sigmoid)`` is about half
the pool's. A request knows its channel, so channel ``k`` gets an intercept offset ``d_k``:

    P(book | price, k) = c x sigmoid(a(lead, night) + d_k - beta(lead) x log(price / base_rate))

with the pooled curve held fixed and ``d_k`` fitted per channel by maximum likelihood.
A tier takes its demand *level* from the model and only the *shape* from this curve
(:mod:`pricing.tiers`), so ``d_k`` acts through the shape: a positive offset flattens it.
An offset per channel is identified by the channel's booking level on prices explored
independently of the channel (the bench's frame: reference x lognormal, mean log price
per channel within +-0.02); a per-channel *elasticity* on the same labels is not (on city
seed 6 the joint fit puts corporate's elasticity at its bound and trades it with the
intercept: 3.16 from the labels, 0.82 from the true probabilities; see
``docs/revenue-management.md``, 2 December, late). A channel's ``d_k`` is still an
estimate with an error (corporate: ~400 of 12,000 views), so it is shrunk toward 0, the
pooled curve, by the normal-normal (empirical Bayes) rule

    d_k* = d_k x tau^2 / (tau^2 + v_k)

``v_k`` the sampling variance of ``d_k`` (inverse curvature of its likelihood), ``tau``
the prior spread of the channels' offsets (``PRIOR_SD``).

Example:
    >>> import numpy as np, pandas as pd
    >>> from pricing.price_response import fit_price_response
    >>> rng = np.random.default_rng(1)
    >>> n = 30_000
    >>> ratio = np.exp(rng.normal(0.0, 0.3, n))
    >>> code = rng.choice([0.0, 2.0, 5.0], n)  # web, ota, corporate
    >>> shift = np.where(code == 5.0, 1.2, 0.0)
    >>> p = 0.3 / (1.0 + np.exp(-(0.3 + shift - 3.0 * np.log(ratio))))
    >>> frame = pd.DataFrame({"price": 100.0 * ratio, "base_rate": 100.0, "channel_code": code,
    ...                       "booked": (rng.random(n) < p).astype(int)})
    >>> d = fit_channel_offsets(frame, fit_price_response(frame))
    >>> sorted(d), d["corporate"] > 0.5 + max(d["web"], d["ota"])
    (['corporate', 'ota', 'web'], True)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from events.models import CHANNELS
from pricing.price_response import PriceResponse, frame_column, frame_day_of_year

CHANNEL_MIN_ROWS = 150
"""Labelled views a channel needs (with ``CHANNEL_MIN_BOOKINGS`` bookings) before its offset is fitted."""
CHANNEL_MIN_BOOKINGS = 20
PRIOR_SD = 1.0
"""Prior spread of a channel's offset (log-odds): the segments' willingness to pay differs by up to ~2x, about 1 in
log-odds at the pool's elasticity. Fixed, not estimated: the spread of six channels' estimates, one of them far out,
is itself too noisy to set it (the method of moments put it at 0.4 on city seed 6 and shrank corporate's 1.9 to
0.4, at 0 on seed 7)."""
_D_BOUND = 4.0


def fit_channel_offsets(frame: pd.DataFrame, response: PriceResponse | None) -> dict[str, float]:
    """Shrunk intercept offset ``d_k`` per channel (``channel_code`` indexes ``CHANNELS``); empty if none fits.

    Channels with too few rows or bookings are left out (the tier uses the pooled curve for them).
    """
    if response is None or not {"price", "base_rate", "booked", "channel_code"} <= set(frame.columns):
        return {}
    price = frame["price"].to_numpy(dtype=np.float64)
    base = frame["base_rate"].to_numpy(dtype=np.float64)
    y = frame["booked"].to_numpy(dtype=np.float64)
    code = frame["channel_code"].to_numpy(dtype=np.float64)
    lead = frame_column(frame, "lead_time_days")
    doy = frame_day_of_year(frame)
    ok = np.isfinite(price) & np.isfinite(base) & (price > 0) & (base > 0) & np.isfinite(y) & np.isfinite(code)
    x = np.log(price[ok] / base[ok])
    z = np.array(
        [
            response.intercept(_opt(ld), _opt_int(dd)) - response.elasticity(_opt(ld)) * xi
            for ld, dd, xi in zip(lead[ok], doy[ok], x, strict=True)
        ]
    )
    y, code = y[ok], code[ok]
    raw: dict[str, tuple[float, float]] = {}
    for i, name in enumerate(CHANNELS):
        sel = code == float(i)
        if sel.sum() < CHANNEL_MIN_ROWS or y[sel].sum() < CHANNEL_MIN_BOOKINGS:
            continue
        fitted = _fit_one(y[sel], z[sel], response.c)
        if fitted is not None:
            raw[name] = fitted
    return shrink(raw)


def shrink(raw: Mapping[str, tuple[float, float]], *, prior_sd: float = PRIOR_SD) -> dict[str, float]:
    """``{channel: d x tau^2 / (tau^2 + v)}`` from ``{channel: (d, v)}``, ``tau = prior_sd`` (normal prior at 0).

    >>> d = shrink({"web": (0.0, 0.01), "ota": (-0.1, 0.01), "corporate": (1.5, 0.09)})
    >>> round(d["web"], 3), 1.3 < d["corporate"] < 1.4, -0.1 < d["ota"] < -0.09
    (0.0, True, True)
    """
    tau2 = prior_sd * prior_sd
    return {k: dk * tau2 / (tau2 + vk) for k, (dk, vk) in raw.items()}


def channel_offsets(value: Mapping[str, Any] | None) -> dict[str, float]:
    """The offsets stored in a bundle's ``meta.json`` (``{}`` if absent; malformed entries dropped)."""
    if not isinstance(value, Mapping):
        return {}
    out: dict[str, float] = {}
    for k, v in value.items():
        if k in CHANNELS and isinstance(v, int | float) and math.isfinite(v) and abs(v) <= _D_BOUND:
            out[str(k)] = float(v)
    return out


def _fit_one(y: npt.NDArray[np.float64], z: npt.NDArray[np.float64], c: float) -> tuple[float, float] | None:
    """``(d, var d)`` of one channel: the maximum-likelihood shift of the pooled curve and its inverse curvature."""
    from scipy.optimize import minimize_scalar

    def nll(d: float) -> float:
        p = np.clip(c / (1.0 + np.exp(-np.clip(z + d, -700.0, 700.0))), 1e-9, 1.0 - 1e-9)
        return -float(np.sum(y * np.log(p) + (1.0 - y) * np.log(1.0 - p)))

    fit = minimize_scalar(nll, bounds=(-_D_BOUND, _D_BOUND), method="bounded")
    d = float(fit.x)
    if not math.isfinite(d) or abs(d) >= _D_BOUND - 1e-3:
        return None
    step = 1e-3
    curvature = (nll(d + step) - 2.0 * nll(d) + nll(d - step)) / (step * step)
    return (d, 1.0 / curvature) if math.isfinite(curvature) and curvature > 0 else None


def _opt(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def _opt_int(v: float) -> int | None:
    return int(v) if math.isfinite(v) else None
