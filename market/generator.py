"""Behaviour-event stream of a simulated market, in event-time order.

:func:`simulate` runs a discrete-event simulation of a :class:`Market`: every
simulated hour it draws the shoppers of every sellable (hotel, room type,
night) from the market's arrival rates, and then plays out, in time order,

* a :class:`SearchEvent` per shopper, then (with ``view_prob``, if rooms are
  left) a :class:`ViewEvent` at the price the policy quotes,
* a :class:`BookingEvent` with the market's booking probability at that price,
  only if enough rooms are still left when the booking lands (inventory is
  decremented, never below zero), followed by an :class:`InventoryEvent`; with
  ``MarketConfig.stays_hold_nights`` the booking takes its rooms on every night
  of the stay (it needs them free on all of them, and an :class:`InventoryEvent`
  follows for each night),
* for some bookings (the segment's cancellation rate) a
  :class:`CancellationEvent` before check-in, returning the rooms (of every
  night the booking held),
* :class:`CompetitorRateEvent` s at random times and periodic
  :class:`InventoryEvent` snapshots per key.

Randomness comes from ``rng_seed`` alone, so the same market, start, duration,
policy and seed give byte-identical records (event ids included).

Example:
    >>> from datetime import timedelta
    >>> from market.config import MarketConfig
    >>> market = Market(MarketConfig(hotels=2, horizon_days=30, seed=5))
    >>> events = list(simulate(market, duration=timedelta(hours=6), max_events=200))
    >>> len(events), events[0].event_time <= events[-1].event_time
    (200, True)
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np

from events.models import (
    SCHEMA_VERSION,
    BookingEvent,
    CancellationEvent,
    CompetitorRateEvent,
    InventoryEvent,
    Record,
    SearchEvent,
    ViewEvent,
)
from market._fast import IdSource, build
from market.errors import PolicyError, SimulatorError
from market.inventory import OpenNights
from market.market import Market
from market.scope import NightScope
from market.shoppers import Key, Offer, Policy, SegmentDraws, Shopper

_HOUR_MS = 3_600_000
_CANCEL_SPAN = (0.05, 0.95)  # cancellations land in this fraction of the time left to check-in
_SEARCH, _VIEW, _BOOK, _CANCEL, _COMP, _INV = range(6)


class Simulation:
    """One simulated run; iterate it for the records. See :func:`simulate`.

    After (or during) iteration, :meth:`rooms_left` tells the live inventory and
    :attr:`checkins` the rooms left of every night that reached check-in. ``scope`` says which
    nights are played and how (:class:`~market.scope.NightScope`, default the whole market).
    """

    def __init__(
        self,
        market: Market,
        *,
        start: datetime | None = None,
        duration: timedelta,
        policy: Policy | None = None,
        rng_seed: int | None = None,
        max_events: int | None = None,
        warm_start: bool = True,
        on_progress: Callable[[datetime, int], None] | None = None,
        scope: NightScope | None = None,
    ) -> None:
        start = market.config.start if start is None else start
        _check_run(start, duration, max_events)
        self.market = market
        self.policy = policy
        self.scope = NightScope() if scope is None else scope
        self.warm_start = warm_start
        self.on_progress = on_progress
        self.max_events = max_events
        self._start_ms = int(round(start.timestamp() * 1000))
        self._end_ms = self._start_ms + int(duration / timedelta(milliseconds=1))
        seed = market.config.seed if rng_seed is None else rng_seed
        self._np = np.random.default_rng([seed, 1])
        self._attr = random.Random(seed * 4 + 1)  # arrival times and every shopper's draws
        self._ids = IdSource(random.Random(seed * 4 + 3))
        self._draws = SegmentDraws(market)
        self._nights = OpenNights(market, self.scope)
        self._heap: list[tuple[int, int, int, Any]] = []  # (ms, seq, kind, the kind's payload tuple)
        self._seq = 0
        self._hotels = market.config.hotel_ids
        self._rooms = market.config.room_types
        self._seg_names = market.config.segment_names
        self._cancel = [s.cancel_rate for s in market.config.segments]
        self._hold = market.config.stays_hold_nights

    # ------------------------------------------------------------ state
    def rooms_left(self, hotel_id: str, room_type: str, stay_date: date) -> int:
        """Rooms still for sale for the night (capacity if the night has not been opened yet)."""
        return self._nights.rooms_left(hotel_id, room_type, stay_date)

    def sellable(self, until_ms: int | None = None) -> dict[tuple[int, int, int], int]:
        """Per open night, by (hotel, room type, ordinal) index: rooms left now plus those given back later.

        The second part is the rooms of the bookings made so far whose cancellation is already scheduled
        inside the run (``until_ms``: only those due by then, epoch milliseconds): together, the most a
        policy taking over now can hold of each night at that time (``market.fluid`` bounds
        revenue with it).
        """
        out = dict(self._nights.left)
        for ms, _, kind, data in self._heap:
            if kind == _CANCEL and (until_ms is None or ms <= until_ms):
                key, _, rooms, nights = data
                for k in self._nights.held(key, nights):
                    out[k] = out.get(k, self.market.capacity_at(k[0], k[1])) + rooms
        return out

    def returns(self) -> list[tuple[int, tuple[int, int, int], int]]:
        """The rooms that scheduled cancellations give back: ``(epoch ms, (hotel, room type, ordinal), rooms)``."""
        return [(ms, k, data[2]) for ms, _, kind, data in self._heap if kind == _CANCEL
                for k in self._nights.held(data[0], data[3])]

    @property
    def checkins(self) -> Mapping[tuple[str, str, date], int]:
        """Rooms left at check-in, for every night that closed during the run."""
        return self._nights.checkins

    # ------------------------------------------------------------- run
    def __iter__(self) -> Iterator[Record]:
        yield from self._run()
        if self.scope.close_at_end:
            self._refresh_window(self._end_ms)  # close the nights whose check-in the last hour passed

    def _run(self) -> Iterator[Record]:
        emitted, limit = 0, self.max_events
        if limit == 0:
            return
        hour = self._start_ms
        while hour < self._end_ms:
            nxt = min(hour - hour % _HOUR_MS + _HOUR_MS, self._end_ms)
            self._refresh_window(hour)
            self._schedule(hour, nxt)
            heap = self._heap
            while heap and heap[0][0] < nxt:
                ms, _, kind, data = heapq.heappop(heap)
                for event in self._handle(ms, kind, data):
                    yield event
                    emitted += 1
                    if limit is not None and emitted >= limit:
                        return
            hour = nxt
            if self.on_progress is not None:
                self.on_progress(_dt(hour), emitted)

    def _push(self, ms: int, kind: int, data: Any) -> None:  # Any: the kind tag, not the type, says what data is
        if ms < self._end_ms:
            self._seq += 1
            heapq.heappush(self._heap, (ms, self._seq, kind, data))

    def _refresh_window(self, now_ms: int) -> None:
        """Open nights that came into the horizon (warm-started at the first), close those past check-in."""
        self._nights.refresh(now_ms, self._sold_before if self.warm_start else None)

    def _sold_before(self, key: Key, ts: float) -> int:
        return int(self._np.poisson(self.market.expected_bookings_before(*key, ts)))

    def _schedule(self, begin_ms: int, end_ms: int) -> None:
        """Draw this slice's shoppers, competitor updates and inventory snapshots."""
        m, cfg = self.market, self.market.config
        span_h = (end_ms - begin_ms) / _HOUR_MS
        mid = (begin_ms + end_ms) / 2000.0
        lead = (self._nights.key_checkin - mid) / 86_400.0
        rates = self._nights.key_factors * m.lead_pdf(lead) * (m.diurnal(mid) * span_h)
        counts = self._np.poisson(rates)
        span, rnd, keys = end_ms - begin_ms, self._attr.random, self._nights.keys
        checkin_ms = self._nights.key_checkin * 1000.0
        for k, s in zip(*np.nonzero(counts), strict=True):
            for _ in range(int(counts[k, s])):
                ms = begin_ms + int(rnd() * span)
                shopper = self._shopper(keys[k], int(s))  # drawn even if discarded: keeps streams aligned
                if ms < checkin_ms[k]:
                    self._push(ms, _SEARCH, shopper)
        open_keys = (lead > 0) & (lead <= cfg.horizon_days)
        if cfg.competitor_updates_per_day > 0:
            comp = self._np.poisson(cfg.competitor_updates_per_day / 24.0 * span_h, len(keys)) * open_keys
            for k in np.nonzero(comp)[0]:
                for _ in range(int(comp[k])):
                    self._push(begin_ms + int(rnd() * span), _COMP, (keys[k], int(rnd() * cfg.competitors)))
        every = cfg.inventory_snapshot_hours
        if every:
            slot = (begin_ms // _HOUR_MS) % every
            for k in np.nonzero(open_keys & (self._nights.key_slot == slot))[0]:
                h, r, o = keys[k]
                self._push(begin_ms + (o * 37 + h * 101) % span, _INV, keys[k])

    # ---------------------------------------------------------- actions
    def _handle(self, ms: int, kind: int, data: Any) -> list[Record]:  # Any: the payload of ``kind`` (see _push)
        if kind == _SEARCH:
            return self._on_search(ms, data)
        if kind == _VIEW:
            return self._on_view(ms, data)
        if kind == _BOOK:
            return self._on_book(ms, *data)
        if kind == _CANCEL:
            return self._on_cancel(ms, *data)
        if kind == _COMP:
            return [self._competitor(ms, *data)] if self.scope.emits_competitor_rate(data[0]) else []
        return [self._inventory(ms, data)]

    def _stay(self, ms: int, key: Key) -> dict[str, Any]:
        return {
            "event_id": self._ids(),
            "event_time": _dt(ms),
            "schema_version": SCHEMA_VERSION,
            "hotel_id": self._hotels[key[0]],
            "room_type": self._rooms[key[1]],
            "stay_date": self._nights.date(key[2]),
        }

    def _shopper(self, key: Key, s: int) -> Shopper:
        """Every random choice a shopper will need, drawn at arrival (common random numbers across policies)."""
        return self._draws.shopper(key, s, self._attr.random, self.market.config.view_prob)

    def _on_search(self, ms: int, shopper: Shopper) -> list[Record]:
        s, rooms = shopper.s, shopper.rooms
        values = self._stay(ms, shopper.key)
        values.update(
            event_type="search",
            nights=shopper.nights,
            guests=min(12, rooms if self._seg_names[s] == "business" else 2 * rooms),
            channel=shopper.channel,
            segment=self._seg_names[s],
        )
        if shopper.view_delay_ms >= 0:
            self._push(ms + shopper.view_delay_ms, _VIEW, shopper)
        return [build(SearchEvent, values)]

    def _on_view(self, ms: int, shopper: Shopper) -> list[Record]:
        m, key, s = self.market, shopper.key, shopper.s
        ts = ms / 1000.0
        if ts >= m.checkin_ts(key[2]):
            return []  # too late: the shopper sees no offer
        stay_left = self._nights.stay_left(key, shopper.nights)
        left = min(stay_left)
        if left <= 0:
            return []  # sold out on some night of the stay: the shopper sees no offer
        values = self._stay(ms, key)
        price = self._quote(values, key, s, shopper.channel, shopper.nights, stay_left)
        p = m.prob(key[0], key[1], key[2], ts, price, s, shopper.channel, m.comp_median(key[0], key[1], key[2], ts))
        if shopper.u_book < p and left >= shopper.rooms:
            self._push(ms + shopper.book_delay_ms, _BOOK, (shopper, price))
        values.update(
            event_type="view", price_shown=price, channel=shopper.channel, segment=self._seg_names[s], decision_id=None
        )
        return [build(ViewEvent, values)]

    def _quote(
        self, values: dict[str, Any], key: Key, s: int, channel: str, nights: int, stay_left: tuple[int, ...]
    ) -> float:
        if self.policy is None or not self.scope.prices_by_policy(key):
            return self.market.reference_at(key[0], key[1])
        offer = Offer(
            values["hotel_id"],
            values["room_type"],
            values["stay_date"],
            values["event_time"],
            self._seg_names[s],
            channel,
            (values["stay_date"] - values["event_time"].date()).days,
            min(stay_left),
            self.market.capacity_at(key[0], key[1]),
            nights,
            stay_left if self._hold else None,
        )
        price = self.policy(offer)
        if not isinstance(price, int | float) or not math.isfinite(price) or price <= 0:
            raise PolicyError(field="policy(offer)", value=price, expected=f"a finite positive price for {offer}")
        return float(price)

    def _on_book(self, ms: int, shopper: Shopper, price: float) -> list[Record]:
        key, rooms = shopper.key, shopper.rooms
        checkin_ms = self.market.checkin_ts(key[2]) * 1000.0
        held = self._nights.held(key, shopper.nights)
        if ms >= checkin_ms or any(self._nights.night_left(k) < rooms for k in held):
            return []  # sold out (or closed) while the guest was checking out: a lost sale
        for k in held:
            self._nights.left[k] -= rooms
        values = self._stay(ms, key)
        booking_id = self._ids()
        values.update(
            event_type="booking",
            booking_id=booking_id,
            price_paid=price,
            rooms=rooms,
            nights=shopper.nights,
            channel=shopper.channel,
            segment=self._seg_names[shopper.s],
            decision_id=None,
        )
        if shopper.u_cancel < self._cancel[shopper.s]:
            lo, hi = _CANCEL_SPAN
            when = ms + int((lo + (hi - lo) * shopper.cancel_at) * (checkin_ms - ms))
            self._push(max(when, ms + 1), _CANCEL, (key, booking_id, rooms, shopper.nights))
        return [build(BookingEvent, values), *(self._inventory(ms, k) for k in held)]

    def _on_cancel(self, ms: int, key: Key, booking_id: object, rooms: int, nights: int) -> list[Record]:
        held = self._nights.held(key, nights)
        for k in held:
            self._nights.left[k] = self._nights.night_left(k) + rooms
        values = self._stay(ms, key)
        values.update(event_type="cancellation", booking_id=booking_id, rooms=rooms)
        return [build(CancellationEvent, values), *(self._inventory(ms, k) for k in held)]

    def _inventory(self, ms: int, key: Key) -> Record:
        values = self._stay(ms, key)
        values.update(
            event_type="inventory", rooms_left=self._nights.left[key], capacity=self.market.capacity_at(key[0], key[1])
        )
        return build(InventoryEvent, values)

    def _competitor(self, ms: int, key: Key, j: int) -> Record:
        m = self.market
        values = self._stay(ms, key)
        rate = m.comp_rates(key[0], key[1], key[2], m.comp_bucket(ms / 1000.0))[j]
        values.update(event_type="competitor_rate", competitor_id=f"{values['hotel_id']}-c{j}", rate=rate)
        return build(CompetitorRateEvent, values)


def _check_run(start: datetime, duration: timedelta, max_events: int | None) -> None:
    """Refuse a naive start, a non-positive duration and a negative event limit (field, value, expectation)."""
    if start.tzinfo is None:
        raise SimulatorError(field="start", value=start, expected="a timezone-aware datetime")
    if duration <= timedelta(0):
        raise SimulatorError(field="duration", value=duration, expected="a positive timedelta")
    if max_events is not None and max_events < 0:
        raise SimulatorError(field="max_events", value=max_events, expected="None or a non-negative count")


def _dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000.0, UTC)


