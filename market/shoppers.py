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

_VIEW_DELAY_S = (5.0, 40.0)  # minimum and mean extra seconds from search to view
_BOOK_DELAY_S = (30.0, 240.0)  # minimum and mean extra seconds from view to booking


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
    """Every random choice one shopper will need, drawn at arrival (see :meth:`SegmentDraws.shopper`)."""

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

    def shopper(self, key: Key, s: int, rnd: Callable[[], float], view_prob: float) -> Shopper:
        """Every random choice a shopper of segment ``s`` will need, drawn now from ``rnd``.

        Drawing them up front, in an order that no policy can change, gives
        common random numbers: two policies run with the same seed face the
        same shoppers with the same willingness (``u_book``) and the same plans.
        """
        channel, nights = self.channel(s, rnd()), self.nights(s, rnd())
        lo, hi = self.rooms[s]
        rooms = lo + int(rnd() * (hi - lo + 1))
        views = rnd() < view_prob
        view_delay = int((_VIEW_DELAY_S[0] - _VIEW_DELAY_S[1] * math.log(1.0 - rnd())) * 1000)
        book_delay = int((_BOOK_DELAY_S[0] - _BOOK_DELAY_S[1] * math.log(1.0 - rnd())) * 1000)
        u_book, u_cancel, cancel_at = rnd(), rnd(), rnd()
        return Shopper(
            key, s, channel, nights, rooms, view_delay if views else -1, u_book, book_delay, u_cancel, cancel_at
        )
