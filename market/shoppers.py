"""What a shopper is made of: the offer a policy sees, and the draws that decide what the shopper does.

Example:
    >>> from datetime import date, datetime, timezone
    >>> o = Offer("h0000", "standard", date(2026, 1, 9), datetime(2026, 1, 1, tzinfo=timezone.utc),
    ...           "leisure", "web", 8, 12, 40)
    >>> o.nights, o.rooms_left / o.capacity
    (1, 0.3)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import date, datetime
from typing import NamedTuple

from market.market import Market

Key = tuple[int, int, int]  # (hotel index, room index, stay-date ordinal)


class Offer(NamedTuple):
    """What a pricing policy sees when a shopper is about to view a room."""

    hotel_id: str
    room_type: str
    stay_date: date
    at: datetime
    segment: str
    channel: str
    lead_time_days: int
    rooms_left: int
    capacity: int
    nights: int = 1
    stay_left: tuple[int, ...] | None = None
    """Rooms left on each night of the stay from check-in (``rooms_left`` is their minimum), when stays
    hold every night they cover (``MarketConfig.stays_hold_nights``); ``None``: the check-in night's only."""


Policy = Callable[[Offer], float]


class Shopper(NamedTuple):
    key: Key
    s: int
    channel: str
    nights: int
    rooms: int
    view_delay_ms: int  # -1: searches only
    u_book: float
    book_delay_ms: int
    u_cancel: float
    cancel_at: float


class SegmentDraws:
    """Per-segment attribute sampler (channel, nights, rooms, guests) on one ``random.Random``."""

    def __init__(self, market: Market) -> None:
        self.channels: list[list[str]] = []
        self.cum: list[list[float]] = []
        self.log_q: list[float] = []
        self.rooms: list[tuple[int, int]] = []
        for seg in market.config.segments:
            total = sum(seg.channels.values())
            acc, cum = 0.0, []
            for w in seg.channels.values():
                acc += w / total
                cum.append(acc)
            self.channels.append(list(seg.channels))
            self.cum.append(cum)
            # nights = 1 + geometric failures with mean nights_mean - 1
            q = 1.0 - 1.0 / seg.nights_mean
            self.log_q.append(math.log(q) if q > 0 else 0.0)
            self.rooms.append(seg.rooms)

    def channel(self, s: int, u: float) -> str:
        for name, edge in zip(self.channels[s], self.cum[s], strict=True):
            if u < edge:
                return name
        return self.channels[s][-1]

    def nights(self, s: int, u: float) -> int:
        lq = self.log_q[s]
        return 1 if lq == 0.0 else min(60, 1 + int(math.log(1.0 - u) / lq))