def simulate(
    market: Market,
    *,
    start: datetime | None = None,
    duration: timedelta,
    policy: Policy | None = None,
    rng_seed: int | None = None,
    max_events: int | None = None,
    warm_start: bool = True,
    on_progress: Callable[[datetime, int], None] | None = None,
) -> Iterator[Record]:
    """Stream the market's behaviour events from ``start`` for ``duration``, in non-decreasing event time.

    Args:
        market: the ground truth.
        start: first instant simulated (aware); default ``market.config.start``.
        duration: how much simulated time to cover; events after ``start + duration`` are not emitted.
        policy: ``policy(offer) -> price`` for every view; default the static reference price.
        rng_seed: seed of all draws; default ``market.config.seed``.
        max_events: stop after this many records.
        warm_start: nights already open at ``start`` begin with the bookings they would have had.
        on_progress: called after every simulated hour with (simulated time, records so far).

    Raises:
        SimulatorError: on a naive ``start`` or a non-positive ``duration``.
        PolicyError: when the policy returns a price that is not finite and positive.
    """
    return iter(
        Simulation(
            market,
            start=start,
            duration=duration,
            policy=policy,
            rng_seed=rng_seed,
            max_events=max_events,
            warm_start=warm_start,
            on_progress=on_progress,
        )
    )
