"""Complete stay nights: every shopper of a few consecutive nights, played until each night has closed.

A hotel counts revenue on nights that have closed (check-in has passed, nothing more can be
sold). :class:`StayNights` names such a set: ``count`` counted nights from ``first``, with
``lead_in`` nights before them that are played but not counted (a stay that checks in on one of
them holds rooms on the first counted nights, as it would in the hotel), and the booking window
played before the first played night (``window_days``, capped at the market's horizon; a
shopper who would have come earlier than the window is not played, and no warm start stands in
for them). :class:`ClosedNightsSimulation` is a :class:`~market.generator.Simulation` that opens
only the played nights, so a 450-day booking window costs what its few nights' shoppers cost.

:class:`NightLedger` reads the event stream (bookings less cancellations) and reports what a
hotel reports per counted night and in total: room revenue, rooms sold, rooms available, and
from them occupancy, ADR and RevPAR (:class:`HotelFigures`). A stay's room revenue is its price
per room-night x rooms on each night it holds (only the check-in night when stays do not hold
every night).

Example:
    >>> from datetime import date
    >>> from market.config import MarketConfig
    >>> from market.evaluate import static_policy
    >>> from market.market import Market
    >>> market = Market(MarketConfig(hotels=1, horizon_days=30, seed=3))
    >>> nights = StayNights(first=date(2026, 3, 10), count=3, lead_in=1, window_days=30)
    >>> ledger = play(market, static_policy(market), nights, seed=4)
    >>> ledger.closed(), len(ledger.per_night())
    (True, 3)
    >>> total = ledger.total()
    >>> abs(total.adr * total.occupancy - total.revpar) < 1e-9
    True
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from uuid import UUID

import numpy as np

from events.models import BookingEvent, CancellationEvent, Record
from market.errors import SimulatorError
from market.generator import Simulation
from market.market import Market
from market.scope import NightScope
from market.shoppers import Key, Policy

_HOUR = timedelta(hours=1)
_CLOSE_SLACK = timedelta(hours=2)  # the run ends this long after the last check-in: the night's last hour is played


@dataclass(frozen=True)
class StayNights:
    """``count`` counted nights from ``first``, ``lead_in`` uncounted nights before, ``window_days`` of shoppers.

    Raises:
        SimulatorError: ``count`` below 1, ``lead_in`` or ``window_days`` negative (field, value, expectation).
    """

    first: date
    count: int
    lead_in: int = 3
    window_days: int = 450

    def __post_init__(self) -> None:
        for name, low in (("count", 1), ("lead_in", 0), ("window_days", 1)):
            value = getattr(self, name)
            if value < low:
                raise SimulatorError(field=name, value=value, expected=f"an integer >= {low}")

    @property
    def counted(self) -> tuple[date, ...]:
        """The nights whose figures are reported."""
        return tuple(self.first + timedelta(days=i) for i in range(self.count))

    @property
    def played(self) -> tuple[date, ...]:
        """Every night whose shoppers are played: the lead-in nights, then the counted ones."""
        start = self.first - timedelta(days=self.lead_in)
        return tuple(start + timedelta(days=i) for i in range(self.lead_in + self.count))

    @property
    def last(self) -> date:
        return self.counted[-1]

    def window(self, market: Market) -> int:
        """Days of booking window played: ``window_days`` capped at the market's horizon."""
        return min(self.window_days, market.config.horizon_days)

    def start(self, market: Market) -> datetime:
        """When the run starts: the first played night's check-in less the played window, floored to the hour."""
        first = _checkin(market, self.played[0]) - timedelta(days=self.window(market))
        return first.replace(minute=0, second=0, microsecond=0)

    def end(self, market: Market) -> datetime:
        """When the run ends: after the last counted night's check-in, so every counted night has closed."""
        return _checkin(market, self.last) + _CLOSE_SLACK


def _checkin(market: Market, night: date) -> datetime:
    return datetime.fromtimestamp(market.checkin_ts(night.toordinal()), UTC)


