"""A seeded training frame whose booking probability falls with price: enough for a light model with a bid price."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from pricing.vectorize import LIGHT_COLUMNS


def light_frame(n: int = 1500, *, seed: int = 1, base_rate: float = 150.0) -> pd.DataFrame:
    """``n`` rows of uniform inputs, prices from 60 to 500 (log-uniform), bookings at ``1 / (1 + (p / 220)^2.5)``."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.uniform(0, 1, size=(n, len(LIGHT_COLUMNS))), columns=list(LIGHT_COLUMNS))
    frame["price"] = np.exp(rng.uniform(math.log(60.0), math.log(500.0), n))
    frame["base_rate"] = base_rate
    frame["booked"] = (rng.random(n) < 1 / (1 + (frame["price"] / 220.0) ** 2.5)).astype(int)
    return frame
