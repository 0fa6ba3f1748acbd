"""A tiny seeded demand simulator with a known answer, for tests and benchmarks.

Not the market simulator (that lives in ``market``): one logistic
demand curve in log price with a known elasticity, so the revenue-optimal
price has a closed form. With ``p = sigmoid(c - e log(price))`` revenue
``price x p`` peaks where ``p = 1 - 1/e``, i.e. at
``price* = exp((c - log(e - 1)) / e)`` (for ``e > 1``).

Example:
    >>> frame = training_frame(200, seed=1)
    >>> {"price", "booked", "occupancy"} <= set(frame.columns), len(frame)
    (True, 200)
    >>> round(optimal_price(intercept=10.0, elasticity=2.0), 2)
    148.41
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from events.catalog import ALL_FEATURES, REQUEST_FEATURES

ELASTICITY = 2.0
"""Known price elasticity of the synthetic demand (log-odds per unit log price)."""
REFERENCE_PRICE = 150.0
MISSING_SHARE = 0.05
"""Share of each stored feature set to NaN, so the models learn a missing-value branch."""


def demand_logit(frame: pd.DataFrame, *, elasticity: float = ELASTICITY) -> NDArray[Any]:
    """True booking log-odds: occupancy and recent bookings raise demand, price lowers it."""
    occ = frame["occupancy"].astype(float).fillna(0.5).to_numpy()
    bookings = frame["bookings_24h"].astype(float).fillna(2.0).to_numpy()
    lead = frame["lead_time_days"].to_numpy()
    weekend = frame["stay_dow"].isin([4.0, 5.0]).to_numpy()
    intercept = elasticity * math.log(REFERENCE_PRICE) + 1.2 * (occ - 0.5) + 0.08 * (bookings - 2) - 0.004 * lead
    intercept = intercept + 0.3 * weekend
    return np.asarray(intercept - elasticity * np.log(frame["price"].to_numpy()))


def optimal_price(*, intercept: float, elasticity: float = ELASTICITY) -> float:
    """Revenue-maximising price of ``sigmoid(intercept - elasticity log price)``."""
    return math.exp((intercept - math.log(elasticity - 1.0)) / elasticity)


def training_frame(n: int = 5000, *, seed: int = 0, elasticity: float = ELASTICITY) -> pd.DataFrame:
    """``n`` seeded rows with every model input (``ALL_FEATURES + REQUEST_FEATURES``, ``base_rate``) and ``booked``."""
    rng = np.random.default_rng(seed)
    data: dict[str, NDArray[Any]] = {name: rng.gamma(2.0, 3.0, n) for name in ALL_FEATURES}
    capacity = rng.integers(20, 120, n).astype(float)
    occ = rng.beta(2.0, 2.0, n)
    data.update(
        capacity=capacity,
        occupancy=occ,
        rooms_left=np.round(capacity * (1 - occ)),
        bookings_24h=rng.poisson(2.0, n).astype(float),
        views_24h=rng.poisson(40.0, n).astype(float),
        comp_rate_median_24h=REFERENCE_PRICE * rng.lognormal(0.0, 0.15, n),
        look_to_book_7d=rng.uniform(10, 60, n),
    )
    for name in ALL_FEATURES:
        data[name] = np.where(rng.random(n) < MISSING_SHARE, np.nan, data[name])
    data["price"] = REFERENCE_PRICE * rng.lognormal(0.0, 0.35, n)
    data["lead_time_days"] = rng.integers(0, 120, n).astype(float)
    data["nights"] = rng.integers(1, 6, n).astype(float)
    data["stay_dow"] = rng.integers(0, 7, n).astype(float)
    data["channel_code"] = rng.integers(0, 6, n).astype(float)
    frame = pd.DataFrame({name: data[name] for name in (*REQUEST_FEATURES, *ALL_FEATURES)})
    frame["base_rate"] = REFERENCE_PRICE  # the rules' base rate: one room type at one price level
    p = 1.0 / (1.0 + np.exp(-demand_logit(frame, elasticity=elasticity)))
    frame["booked"] = (rng.random(n) < p).astype(np.int64)
    return frame