def choose_nights(market: Market, *, count: int, after: date, lead_in: int = 3,
                  window_days: int | None = None) -> StayNights:
    """The first ``count`` nights whose whole played window starts on or after ``after``.

    With the window at the horizon (the default), the run starts on ``after`` and the first
    played night is a horizon away: every shopper of every played night is in the run.

    Example:
        >>> from market.config import MarketConfig
        >>> m = Market(MarketConfig(hotels=1, horizon_days=30, seed=3))
        >>> n = choose_nights(m, count=7, after=date(2026, 1, 1), lead_in=2)
        >>> n.played[0], n.first, n.start(m).date() >= date(2026, 1, 1)
        (datetime.date(2026, 2, 1), datetime.date(2026, 2, 3), True)
    """
    window = min(window_days or market.config.horizon_days, market.config.horizon_days)
    first = after + timedelta(days=window + 1 + lead_in)
    return StayNights(first=first, count=count, lead_in=lead_in, window_days=window)


class PlayedNights(NightScope):
    """The :class:`~market.scope.NightScope` of :class:`ClosedNightsSimulation`: the played nights, closed at the end.

    Only the played nights are opened, unless ``background`` (then every night of the horizon is,
    as for the whole market); either way only the played nights are priced by the policy and only
    their competitor rates are emitted.

    Example:
        >>> n = StayNights(first=date(2026, 3, 10), count=2, lead_in=1, window_days=30)
        >>> scope = PlayedNights(n)
        >>> o = date(2026, 3, 10).toordinal()
        >>> list(scope.opened(o, o + 5)) == [o, o + 1], scope.prices_by_policy((0, 0, o - 1))
        (True, True)
        >>> scope.emits_competitor_rate((0, 0, o + 2)), scope.close_at_end
        (False, True)
    """

    def __init__(self, nights: StayNights, *, snapshots: bool = True, background: bool = False) -> None:
        super().__init__(snapshots=snapshots, close_at_end=True)
        self.background = background
        self._played = [d.toordinal() for d in nights.played]
        self._played_set = set(self._played)

    def opened(self, lo: int, hi: int) -> Sequence[int]:
        """The played nights inside the horizon; every night of it with ``background``."""
        if self.background:
            return range(lo, hi + 1)
        return [o for o in self._played if lo <= o <= hi]

    def prices_by_policy(self, key: Key) -> bool:
        """The hotel's other nights sell at the static price, the policy never asked."""
        return key[2] in self._played_set

    def emits_competitor_rate(self, key: Key) -> bool:
        """Another night's competitor rate is not emitted: no request reads it (its draws are made all the same)."""
        return key[2] in self._played_set


class ClosedNightsSimulation(Simulation):
    """A :class:`Simulation` of the shoppers of ``nights.played`` only, from ``nights.start`` to ``nights.end``.

    Shoppers, competitor rates and inventory snapshots of other nights are not drawn (a stay that
    runs past the last played night still takes its rooms there, on nights no one else shops). The
    draws of a played night's shoppers do not depend on the policy, so two policies on one seed face
    the same shoppers (common random numbers). Nothing is warm-started: the played nights open empty.

    With ``background=True`` the hotel's other nights are played too, as the whole market is, but
    sold at the static price without asking the policy: the hotel-level counts (searches, views and
    bookings of every night of a hotel) are then what a hotel sees, and stays that start on other
    nights take rooms on the played ones. Nights already open at the start are warm-started (the
    bookings they would have by then, at the static price; :class:`NightLedger` counts them as
    history). Competitor rates of the other nights are drawn but not emitted: no request reads them.
    ``snapshots=False`` leaves out the periodic inventory snapshots (an inventory event still follows
    every booking and cancellation); they draw nothing, so the shoppers stay the same.
    """

    def __init__(self, market: Market, nights: StayNights, *, policy: Policy | None = None,
                 rng_seed: int | None = None, snapshots: bool = True, background: bool = False) -> None:
        start = nights.start(market)
        scope = PlayedNights(nights, snapshots=snapshots, background=background)
        super().__init__(market, start=start, duration=nights.end(market) - start, policy=policy,
                         rng_seed=rng_seed, warm_start=background, scope=scope)
        self.nights = nights


