"""The bid price's forecast parameters measured from a hotel's own behaviour history.

:class:`~pricing.bid_price.BidPriceConfig` carries what a hotel knows from last year: when a night's
shoppers arrive (the booking curve), each room type's share of the searches (the hotel-pace prior of
the forecast), how many rooms and nights a booking takes and the share of them cancelled. The
benchmark measures them from the simulated market's year (``bench/revenue.py``); a deployed hotel
measures them from its behaviour events (the ``behaviour.events`` wire form: one contract record per
line, or the topic itself), with ``pricestream bid-price measure``, and ``serve`` loads the file
(``PRICESTREAM_BID_CONFIG``).

Use a year of history: over a few weeks the lead times of searches mix the curve with the season
(in April the nights 100 days out are August's, busier).

Example:
    >>> from datetime import UTC, date, datetime
    >>> from events.models import BookingEvent, SearchEvent
    >>> at = datetime(2026, 1, 1, tzinfo=UTC)
    >>> events = [SearchEvent(hotel_id="h", room_type=r, stay_date=date(2026, 1, 1 + d), event_time=at)
    ...           for r, d in (("std", 0), ("std", 10), ("std", 20), ("dlx", 30))]
    >>> events.append(BookingEvent(hotel_id="h", room_type="std", stay_date=date(2026, 1, 11), event_time=at,
    ...                            rooms=2, nights=3, price_paid=300.0))
    >>> m = measure(events)
    >>> m.searches, m.config.room_shares, m.config.rooms_per_booking, m.config.nights_per_booking
    (4, (('dlx', 0.25), ('std', 0.75)), 2.0, 3.0)
    >>> m.config.horizon_days, round(curve_of(m.config).share(15.0), 2)
    (30, 0.5)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from events.models import BookingEvent, CancellationEvent, Record, SearchEvent
from pricing.bid_price import BidPriceConfig, BookingCurve, curve_of, nights_mix

__all__ = ["BidHistory", "MIN_SEARCHES", "curve_of", "measure"]

MIN_SEARCHES = 1
"""Searches needed to measure anything (fewer: :func:`measure` raises ``ValueError``)."""
_MAX_HORIZON = 730  # BidPriceConfig.horizon_days' bound


@dataclass(frozen=True)
class BidHistory:
    """A measured :class:`BidPriceConfig` and what it was measured from."""

    config: BidPriceConfig
    searches: int
    bookings: int
    cancellations: int
    first: datetime | None
    last: datetime | None


def _lead_days(event: SearchEvent) -> float:
    arrival = datetime(event.stay_date.year, event.stay_date.month, event.stay_date.day, tzinfo=UTC)
    return max((arrival - event.event_time).total_seconds() / 86_400.0, 0.0)


def measure(
    events: Iterable[Record],
    *,
    method: Literal["fluid", "stochastic", "dp"] = "dp",
    stays_hold_nights: bool = True,
    horizon_days: int | None = None,
) -> BidHistory:
    """The forecast parameters of the bid price from behaviour ``events`` (other records are ignored).

    * booking curve: the lead times of the searches (:meth:`BookingCurve.from_leads`), over
      ``horizon_days`` (default: the longest lead seen, rounded up, at most 730);
    * room shares: each room type's share of the searches;
    * rooms and nights per booking, and the nights mix, from the bookings;
    * the cancellation share: rooms cancelled over rooms booked (the default of ``BidPriceConfig`` without bookings).

    Raises:
        ValueError: fewer than :data:`MIN_SEARCHES` searches (nothing to measure a curve from).
    """
    tally = _Tally()
    for event in events:
        tally.add(event)
    if len(tally.leads) < MIN_SEARCHES:
        msg = (f"events: {len(tally.leads)} searches, expected at least {MIN_SEARCHES} to measure the booking "
               "curve from")
        raise ValueError(msg)
    config = tally.config(method=method, stays_hold_nights=stays_hold_nights, horizon_days=horizon_days)
    return BidHistory(config, len(tally.leads), len(tally.rooms), tally.cancellations, tally.first, tally.last)


@dataclass
class _Tally:
    """What :func:`measure` reads from the events, one at a time: search leads and rooms, bookings, cancellations."""

    leads: list[float] = field(default_factory=list)
    rooms_of: Counter[str] = field(default_factory=Counter)
    rooms: list[int] = field(default_factory=list)
    nights: list[int] = field(default_factory=list)
    cancelled: int = 0
    cancellations: int = 0
    first: datetime | None = None
    last: datetime | None = None

    def add(self, event: Record) -> None:
        """Count a search, booking or cancellation (and the span of their times); ignore any other record."""
        if isinstance(event, SearchEvent):
            self.leads.append(_lead_days(event))
            self.rooms_of[event.room_type] += 1
        elif isinstance(event, BookingEvent):
            self.rooms.append(event.rooms)
            self.nights.append(max(event.nights, 1))
        elif isinstance(event, CancellationEvent):
            self.cancelled += event.rooms
            self.cancellations += 1
        else:
            return
        at = event.event_time
        self.first = at if self.first is None or at < self.first else self.first
        self.last = at if self.last is None or at > self.last else self.last

    def config(
        self, *, method: Literal["fluid", "stochastic", "dp"], stays_hold_nights: bool, horizon_days: int | None
    ) -> BidPriceConfig:
        """The :class:`BidPriceConfig` measured from the events counted (at least one search)."""
        leads, rooms, nights = self.leads, self.rooms, self.nights
        horizon = horizon_days or min(max(math.ceil(max(leads)), 1), _MAX_HORIZON)
        total = sum(self.rooms_of.values())
        defaults = BidPriceConfig()
        booked = sum(rooms)
        return BidPriceConfig(
            curve=BookingCurve.from_leads([min(lead, float(horizon)) for lead in leads], horizon).cumulative,
            horizon_days=horizon,
            rooms_per_booking=max(booked / len(rooms), 1.0) if rooms else defaults.rooms_per_booking,
            cancel_share=min(self.cancelled / booked, 0.9) if booked else defaults.cancel_share,
            method=method,
            nights_per_booking=max(sum(nights) / len(nights), 1.0) if nights else defaults.nights_per_booking,
            nights_mix=nights_mix(nights) if nights else None,
            stays_hold_nights=stays_hold_nights,
            room_shares=tuple((name, count / total) for name, count in sorted(self.rooms_of.items())),
        )
