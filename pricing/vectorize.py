"""Request + features -> float32 model matrix, one row per candidate price.

Column order is part of a model bundle (``meta.json`` stores it). ``price`` is
always column 0. Besides it, the *relative* price columns of
:data:`PRICE_RATIOS` depend on the candidate price: ``price / base_rate`` (the
rules' base rate of the room, which the scorer adds to the features) and
``price / comp_rate_median_24h``. Hotels and room types differ in price level,
so a raw price alone does not say whether a quote is cheap for *this* room; a
tree model cannot divide, so the ratio is given to it. A price grid rewrites
column 0 and the ratio columns; the rest of the row is prepared once per
request. Missing features (``None``) become NaN, which LightGBM and the ONNX
tree ensemble route down their learned missing-value branch (a ratio is NaN
when its reference is missing or not positive).

Example:
    >>> from datetime import date, datetime, timezone
    >>> import numpy as np
    >>> from events.models import PricingRequest
    >>> req = PricingRequest(hotel_id="h1", room_type="std", stay_date=date(2026, 12, 24),
    ...                      event_time=datetime(2026, 12, 1, tzinfo=timezone.utc), channel="ota")
    >>> m = model_matrix(req, {"occupancy": 0.8}, np.array([90.0, 110.0]), columns=LIGHT_COLUMNS)
    >>> m.shape, m.dtype, m[:, 0].tolist(), float(m[0, 1])
    ((2, 14), dtype('float32'), [90.0, 110.0], 23.0)
    >>> req_features = {"occupancy": 0.8, "base_rate": 100.0}
    >>> m = model_matrix(req, req_features, np.array([90.0, 110.0]), columns=LIGHT_COLUMNS)
    >>> [round(float(v), 2) for v in m[:, LIGHT_COLUMNS.index("price_to_base_rate")]]
    [0.9, 1.1]
    >>> bool(np.isnan(m[0, LIGHT_COLUMNS.index("bookings_24h")]))
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from events.catalog import ALL_FEATURES, REQUEST_FEATURES
from events.models import CHANNELS, PricingRequest
from pricing.rules import lead_time_days

LIGHT_COLUMNS: tuple[str, ...] = (
    "price",
    "lead_time_days",
    "stay_dow",
    "occupancy",
    "rooms_left",
    "bookings_24h",
    "views_24h",
    "comp_rate_median_24h",
    "booking_pace_7d",
    "look_to_book_7d",
    "channel_code",
    "base_rate",
    "price_to_base_rate",
    "price_to_comp_rate",
)
"""The strongest demand signals: price (absolute and relative), timing, inventory pressure, demand, competition."""

BASE_RATE = "base_rate"
"""The rules' base rate of the request's (hotel, room type, channel): the room's reference price level."""

PRICE_RATIOS: dict[str, str] = {"price_to_base_rate": BASE_RATE, "price_to_comp_rate": "comp_rate_median_24h"}
"""Derived column -> its reference column: the column is ``price / reference``."""

HEAVY_COLUMNS: tuple[str, ...] = (
    ("price",) + tuple(c for c in REQUEST_FEATURES if c != "price") + ALL_FEATURES + (BASE_RATE, *PRICE_RATIOS)
)
"""Every request-side input, every catalogue feature, the base rate and the relative prices, price first."""


def input_columns(columns: Sequence[str]) -> tuple[str, ...]:
    """The columns a frame must hold for ``columns``: the derived relative prices need only their references.

    Example:
        >>> input_columns(["price", "price_to_base_rate", "occupancy"])
        ('price', 'occupancy', 'base_rate')
    """
    plain = [c for c in columns if c not in PRICE_RATIOS]
    refs = [PRICE_RATIOS[c] for c in columns if c in PRICE_RATIOS]
    return tuple(dict.fromkeys([*plain, *refs]))


def price_columns(columns: Sequence[str]) -> tuple[int, ...]:
    """Indices of the columns that move with the candidate price (demand is non-increasing in each).

    Example:
        >>> price_columns(LIGHT_COLUMNS)
        (0, 12, 13)
    """
    return tuple(j for j, c in enumerate(columns) if c == "price" or c in PRICE_RATIOS)

CHANNEL_CODES: dict[str, float] = {name: float(i) for i, name in enumerate(CHANNELS)}


def request_values(request: PricingRequest) -> dict[str, float]:
    """Request-side features other than price (see ``events.catalog.REQUEST_FEATURES``).

    Example:
        >>> from datetime import date, datetime, timezone
        >>> r = PricingRequest(hotel_id="h", room_type="r", stay_date=date(2026, 3, 2), nights=3,
        ...                    event_time=datetime(2026, 3, 1, tzinfo=timezone.utc))
        >>> request_values(r)
        {'lead_time_days': 1.0, 'nights': 3.0, 'stay_dow': 0.0, 'channel_code': 0.0}
    """
    return {
        "lead_time_days": float(lead_time_days(request)),
        "nights": float(request.nights),
        "stay_dow": float(request.stay_date.weekday()),
        "channel_code": CHANNEL_CODES[request.channel],
    }