@dataclass(frozen=True)
class HotelFigures:
    """What a hotel reports for a set of closed room-nights.

    Example:
        >>> f = HotelFigures(revenue=8_000.0, rooms_sold=80, rooms_available=100)
        >>> f.occupancy, f.adr, f.revpar
        (0.8, 100.0, 80.0)
    """

    revenue: float
    rooms_sold: int
    rooms_available: int

    @property
    def occupancy(self) -> float:
        """Rooms sold / rooms available."""
        return self.rooms_sold / self.rooms_available if self.rooms_available else 0.0

    @property
    def adr(self) -> float:
        """Average daily rate: room revenue / rooms sold (0 when nothing sold)."""
        return self.revenue / self.rooms_sold if self.rooms_sold else 0.0

    @property
    def revpar(self) -> float:
        """Revenue per available room: room revenue / rooms available (= ADR x occupancy)."""
        return self.revenue / self.rooms_available if self.rooms_available else 0.0

    def __add__(self, other: HotelFigures) -> HotelFigures:
        return HotelFigures(self.revenue + other.revenue, self.rooms_sold + other.rooms_sold,
                            self.rooms_available + other.rooms_available)


class NightLedger:
    """Room revenue and rooms sold of the counted nights, from a simulation's bookings and cancellations.

    Feed it every record (:meth:`add`); :meth:`per_night` and :meth:`total` give the figures, and
    :meth:`closed` tells whether ``sim`` (when given) has closed every counted night. Rooms a night
    had sold before the run (a warm start, ``background=True``) are counted as history, at the static
    price: the same rooms for every policy on the same shoppers.
    """

    def __init__(self, market: Market, nights: StayNights, sim: Simulation | None = None) -> None:
        self.market, self.nights, self.sim = market, nights, sim
        self._counted = set(nights.counted)
        self._hold = market.config.stays_hold_nights
        self._revenue: dict[date, float] = defaultdict(float)
        self._rooms: dict[tuple[str, str, date], int] = defaultdict(int)
        self._bookings: dict[UUID, tuple[list[tuple[str, str, date]], int, float]] = {}

    def add(self, event: Record) -> None:
        """Count a booking's rooms and revenue on the counted nights it holds; a cancellation takes them back."""
        if isinstance(event, BookingEvent):
            held = self._held(event)
            rooms, price = int(event.rooms), float(event.price_paid)
            self._bookings[event.booking_id] = (held, rooms, price)
            self._book(held, rooms, price, +1)
        elif isinstance(event, CancellationEvent):
            booked = self._bookings.pop(event.booking_id, None)
            if booked is not None:
                self._book(*booked, -1)

    def add_all(self, events: Iterable[Record]) -> NightLedger:
        for event in events:
            self.add(event)
        return self

    def _held(self, event: BookingEvent) -> list[tuple[str, str, date]]:
        nights = int(event.nights) if self._hold else 1
        days = (event.stay_date + timedelta(days=i) for i in range(nights))
        return [(event.hotel_id, event.room_type, d) for d in days if d in self._counted]

    def _book(self, held: list[tuple[str, str, date]], rooms: int, price: float, sign: int) -> None:
        for key in held:
            self._rooms[key] += sign * rooms
            self._revenue[key[2]] += sign * rooms * price

    def rooms_sold(self, hotel_id: str, room_type: str, night: date) -> int:
        """Rooms of the kept bookings on ``night`` (equals capacity less rooms left at check-in)."""
        return self._rooms.get((hotel_id, room_type, night), 0)

    def capacity(self) -> int:
        """Rooms available per night over every hotel and room type."""
        cfg = self.market.config
        return sum(self.market.capacity(h, r) for h in cfg.hotel_ids for r in cfg.room_types)

    def history_rooms(self, hotel_id: str, room_type: str, night: date) -> int:
        """Rooms of ``night`` sold before the run (a warm start): sold at check-in less the run's kept bookings."""
        if self.sim is None or (hotel_id, room_type, night) not in self.sim.checkins:
            return 0
        sold = self.market.capacity(hotel_id, room_type) - self.sim.checkins[(hotel_id, room_type, night)]
        return max(sold - self.rooms_sold(hotel_id, room_type, night), 0)

    def night(self, night: date) -> HotelFigures:
        """One counted night over every hotel and room type; rooms sold before the run count at the static price."""
        cfg = self.market.config
        keys = [(h, r) for h in cfg.hotel_ids for r in cfg.room_types]
        history = {k: self.history_rooms(*k, night) for k in keys}
        revenue = self._revenue.get(night, 0.0) + sum(n * self.market.reference_price(*k) for k, n in history.items())
        sold = sum(self.rooms_sold(*k, night) + history[k] for k in keys)
        return HotelFigures(round(revenue, 2), sold, self.capacity())

    def per_night(self) -> dict[date, HotelFigures]:
        """Counted night -> its figures over every hotel and room type."""
        return {night: self.night(night) for night in self.nights.counted}

    def total(self) -> HotelFigures:
        """The counted nights together (rooms available = capacity x nights)."""
        out = HotelFigures(0.0, 0, 0)
        for figures in self.per_night().values():
            out = out + figures
        return out

    def closed(self) -> bool:
        """Every counted night of every hotel and room type has passed check-in in ``sim``."""
        if self.sim is None:
            return False
        cfg, done = self.market.config, self.sim.checkins
        return all((h, r, n) in done for h in cfg.hotel_ids for r in cfg.room_types for n in self.nights.counted)


