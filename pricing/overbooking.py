"""Overbooking: how many bookings a night may take beyond its rooms, from the show-up forecast and a walk cost.

A booking shows up with probability ``q = (1 - cancel) x (1 - no_show)``, independently of the others,
so ``L`` bookings bring ``Binomial(L, q)`` guests. Taking one more booking earns the room's value if
its guest shows, and costs a walk (relocating a guest: the night's price plus a relocation cost) if
its guest shows while the rooms are already full. The limit is the largest ``L`` at which

* the last booking still pays (Talluri & van Ryzin, *The Theory and Practice of Revenue Management*,
  ch. 4): ``P(Binomial(L - 1, q) >= capacity) <= room_value / walk_cost``, and
* the expected walks stay at most ``max_walks_per_1000`` per 1,000 guests who show:
  ``E[(Binomial(L, q) - capacity)+] <= max_walks_per_1000 / 1000 x L q``.

With no cancellations and no no-shows every booking shows and the limit is the capacity; it grows
with the cancellation rate and shrinks as the walk cost grows.

Example:
    >>> overbooking_limit(100, show_prob=1.0, room_value=150.0, walk_cost=400.0)
    100
    >>> overbooking_limit(100, show_prob=0.72, room_value=150.0, walk_cost=400.0) > 120
    True
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field
from scipy.stats import binom

from pricing.errors import QuoteError

MAX_OVERBOOK_SHARE = 1.0
"""The limit never goes beyond twice the rooms, whatever the forecast says: a forecast that far off is a bug."""


class OverbookingConfig(BaseModel):
    """Settings of overbooking (``PRICESTREAM_OVERBOOKING_*``).

    Attributes:
        no_show_share: share of the bookings that stay that do not arrive.
        relocation_cost: what walking a guest costs beyond the night's price (transport, a better room
            elsewhere, goodwill); the walk cost is the night's reference price plus this.
        max_walks_per_1000: the service level: expected walks per 1,000 guests who show.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    no_show_share: float = Field(default=0.02, ge=0.0, lt=1.0)
    relocation_cost: float = Field(default=100.0, ge=0.0, allow_inf_nan=False)
    max_walks_per_1000: float = Field(default=1.0, ge=0.0, le=1000.0)


def overbooking_limit(capacity: int, *, show_prob: float, room_value: float, walk_cost: float,
                      max_walks_per_1000: float = 1.0) -> int:
    """The most bookings to take for a night of ``capacity`` rooms (see the module docstring).

    Raises:
        QuoteError: a capacity under 0, a show probability outside (0, 1], or a non-positive cost.
    """
    _check(capacity, show_prob, room_value, walk_cost)
    if capacity == 0 or show_prob >= 1.0:
        return capacity
    ratio = min(room_value / walk_cost, 1.0)
    return _limit(capacity, show_prob, ratio, max_walks_per_1000)


@functools.lru_cache(maxsize=4096)
def _limit(capacity: int, show_prob: float, ratio: float, max_walks_per_1000: float) -> int:
    # every candidate limit at once: one vectorised pass instead of a loop of binomial sums (the bid price
    # asks on every quote; cached, since nights share their capacity and, rounded, their show-up rate)
    bookings = np.arange(capacity + 1, capacity + int(math.ceil(MAX_OVERBOOK_SHARE * capacity)) + 1)
    pays = binom.sf(capacity - 1, bookings - 1, show_prob) <= ratio
    walks = _expected_walks(bookings, capacity, show_prob)
    served = walks <= max_walks_per_1000 / 1000.0 * bookings * show_prob
    ok = pays & served
    stop = int(np.argmin(ok)) if not ok.all() else len(ok)  # the limit is the last of the first run that holds
    return capacity + stop


def _expected_walks(bookings: NDArray[np.int64], capacity: int, show_prob: float) -> NDArray[np.float64]:
    """``E[(Binomial(L, q) - capacity)+]`` for each ``L`` of ``bookings``: ``Lq - C + E[(C - X)+]``."""
    below = np.arange(capacity)[:, None]
    pmf: NDArray[np.float64] = np.asarray(binom.pmf(below, bookings[None, :], show_prob), dtype=np.float64)
    short = ((capacity - below) * pmf).sum(axis=0)
    walks: NDArray[np.float64] = np.maximum(bookings * show_prob - capacity + short, 0.0)
    return walks


def expected_walks(bookings: int, capacity: int, show_prob: float) -> float:
    """``E[(Binomial(bookings, show_prob) - capacity)+]``: guests who show with no room left.

    Example:
        >>> expected_walks(10, 10, 0.9), round(expected_walks(12, 10, 0.9), 3)
        (0.0, 0.941)
    """
    if bookings <= capacity:
        return 0.0
    return float(_expected_walks(np.array([bookings]), capacity, show_prob)[0])


def extra_rooms(features: Mapping[str, float | None], *, cancel_share: float, config: OverbookingConfig) -> float:
    """Rooms a night may be sold beyond its capacity (0 without a capacity or a reference price)."""
    capacity, reference = features.get("capacity"), features.get("base_rate")
    if capacity is None or reference is None or not math.isfinite(capacity) or not math.isfinite(reference):
        return 0.0
    if capacity < 1 or reference <= 0:
        return 0.0
    show = round((1.0 - min(max(cancel_share, 0.0), 0.95)) * (1.0 - config.no_show_share), 3)
    rooms = int(capacity)
    limit = overbooking_limit(rooms, show_prob=show, room_value=reference,
                              walk_cost=reference + config.relocation_cost,
                              max_walks_per_1000=config.max_walks_per_1000)
    return float(limit - rooms)


def _check(capacity: int, show_prob: float, room_value: float, walk_cost: float) -> None:
    if capacity < 0:
        raise QuoteError(field="capacity", value=capacity, expected="0 or more rooms")
    if not 0.0 < show_prob <= 1.0:
        raise QuoteError(field="show_prob", value=show_prob, expected="a probability in (0, 1]")
    for name, value in (("room_value", room_value), ("walk_cost", walk_cost)):
        if not math.isfinite(value) or value <= 0:
            raise QuoteError(field=name, value=value, expected="a finite cost > 0")