class Vectorizer:
    """Fills a pre-allocated ``(grid_size, len(columns))`` float32 buffer per call.

    The returned array is the internal buffer: read it (or copy it) before the next call.

    Args:
        columns: column names, ``"price"`` first.
        grid_size: rows to pre-allocate (more are allocated on demand).
    """

    def __init__(self, columns: Sequence[str], *, grid_size: int = 41) -> None:
        if not columns or columns[0] != "price":
            msg = f"columns: got {list(columns)[:3]}..., expected 'price' as the first column"
            raise ValueError(msg)
        self.columns = tuple(columns)
        self._buffer = np.empty((grid_size, len(columns)), dtype=np.float32)
        self._row = np.empty(len(columns), dtype=np.float32)
        self._ratios = [(j, PRICE_RATIOS[c]) for j, c in enumerate(self.columns) if c in PRICE_RATIOS]
        self._inverse = np.full(len(self._ratios), np.nan, dtype=np.float64)  # 1 / reference per ratio column

    def fill(
        self, request: PricingRequest, features: Mapping[str, float | None], prices: npt.NDArray[np.floating[Any]]
    ) -> npt.NDArray[np.float32]:
        """One row per candidate price; returns a view of the internal buffer."""
        self.prepare(request, features)
        return self.with_prices(prices)

    def prepare(self, request: PricingRequest, features: Mapping[str, float | None]) -> None:
        """Compute the price-independent part of the row once per request."""
        req = request_values(request)
        row = self._row
        for j, name in enumerate(self.columns[1:], start=1):
            value = req.get(name)
            if value is None:
                value = _number(features.get(name))
            row[j] = value
        for k, (j, ref) in enumerate(self._ratios):
            value = _number(features.get(ref))
            self._inverse[k] = 1.0 / value if value > 0 else math.nan  # NaN > 0 is False
            row[j] = math.nan  # set per candidate price by with_prices

    @property
    def row(self) -> npt.NDArray[np.float32]:
        """The prepared row (``row[0]``, the price slot, is unspecified; the relative price slots are NaN)."""
        return self._row

    def with_prices(self, prices: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.float32]:
        """Rows of the prepared request, one per price (a view of the internal buffer)."""
        n = len(prices)
        if n > self._buffer.shape[0]:
            self._buffer = np.empty((n, len(self.columns)), dtype=np.float32)
        out = self._buffer[:n]
        out[:] = self._row
        out[:, 0] = prices
        for k, (j, _) in enumerate(self._ratios):
            out[:, j] = prices * self._inverse[k]
        return out


def _number(raw: float | None) -> float:
    return math.nan if raw is None else float(raw)


def model_matrix(
    request: PricingRequest,
    features: Mapping[str, float | None],
    prices: npt.NDArray[np.floating[Any]],
    *,
    columns: Sequence[str],
) -> npt.NDArray[np.float32]:
    """A fresh ``(len(prices), len(columns))`` float32 matrix (see :class:`Vectorizer` for the hot path)."""
    return Vectorizer(columns, grid_size=len(prices)).fill(request, features, np.asarray(prices)).copy()


def frame_matrix(frame: object, columns: Sequence[str]) -> npt.NDArray[np.float32]:
    """Training frame -> float32 matrix in ``columns`` order (missing values stay NaN).

    The relative price columns are always computed from ``price`` and their
    reference (as the :class:`Vectorizer` does when serving), never read from the frame.

    Example:
        >>> import pandas as pd
        >>> frame_matrix(pd.DataFrame({"price": [1.0], "x": [None]}), ["price", "x"]).tolist()
        [[1.0, nan]]
        >>> frame_matrix(pd.DataFrame({"price": [90.0, 5.0], "base_rate": [100.0, None]}),
        ...              ["price", "price_to_base_rate"]).tolist()[1]
        [5.0, nan]
    """
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        msg = f"frame: got {type(frame).__name__}, expected a pandas DataFrame"
        raise TypeError(msg)
    out = np.empty((len(frame), len(columns)), dtype=np.float32)
    price = frame["price"].to_numpy(dtype=np.float64, na_value=np.nan) if "price" in frame.columns else None
    for j, name in enumerate(columns):
        ref = PRICE_RATIOS.get(name)
        if ref is None:
            out[:, j] = frame[name].to_numpy(dtype=np.float64, na_value=np.nan)
            continue
        if price is None or ref not in frame.columns:
            msg = f"frame.columns: {name!r} needs 'price' and {ref!r}, got {sorted(map(str, frame.columns))[:12]}"
            raise KeyError(msg)
        base = frame[ref].to_numpy(dtype=np.float64, na_value=np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[:, j] = np.where(base > 0, price / base, np.nan)
    return out