def play(market: Market, policy: Policy, nights: StayNights, *, seed: int, snapshots: bool = True,
         background: bool = False) -> NightLedger:
    """Play ``nights``' shoppers under ``policy`` in process; the ledger of the run (its ``sim`` closed)."""
    sim = ClosedNightsSimulation(market, nights, policy=policy, rng_seed=seed, snapshots=snapshots,
                                 background=background)
    ledger = NightLedger(market, nights, sim)
    return ledger.add_all(sim)


def shopper_phases(market: Market, nights: StayNights, *, phases: int) -> list[datetime]:
    """Times cutting the run into ``phases`` parts of about equal expected shoppers (first start .. end).

    Shoppers come late (most of a night's in its last weeks), so equal times would put most of the
    run in its last part. Boundaries are hours.

    Example:
        >>> from market.config import MarketConfig
        >>> m = Market(MarketConfig(hotels=1, horizon_days=30, seed=3))
        >>> n = StayNights(first=date(2026, 3, 10), count=3, lead_in=0, window_days=30)
        >>> cuts = shopper_phases(m, n, phases=4)
        >>> len(cuts), cuts[0] == n.start(m), cuts[-1] == n.end(m), cuts == sorted(cuts)
        (5, True, True, True)
    """
    if phases < 1:
        raise SimulatorError(field="phases", value=phases, expected="an integer >= 1")
    start, end = nights.start(market), nights.end(market)
    hours = np.arange(start.timestamp(), end.timestamp(), 3600.0)
    rate = np.zeros(len(hours))
    for night in nights.played:
        o = night.toordinal()
        lead = (market.checkin_ts(o) - hours) / 86_400.0
        factors = np.asarray([market.night_factors(0, 0, o)])
        rate += (market.lead_pdf(lead) * factors).sum(axis=1)
    cum = np.cumsum(rate) / max(float(rate.sum()), 1e-12)
    cuts = [start]
    for k in range(1, phases):
        i = int(np.searchsorted(cum, k / phases))
        cuts.append(max(cuts[-1], start + _HOUR * i))
    return [*cuts, end]
