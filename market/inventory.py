"""The rooms of a simulation's open nights: what is left, what closed at check-in, and the window.

:class:`OpenNights` is the inventory side of a :class:`~market.generator.Simulation`: the rooms
left of every open (hotel, room type, night), the rooms left of every night that reached
check-in, and the open nights as arrays that the hourly arrival draws read. Which nights open
when the booking horizon moves is the :class:`~market.scope.NightScope`'s call. It draws nothing
itself: a warm start's bookings come from the simulation's own generator (``sold_before``).

Example:
    >>> from market.config import MarketConfig
    >>> from market.market import Market
    >>> from market.scope import NightScope
    >>> market = Market(MarketConfig(hotels=1, horizon_days=3, seed=1))
    >>> nights = OpenNights(market, NightScope())
    >>> nights.refresh(1_796_083_200_000, None)
    >>> len(nights.keys) == len(market.config.room_types) * 5, nights.stay_left(nights.keys[0], 1)[0] > 0
    (True, True)
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime

import numpy as np

from market.market import Market
from market.scope import NightScope
from market.shoppers import Key


class OpenNights:
    """Rooms left per open night and at check-in; the open nights as arrays (see the module)."""

    def __init__(self, market: Market, scope: NightScope) -> None:
        self.market = market
        self.scope = scope
        self.hold = market.config.stays_hold_nights
        self.left: dict[Key, int] = {}
        self.checkins: dict[tuple[str, str, date], int] = {}
        self.window: tuple[int, int] | None = None
        self._hotels = market.config.hotel_ids
        self._rooms = market.config.room_types
        self._dates: dict[int, date] = {}

    def rooms_left(self, hotel_id: str, room_type: str, stay_date: date) -> int:
        """Rooms still for sale for the night (capacity if the night has not been opened yet)."""
        h, r = self.market.hotel_index(hotel_id), self.market.room_index(room_type)
        key = (h, r, stay_date.toordinal())
        if key in self.left:
            return self.left[key]
        done = self.checkins.get((hotel_id, room_type, stay_date))
        return self.market.capacity_at(h, r) if done is None else done

    def date(self, ordinal: int) -> date:
        """The date of an ordinal (cached: every record of a night asks for it)."""
        d = self._dates.get(ordinal)
        if d is None:
            d = self._dates[ordinal] = date.fromordinal(ordinal)
        return d

    def refresh(self, now_ms: int, sold_before: Callable[[Key, float], int] | None) -> None:
        """Open nights that came into the horizon, close those past check-in.

        ``sold_before(key, epoch s)``, when given, is the rooms a night had sold before the first
        window opened (a warm start); nights opened later start with every room.
        """
        m = self.market
        ts = now_ms / 1000.0
        lo = datetime.fromtimestamp(ts, UTC).date().toordinal() - 1
        while m.checkin_ts(lo) <= ts:
            lo += 1
        hi = lo + m.config.horizon_days + 1
        if self.window == (lo, hi):
            return
        first = self.window is None
        for key in [k for k in self.left if k[2] < lo]:
            self.checkins[(self._hotels[key[0]], self._rooms[key[1]], self.date(key[2]))] = self.left.pop(key)
        opened = self.scope.opened(lo, hi)
        keys = [(h, r, o) for h in range(m.config.hotels) for r in range(len(self._rooms)) for o in opened]
        for key in keys:
            if key not in self.left:
                sold = sold_before(key, ts) if first and sold_before is not None else 0
                self.left[key] = max(m.capacity_at(key[0], key[1]) - sold, 0)
        self.set_keys(keys)
        self.window = (lo, hi)

    def set_keys(self, keys: list[Key]) -> None:
        """The open nights as arrays (typed, so that an empty window keeps its shape); slot -1: no snapshots."""
        m = self.market
        self.keys = keys
        self.key_h = np.array([k[0] for k in keys], dtype=int)
        self.key_checkin = np.array([m.checkin_ts(k[2]) for k in keys], dtype=float)
        factors = np.array([m.night_factors(*k) for k in keys], dtype=float)
        self.key_factors = factors.reshape(len(keys), len(m.config.segments))
        every = max(m.config.inventory_snapshot_hours, 1)
        slots = [(o + 7 * h + 13 * r) % every if self.scope.snapshots else -1 for h, r, o in keys]
        self.key_slot = np.array(slots, dtype=int)

    def held(self, key: Key, nights: int) -> list[Key]:
        """The nights a booking of ``nights`` from ``key``'s night takes rooms on."""
        if not self.hold or nights <= 1:
            return [key]
        h, r, o = key
        return [(h, r, o + i) for i in range(nights)]

    def night_left(self, key: Key) -> int:
        """Rooms left on a night; a night past the open window (a long stay reaching it) opens with every room."""
        left = self.left.get(key)
        if left is None:
            left = self.left[key] = self.market.capacity_at(key[0], key[1])
        return left

    def stay_left(self, key: Key, nights: int) -> tuple[int, ...]:
        """Rooms left on each night a stay of ``nights`` from ``key``'s night holds."""
        return tuple(self.night_left(k) for k in self.held(key, nights))
