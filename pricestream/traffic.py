"""A traffic driver: the calibrated market's shoppers against a running system, through ``serve``.

``pricestream run`` deploys the services; ``pricestream simulate`` plays a market's shoppers against
them. Each offer the simulator makes is priced by ``serve`` over HTTP (``POST /v1/price``), the
shopper books or leaves by the market's truth at that price, and every behaviour event (searches,
views with the price shown, bookings and cancellations tagged with the decision that priced them,
competitor rates, inventory) goes to ``behaviour.events`` through the producer SDK. The label
service then joins outcomes to decisions, the sampler and the trainer learn from them, and the
operator can watch models roll out: the loop closes on a deployed system.

Time is compressed: the simulated days run as fast as ``rate`` allows, from ``days`` before now,
so the events carry their own (past) times and the feature job windows them as history.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from limits import RateLimitItemPerSecond
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

from events.models import BookingEvent, PricingRequest, Record, ViewEvent, dumps
from events.producer import Producer
from market import Market, Offer, Simulation
from pricestream.settings import Settings

Progress = Callable[["TrafficStats"], None]
"""Called after every priced shopper with the running totals."""


class TrafficError(RuntimeError):
    """``serve`` cannot be reached, or answered a valid request with an error."""


@dataclass
class TrafficStats:
    """What the driver did: decisions asked of serve, events published, bookings among them."""

    decisions: int = 0
    events: int = 0
    bookings: int = 0
    revenue: float = 0.0
    by_tier: dict[str, int] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started


def link_decision(event: Record, recent: dict[tuple[Any, ...], str]) -> Record:
    """Tag a view or booking with the decision that priced its key (the simulator does not know ids)."""
    if not isinstance(event, ViewEvent | BookingEvent):
        return event
    key = (event.hotel_id, event.room_type, event.stay_date)
    decision = recent.get(key)
    if decision is None:
        return event
    # model_construct: the producer validates the record again before it is sent
    return type(event).model_construct(**{**event.__dict__, "decision_id": uuid.UUID(decision)})


@dataclass
class TrafficDriver:
    """Plays ``market`` against ``serve`` at ``base_url`` and publishes the events (see the module docstring).

    Args:
        settings: where Kafka is, and who this process acts as (the ``producer`` principal).
        market: the simulated market (its hotels are the ones priced).
        base_url: ``serve``'s address (``http://host:port``).
        rate: most pricing requests per second.
        api_key: the key of a secured ``serve`` (``X-API-Key``), if it needs one.
    """

    settings: Settings
    market: Market
    base_url: str
    rate: float = 50.0
    api_key: str | None = None
    stats: TrafficStats = field(default_factory=TrafficStats)

    def run(self, *, days: float, duration_s: float | None = None, seed: int = 0,
            on_progress: Progress | None = None, stop: threading.Event | None = None) -> TrafficStats:
        """Simulate ``days`` of shoppers ending now; stop after ``duration_s`` of wall time or when ``stop``
        is set (SIGTERM), with every event sent so far acknowledged by Kafka."""
        start = (datetime.now(UTC) - timedelta(days=days)).replace(minute=0, second=0, microsecond=0)
        limiter = MovingWindowRateLimiter(MemoryStorage())
        per_second = RateLimitItemPerSecond(max(int(self.rate), 1))
        recent: dict[tuple[Any, ...], str] = {}
        headers = {"content-type": "application/json", **({"x-api-key": self.api_key} if self.api_key else {})}
        deadline = None if duration_s is None else time.monotonic() + duration_s
        with httpx.Client(base_url=self.base_url, timeout=30.0, headers=headers) as http:
            def policy(offer: Offer) -> float:
                while not limiter.hit(per_second, "serve"):
                    time.sleep(0.005)
                decision = self._price(http, offer)
                recent[(offer.hotel_id, offer.room_type, offer.stay_date)] = str(decision["decision_id"])
                tier = str(decision.get("tier"))
                self.stats.by_tier[tier] = self.stats.by_tier.get(tier, 0) + 1
                self.stats.decisions += 1
                if on_progress is not None:
                    on_progress(self.stats)
                return float(decision["price"])

            sim = Simulation(self.market, start=start, duration=timedelta(days=days), policy=policy, rng_seed=seed)
            with Producer(self.settings.acting_as("producer").kafka(), topic="behaviour.events") as events:
                for event in sim:
                    events.send(link_decision(event, recent))
                    self._count(event)
                    if (deadline is not None and time.monotonic() > deadline) or (stop is not None and stop.is_set()):
                        break
        return self.stats

    def _price(self, http: httpx.Client, offer: Offer) -> dict[str, Any]:
        request = PricingRequest.model_validate({  # the offer's channel is text: the contract checks it
            "hotel_id": offer.hotel_id, "room_type": offer.room_type, "stay_date": offer.stay_date,
            "nights": offer.nights, "channel": offer.channel, "event_time": offer.at})
        try:
            resp = http.post("/v1/price", content=dumps(request))
        except httpx.TransportError as exc:
            msg = f"serve at {self.base_url} cannot be reached ({type(exc).__name__}): start it with `pricestream run`"
            raise TrafficError(msg) from exc
        if resp.status_code != 200:
            msg = f"serve at {self.base_url} answered {resp.status_code} to a valid request: {resp.text[:300]}"
            raise TrafficError(msg)
        body: dict[str, Any] = resp.json()
        return body

    def _count(self, event: Record) -> None:
        self.stats.events += 1
        if getattr(event, "event_type", "") == "booking":
            self.stats.bookings += 1
            paid, nights = getattr(event, "price_paid", 0.0) or 0.0, getattr(event, "nights", 1) or 1
            self.stats.revenue += float(paid) * int(nights)
