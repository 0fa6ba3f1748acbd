"""The bid prices a pricer has computed, reused while the inputs they came from have not moved.

Split from :mod:`pricing.tiers`: the dp bid costs a few milliseconds, a dictionary read costs
nothing, and most requests of a night arrive between two moves of its forecast.

Example:
    >>> cache = BidCache(size=1)
    >>> fc = DemandForecast(10.0, 3.0, 1.0, 5.5)
    >>> cache.get(None, (fc, 50.0, 90.0, np.array([0.5])), lambda: 4.0), len(cache)  # no key: not stored
    (4.0, 0)
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from pricing.bid_price import DemandForecast

VIEWS_STEP = 0.05
"""Relative move of the forecast shoppers that makes :class:`BidCache` recompute a bid."""
BID_CACHE_SIZE = 100_000
"""Keys whose bid price a pricer keeps (a 450-day horizon x 3 room types x 6 channels x 10 hotels is 81,000)."""

BidKey = tuple[str, str, str, str]
"""(hotel, room type, night as ISO date, channel)."""
BidInputs = tuple[DemandForecast, float, float, npt.NDArray[np.float64]]
"""(forecast, search floor, search ceiling, mean demand on the bid grid)."""
Signature = tuple[float | int | tuple[float, ...], ...]
"""The rounded inputs two bids are compared on."""


class BidCache:
    """The last bid price per (hotel, room type, night, channel), reused while its inputs have not moved.

    A bid is recomputed when the forecast it came from moves (rooms left; shoppers still to come by
    ``VIEWS_STEP`` (5%) or more; rooms kept per booking by 0.05; the day of lead time), the search
    range moves by a cent, or the demand curve moves by 0.01 at any price of the bid grid: the
    features move, the bid follows; between two such moves the dp bid (a few ms) is a dictionary
    read. Least recently stored keys go first beyond ``size``. Thread-safe.

    Example:
        >>> cache = BidCache(size=2)
        >>> fc = DemandForecast(10.0, 3.0, 1.0, 5.5)
        >>> probs = np.array([0.5, 0.2])
        >>> cache.get(("h", "r", "n", "web"), (fc, 50.0, 90.0, probs), lambda: 7.0)
        7.0
        >>> cache.get(("h", "r", "n", "web"), (fc, 50.0, 90.0, probs), lambda: 8.0)  # unchanged: cached
        7.0
        >>> moved = fc._replace(rooms_left=2.0)
        >>> cache.get(("h", "r", "n", "web"), (moved, 50.0, 90.0, probs), lambda: 9.0)
        9.0
        >>> cache.hits, cache.misses
        (1, 2)
    """

    def __init__(self, size: int = BID_CACHE_SIZE) -> None:
        self._size = size
        self._entries: dict[BidKey, tuple[Signature, float]] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def signature(inputs: BidInputs) -> Signature:
        fc, low, high, probs = inputs
        return (
            round(fc.rooms_left, 3),
            round(math.log(max(fc.views, 1e-3)) / math.log1p(VIEWS_STEP)),
            round(fc.rooms_kept * 20.0),
            math.floor(fc.lead_days),
            round(low, 2),
            round(high, 2),
            tuple(np.round(probs, 2).tolist()),
        )

    def get(self, key: BidKey | None, inputs: BidInputs, compute: Callable[[], float]) -> float:
        """The cached bid of ``key`` if its inputs' signature is unchanged, else ``compute()`` (stored)."""
        if key is None:
            return compute()
        sig = self.signature(inputs)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] == sig:
                self.hits += 1
                return entry[1]
        value = compute()
        with self._lock:
            self.misses += 1
            self._entries.pop(key, None)
            self._entries[key] = (sig, value)
            while len(self._entries) > self._size:
                self._entries.pop(next(iter(self._entries)))
        return value

    def __len__(self) -> int:
        return len(self._entries)
