"""Score a pricing policy by revenue against the market's truth, next to two baselines.

:func:`run_policy` replays the same simulated market three times with the same
seed (common random numbers: the same shoppers arrive at the same times) under

* the given policy,
* :func:`static_policy`: always the reference price,
* :func:`oracle_policy`: the truth's revenue-maximising price per offer
  (:meth:`Market.optimal_price` given the offer's channel, segments mixed by
  arrival share; myopic, so not a hard upper bound once inventory binds),

and reports per simulated day the booked revenue, bookings, offers and the
occupancy of the nights that checked in that day.

Example:
    >>> from market.config import MarketConfig
    >>> market = Market(MarketConfig(hotels=1, horizon_days=20, seed=3))
    >>> result = run_policy(market, static_policy(market), days=1, seed=1)
    >>> result.policy.total_revenue == result.static.total_revenue
    True
    >>> list(result.frame().columns[:3])
    ['day', 'policy_revenue', 'static_revenue']
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from events.models import BookingEvent, CancellationEvent, Record, SearchEvent, ViewEvent
from market.errors import SimulatorError
from market.generator import Simulation
from market.market import Market
from market.shoppers import Offer, Policy

_METRICS = (
    "revenue",
    "net_revenue",
    "expected_revenue",
    "bookings",
    "rooms_sold",
    "cancellations",
    "offers",
    "searches",
    "occupancy",
)


class DayStats(BaseModel):
    """One simulated day of one policy (revenue is price x rooms x nights, booked that day)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    day: date
    revenue: float = 0.0
    net_revenue: float = 0.0
    expected_revenue: float = Field(
        default=0.0, description="truth's expected revenue of the offers shown: low-variance twin of revenue"
    )
    bookings: int = 0
    rooms_sold: int = 0
    cancellations: int = 0
    offers: int = 0
    searches: int = 0
    occupancy: float | None = Field(default=None, description="sold / capacity of the nights checking in that day")


class PolicyRun(BaseModel):
    """Per-day results of one policy."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    days: tuple[DayStats, ...]

    @property
    def total_revenue(self) -> float:
        return sum(d.revenue for d in self.days)

    @property
    def total_net_revenue(self) -> float:
        return sum(d.net_revenue for d in self.days)

    @property
    def total_expected_revenue(self) -> float:
        return sum(d.expected_revenue for d in self.days)

    @property
    def total_bookings(self) -> int:
        return sum(d.bookings for d in self.days)

    @property
    def total_offers(self) -> int:
        return sum(d.offers for d in self.days)

    @property
    def revenue_per_offer(self) -> float:
        return self.total_revenue / self.total_offers if self.total_offers else 0.0


class PolicyResult(BaseModel):
    """The given policy next to the static and oracle baselines, on the same simulated shoppers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy: PolicyRun
    static: PolicyRun
    oracle: PolicyRun

    @property
    def uplift_vs_static(self) -> float:
        """Relative revenue gain of the policy over the static price (0.05 = +5%)."""
        base = self.static.total_revenue
        return self.policy.total_revenue / base - 1.0 if base else 0.0

    @property
    def share_of_oracle(self) -> float:
        """Policy revenue as a share of the oracle's."""
        best = self.oracle.total_revenue
        return self.policy.total_revenue / best if best else 0.0

    def frame(self) -> pd.DataFrame:
        """One row per day; columns ``day`` then ``<policy|static|oracle>_<metric>`` per metric."""
        rows = []
        for mine, stat, orac in zip(self.policy.days, self.static.days, self.oracle.days, strict=True):
            row: dict[str, object] = {"day": mine.day}
            for metric in _METRICS:
                for label, stats in (("policy", mine), ("static", stat), ("oracle", orac)):
                    row[f"{label}_{metric}"] = getattr(stats, metric)
            rows.append(row)
        return pd.DataFrame(rows)


def static_policy(market: Market) -> Policy:
    """Always quote the hotel's reference price for the room type."""

    def policy(offer: Offer) -> float:
        return market.reference_price(offer.hotel_id, offer.room_type)

    return policy


def oracle_policy(market: Market) -> Policy:
    """Quote the truth's revenue-maximising price for the offer (it sees the channel, not the segment)."""

    def policy(offer: Offer) -> float:
        return market.optimal_price(offer.hotel_id, offer.room_type, offer.stay_date, offer.at, channel=offer.channel)

    return policy


