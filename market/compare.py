"""Revenue of pricing policies against the static price and the DP oracle, on the same simulated shoppers.

The one comparison that ``bench/revenue.py`` prints per preset and that a demo can
print for its own market and run: each policy prices the same shoppers (common
random numbers per seed) after a warm-up at the static price; only nights that
check in during the window count (all of their remaining sales are inside the
run), revenue is net of expected cancellations (price x rooms x nights x (1 -
the segment's cancellation rate)), occupancy is theirs at check-in, ADR their
booked revenue per room-night. Ratios to the DP oracle are per seed with a 95%
t-interval over seeds.

Example:
    >>> from datetime import UTC, datetime
    >>> from market.config import MarketConfig
    >>> market = Market(MarketConfig(hotels=1, horizon_days=20, seed=3))
    >>> table = compare(market, start=datetime(2026, 1, 10, tzinfo=UTC), days=2, seeds=1, warmup_days=2)
    >>> sorted(table.outcomes), table.ratio("dp")[0]
    (['dp', 'myopic', 'static'], 1.0)
    >>> "ratio to DP" in table.text()
    True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from events.models import BookingEvent
from market.errors import SimulatorError
from market.evaluate import oracle_policy, static_policy
from market.generator import Simulation
from market.market import Market
from market.oracle import DPOracle
from market.shoppers import Offer, Policy

WARMUP_DAYS = 14
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


@dataclass(frozen=True)
class Outcome:
    """One policy on one seed: net revenue, gross booked revenue, room-nights, rooms sold and offered."""

    revenue: float
    gross: float
    room_nights: float
    sold: int
    capacity: int

    @property
    def occupancy(self) -> float:
        return self.sold / self.capacity if self.capacity else float("nan")

    @property
    def adr(self) -> float:
        return self.gross / self.room_nights if self.room_nights else float("nan")


def run_window(
    market: Market,
    policy: Policy,
    *,
    start: datetime,
    days: int,
    seed: int,
    warmup_days: int = WARMUP_DAYS,
    on_event: Callable[[object], None] | None = None,
) -> Outcome:
    """One simulated run: ``warmup_days`` at the static price, then ``policy`` for ``days`` (see the module)."""
    if days < 1 or warmup_days < 0 or start.tzinfo is None:
        raise SimulatorError(field="days/warmup_days/start", value=(days, warmup_days, start),
                             expected="days >= 1, warmup_days >= 0, a timezone-aware start")
    static = static_policy(market)

    def priced(offer: Offer) -> float:
        return static(offer) if offer.at < start else policy(offer)

    sim = Simulation(market, start=start - timedelta(days=warmup_days), duration=timedelta(days=warmup_days + days),
                     policy=priced, rng_seed=seed)
    cancel = {s.name: s.cancel_rate for s in market.config.segments}
    revenue = gross = room_nights = 0.0
    first, last = start.date(), (start + timedelta(days=days)).date()
    for event in sim:
        if on_event is not None:
            on_event(event)
        if isinstance(event, BookingEvent) and event.event_time >= start and event.stay_date < last:
            amount = event.price_paid * event.rooms * event.nights
            gross += amount
            revenue += amount * (1.0 - cancel[event.segment])
            room_nights += event.rooms * event.nights
    sold = cap = 0
    for (hotel, room, night), left in sim.checkins.items():
        if first <= night < last:
            c = market.capacity(hotel, room)
            sold, cap = sold + c - left, cap + c
    return Outcome(revenue, gross, room_nights, sold, cap)


def interval(x: list[float]) -> tuple[float, float, float]:
    """Mean and 95% t-interval over seeds (NaN bounds for one seed)."""
    a = np.asarray(x, dtype=float)
    if len(a) < 2:
        return float(a.mean()), float("nan"), float("nan")
    half = _T975.get(len(a) - 1, 1.96) * float(a.std(ddof=1)) / math.sqrt(len(a))
    return float(a.mean()), float(a.mean() - half), float(a.mean() + half)


@dataclass
class Comparison:
    """Outcomes per policy and seed; ``dp`` is the reference."""

    outcomes: dict[str, list[Outcome]] = field(default_factory=dict)

    def ratio(self, policy: str) -> tuple[float, float, float]:
        """Mean ratio to the DP oracle over seeds with its 95% interval."""
        dp = [o.revenue for o in self.outcomes["dp"]]
        return interval([o.revenue / d for o, d in zip(self.outcomes[policy], dp, strict=True)])

    def gains(self, policy: str, over: str = "static") -> list[float]:
        """Per seed, ``policy``'s revenue over ``over``'s, minus 1."""
        return [a.revenue / b.revenue - 1.0 for a, b in zip(self.outcomes[policy], self.outcomes[over], strict=True)]

    def text(self) -> str:
        """The table: revenue, occupancy, ADR and the ratio to the DP oracle per policy."""
        lines = [f"{'policy':12s} {'revenue':>13s} {'occupancy':>9s} {'ADR':>8s}  ratio to DP [95% interval]"]
        for name, outs in self.outcomes.items():
            r = self.ratio(name)
            rev, occ, adr = (float(np.mean([getattr(o, k) for o in outs])) for k in ("revenue", "occupancy", "adr"))
            lines.append(f"{name:12s} {rev:13,.0f} {occ:9.3f} {adr:8.2f}  {r[0]:.3f} [{r[1]:.3f}, {r[2]:.3f}]")
        return "\n".join(lines)


def compare(
    market: Market,
    *,
    start: datetime,
    days: int,
    seeds: int = 1,
    policies: Mapping[str, Callable[[int], tuple[Policy, Callable[[object], None] | None]]] | None = None,
    warmup_days: int = WARMUP_DAYS,
    say: Callable[[str], None] | None = None,
) -> Comparison:
    """Static price, the myopic oracle, the DP oracle and ``policies`` on the same shoppers.

    Args:
        market: the simulated market (e.g. the demo's).
        start: first priced instant; ``days`` are priced after ``warmup_days`` at the static price.
        seeds: simulated runs (common random numbers across policies).
        policies: name -> ``seed -> (policy, on_event)``, built fresh per seed (e.g. the real scorer and the
            in-process feature store it reads, fed by ``on_event``).
        say: progress lines.

    Raises:
        SimulatorError: on impossible sizes.
    """
    if seeds < 1:
        raise SimulatorError(field="seeds", value=seeds, expected="at least 1")
    builders = _builders(market, start, days, policies)
    out = Comparison({name: [] for name in builders})
    for seed in range(seeds):
        for name, build in builders.items():
            policy, on_event = build(seed)
            o = run_window(market, policy, start=start, days=days, seed=seed, warmup_days=warmup_days,
                           on_event=on_event)
            out.outcomes[name].append(o)
            if say is not None:
                say(f"seed {seed} {name:11s} revenue {o.revenue:12,.0f} occupancy {o.occupancy:.3f} ADR {o.adr:7.2f}")
    return out


def _builders(
    market: Market,
    start: datetime,
    days: int,
    policies: Mapping[str, Callable[[int], tuple[Policy, Callable[[object], None] | None]]] | None,
) -> dict[str, Callable[[int], tuple[Policy, Callable[[object], None] | None]]]:
    """Name -> ``seed -> (policy, on_event)``: static, the caller's ``policies``, the myopic and DP oracles."""
    dp = DPOracle(market, first_night=start.date(),
                  last_night=(start + timedelta(days=days + market.config.horizon_days + 1)).date())
    return {
        "static": lambda _s: (static_policy(market), None),
        **(policies or {}),
        "myopic": lambda _s: (oracle_policy(market), None),
        "dp": lambda _s: (dp.policy(), None),
    }
