"""Physical bounds of features: a frame that breaks one is refused, naming feature, value and key.

Example:
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"hotel_id": ["h1"], "occupancy": [1.4], "bookings_24h": [2.0]})
    >>> check_frame(frame, keys=("hotel_id",))
    Traceback (most recent call last):
    ...
    features.errors.ImpossibleValueError: feature 'occupancy': got 1.4 for key {'hotel_id': 'h1'}, \
expected a share in [0, 1]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import MappingProxyType

import numpy as np
import pandas as pd

from events.catalog import ALL_FEATURES
from features.errors import ImpossibleValueError

_COUNT = ("a finite count >= 0", 0.0, math.inf, True)
_PRICE = ("a finite price > 0", 0.0, math.inf, False)
_SHARE = ("a share in [0, 1]", 0.0, 1.0, True)
_NONNEG = ("a finite number >= 0", 0.0, math.inf, True)
_RATIO = _NONNEG


def _rule(name: str) -> tuple[str, float, float, bool]:
    if name == "occupancy":
        return _SHARE
    if name in ("mean_price_shown_24h", "comp_rate_median_24h", "comp_rate_min_24h"):
        return _PRICE
    if name.startswith(("lead_time_", "booking_pace", "look_to_book")):
        return _RATIO
    return _COUNT  # searches, views, bookings, cancellations, rooms_left, capacity, hotel_*


BOUNDS: MappingProxyType[str, tuple[str, float, float, bool]] = MappingProxyType({n: _rule(n) for n in ALL_FEATURES})
"""feature -> (expectation, low, high, low inclusive); nulls are allowed (coverage reports them)."""


def check_frame(frame: pd.DataFrame, *, keys: Sequence[str]) -> None:
    """Raise on the first impossible value, in column order (nulls pass).

    Raises:
        ImpossibleValueError: naming the feature, the value and the row's ``keys``.
    """
    for name in frame.columns:
        if name not in BOUNDS:
            continue
        expected, low, high, low_inclusive = BOUNDS[name]
        values = frame[name].to_numpy(dtype=float, na_value=np.nan)
        present = ~np.isnan(values)
        above = values > low if not low_inclusive else values >= low
        ok = np.isfinite(values) & above & (values <= high)
        bad = np.flatnonzero(present & ~ok)
        if len(bad):
            i = int(bad[0])
            key = {k: _plain(frame[k].iloc[i]) for k in keys if k in frame.columns}
            raise ImpossibleValueError(name, float(values[i]), key, expected)


def _plain(value: object) -> object:
    return value.isoformat() if isinstance(value, pd.Timestamp) else value