class DayAccumulator:
    """Per-day revenue, bookings and offers of one policy's event stream.

    Feed it every record of a :class:`Simulation` (``add``), then ``finish`` it.
    The closed-loop demo uses it on the stream it also publishes to Kafka.
    """

    def __init__(self, market: Market) -> None:
        self.market = market
        self._acc: dict[date, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self._amounts: dict[object, float] = {}

    def add(self, event: Record) -> None:
        day = self._acc[event.event_time.date()]
        if isinstance(event, SearchEvent):
            day["searches"] += 1
        elif isinstance(event, ViewEvent):
            day["offers"] += 1
            day["expected_revenue"] += _expected(self.market, event)
        elif isinstance(event, BookingEvent):
            amount = event.price_paid * event.rooms * event.nights
            self._amounts[event.booking_id] = amount
            day["revenue"] += amount
            day["net_revenue"] += amount
            day["bookings"] += 1
            day["rooms_sold"] += event.rooms
        elif isinstance(event, CancellationEvent):
            day["net_revenue"] -= self._amounts.get(event.booking_id, 0.0)
            day["cancellations"] += 1

    def finish(self, sim: Simulation, *, name: str, first: datetime, days: int) -> PolicyRun:
        sold: dict[date, list[int]] = defaultdict(lambda: [0, 0])
        for (hotel, room, night), left in sim.checkins.items():
            cap = self.market.capacity(hotel, room)
            sold[night][0] += cap - left
            sold[night][1] += cap
        out = []
        for i in range(days):
            d = (first + timedelta(days=i)).date()
            vals = self._acc.get(d, {})
            occ = sold[d][0] / sold[d][1] if d in sold else None
            counts = {k: int(vals.get(k, 0)) for k in ("bookings", "rooms_sold", "cancellations", "offers", "searches")}
            out.append(
                DayStats(
                    day=d,
                    revenue=round(vals.get("revenue", 0.0), 2),
                    net_revenue=round(vals.get("net_revenue", 0.0), 2),
                    expected_revenue=round(vals.get("expected_revenue", 0.0), 2),
                    occupancy=occ,
                    **counts,
                )
            )
        return PolicyRun(name=name, days=tuple(out))


def simulate_days(
    market: Market,
    policy: Policy,
    *,
    days: int,
    start: datetime | None = None,
    seed: int = 0,
    name: str = "policy",
    on_progress: Callable[[datetime, int], None] | None = None,
) -> PolicyRun:
    """Run one policy for ``days`` simulated days and collect :class:`DayStats` per day."""
    if days < 1:
        raise SimulatorError(field="days", value=days, expected="at least 1")
    first = _midnight(market.config.start if start is None else start)
    sim = Simulation(
        market, start=first, duration=timedelta(days=days), policy=policy, rng_seed=seed, on_progress=on_progress
    )
    acc = DayAccumulator(market)
    for event in sim:
        acc.add(event)
    return acc.finish(sim, name=name, first=first, days=days)


def run_policy(
    market: Market,
    policy: Policy,
    *,
    days: int,
    start: datetime | None = None,
    seed: int = 0,
    on_progress: Callable[[str, datetime, int], None] | None = None,
) -> PolicyResult:
    """Score ``policy`` against the static and oracle baselines over ``days`` simulated days.

    All three runs share ``seed``, so they see the same shoppers. ``start`` is
    floored to midnight UTC (default ``market.config.start``). ``on_progress``
    gets (run name, simulated time, records so far) after every simulated hour.
    """
    runs = {}
    for name, pol in (("policy", policy), ("static", static_policy(market)), ("oracle", oracle_policy(market))):
        hook = None if on_progress is None else _named(on_progress, name)
        runs[name] = simulate_days(market, pol, days=days, start=start, seed=seed, name=name, on_progress=hook)
    return PolicyResult(**runs)


def _expected(market: Market, view: ViewEvent) -> float:
    """price x P(book | segment, channel, price) x the segment's mean rooms x nights, under the truth."""
    return _value(market, view.hotel_id, view.room_type, view.stay_date, view.event_time,
                  view.segment, view.channel, view.price_shown, 0.0)


def _value(market: Market, hotel: str, room: str, stay: date, at: datetime, segment: str, channel: str,
           price: float, bid: float) -> float:
    """P(book | price) x (price - bid) x the segment's mean rooms x nights, under the truth."""
    h, r, o, ts = market.hotel_index(hotel), market.room_index(room), stay.toordinal(), at.timestamp()
    s = market.segment_index(segment)
    p = market.prob(h, r, o, ts, price, s, channel, market.comp_median(h, r, o, ts))
    return float((price - bid) * p * market.seg_weight[s])


def _named(cb: Callable[[str, datetime, int], None], name: str) -> Callable[[datetime, int], None]:
    return lambda at, n: cb(name, at, n)


def _midnight(at: datetime) -> datetime:
    if at.tzinfo is None:
        raise SimulatorError(field="start", value=at, expected="a timezone-aware datetime")
    at = at.astimezone(UTC)
    return at.replace(hour=0, minute=0, second=0, microsecond=0)


def offer_value(market: Market, offer: Offer, price: float, *, bid: float = 0.0) -> float:
    """P(book | price) x (price - ``bid``) x the segment's mean rooms x nights, under the truth, at the offer.

    ``bid`` is an opportunity cost per room-night (e.g. :meth:`DPOracle.bid_price` at the offer); with
    ``bid`` 0 this is the offer's expected revenue, the term :class:`DayAccumulator` adds for its view.
    """
    return _value(market, offer.hotel_id, offer.room_type, offer.stay_date, offer.at, offer.segment, offer.channel,
                  price, bid)


class NetValueRecorder:
    """A policy wrapped to sum, per day of the offers it prices, their expected value net of ``bid(offer)``.

    The net is taken at the offer, where the rooms left on the policy's own path are known
    (:func:`offer_value` with ``bid`` the opportunity cost per room-night of selling to that shopper).

    Example:
        >>> from market.config import MarketConfig
        >>> market = Market(MarketConfig(hotels=1, horizon_days=20, seed=3))
        >>> rec = NetValueRecorder(market, static_policy(market), bid=lambda _offer: 0.0)
        >>> day = simulate_days(market, rec, days=1, seed=1).days[0]
        >>> abs(rec.net[day.day] - day.expected_revenue) < 0.01
        True
    """

    def __init__(self, market: Market, policy: Policy, bid: Callable[[Offer], float]) -> None:
        self.market, self.policy, self.bid = market, policy, bid
        self.net: dict[date, float] = defaultdict(float)

    def __call__(self, offer: Offer) -> float:
        price = self.policy(offer)
        self.net[offer.at.date()] += offer_value(self.market, offer, price, bid=self.bid(offer))
        return price

    def total(self) -> float:
        return float(sum(self.net.values()))
