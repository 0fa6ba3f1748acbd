"""Request + features -> float32 model matrix, one row per candidate price.

Column order is part of a model bundle (``meta.json`` stores it). ``price`` is
always column 0 so a price grid only rewrites that column. Missing features
(``None``) become NaN, which LightGBM and the ONNX tree ensemble route down
their learned missing-value branch.

Example:
    >>> from datetime import date, datetime, timezone
    >>> import numpy as np
    >>> from events.models import PricingRequest
    >>> req = PricingRequest(hotel_id="h1", room_type="std", stay_date=date(2026, 12, 24),
    ...                      event_time=datetime(2026, 12, 1, tzinfo=timezone.utc), channel="ota")
    >>> m = model_matrix(req, {"occupancy": 0.8}, np.array([90.0, 110.0]), columns=LIGHT_COLUMNS)
    >>> m.shape, m.dtype, m[:, 0].tolist(), float(m[0, 1])
    ((2, 11), dtype('float32'), [90.0, 110.0], 23.0)
    >>> bool(np.isnan(m[0, LIGHT_COLUMNS.index("bookings_24h")]))
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

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
)
"""The ~10 strongest demand signals: price, timing, inventory pressure, recent demand, competition."""

HEAVY_COLUMNS: tuple[str, ...] = ("price",) + tuple(c for c in REQUEST_FEATURES if c != "price") + ALL_FEATURES
"""Every request-side input and every catalogue feature, price first."""

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

    def fill(
        self, request: PricingRequest, features: Mapping[str, float | None], prices: npt.NDArray[np.floating]
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
                raw = features.get(name)
                value = math.nan if raw is None else float(raw)
            row[j] = value

    @property
    def row(self) -> npt.NDArray[np.float32]:
        """The prepared row (``row[0]``, the price slot, is unspecified)."""
        return self._row

    def with_prices(self, prices: npt.NDArray[np.floating]) -> npt.NDArray[np.float32]:
        """Rows of the prepared request, one per price (a view of the internal buffer)."""
        n = len(prices)
        if n > self._buffer.shape[0]:
            self._buffer = np.empty((n, len(self.columns)), dtype=np.float32)
        out = self._buffer[:n]
        out[:] = self._row
        out[:, 0] = prices
        return out


def model_matrix(
    request: PricingRequest,
    features: Mapping[str, float | None],
    prices: npt.NDArray[np.floating],
    *,
    columns: Sequence[str],
) -> npt.NDArray[np.float32]:
    """A fresh ``(len(prices), len(columns))`` float32 matrix (see :class:`Vectorizer` for the hot path)."""
    return Vectorizer(columns, grid_size=len(prices)).fill(request, features, np.asarray(prices)).copy()


def frame_matrix(frame: object, columns: Sequence[str]) -> npt.NDArray[np.float32]:
    """Training frame -> float32 matrix in ``columns`` order (missing values stay NaN).

    Example:
        >>> import pandas as pd
        >>> frame_matrix(pd.DataFrame({"price": [1.0], "x": [None]}), ["price", "x"]).tolist()
        [[1.0, nan]]
    """
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        msg = f"frame: got {type(frame).__name__}, expected a pandas DataFrame"
        raise TypeError(msg)
    return frame.loc[:, list(columns)].to_numpy(dtype=np.float32, na_value=np.nan)
