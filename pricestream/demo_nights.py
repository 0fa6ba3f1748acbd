"""The demo's deployed run over complete stay nights: their shoppers priced by ``serve``, in compressed time.

:func:`play_deployed` plays the market (:class:`market.closed_nights.ClosedNightsSimulation` with
``background=True``, periodic inventory snapshots left out) from the start of the counted nights'
played booking window until the last of them has closed. Every view of a counted night is priced
by ``serve`` over HTTP (``POST /v1/price``); the hotels' other nights are sold at the static price
(their shoppers make the hotel-level counts the features and models know). Every event goes to
Kafka through the producer SDK (competitor rates of the counted nights only: the others' are read
by no request), views and bookings tagged with the decision that priced them. The run is cut into
phases of about equal shoppers of the counted nights (:func:`market.closed_nights.shopper_phases`);
after each, the demo waits until the label, sampler and trainer services and the feature job have
caught up (simulated time runs as fast as the services follow), and inside each phase a live
rollout is moved one stage on at a quarter, a half and three quarters of its time
(``pricestream rollout advance --source replay``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from events.models import CompetitorRateEvent, PricingRequest
from events.producer import Producer
from market.closed_nights import ClosedNightsSimulation, NightLedger, StayNights
from market.evaluate import NetValueRecorder
from market.oracle import DPOracle
from market.shoppers import Offer
from pricestream.demo_revenue import PolicyNights
from pricestream.demo_services import (
    LoopLog,
    Progress,
    advance_rollout,
    await_features,
    await_feedback,
    consumed_features,
    price,
    serving,
)
from pricestream.demo_setup import DemoRun
from pricestream.traffic import link_decision

STAGE_POINTS = (0.25, 0.5, 0.75)
"""Where in each phase a live rollout moves on (shadow -> canary -> blend -> full within one phase)."""


@dataclass(frozen=True)
class Phase:
    """One part of the run: its simulated time span, what was served and what the market was."""

    index: int
    start: datetime
    end: datetime
    decisions: int
    model: str
    regime: str


class _Served:
    """The policy ``serve`` is: each offer priced over HTTP, a live rollout moved on at its stage points."""

    def __init__(self, run: DemoRun, log: LoopLog, *, seed: int) -> None:
        self.run, self.log, self.seed = run, log, seed
        self.recent: dict[tuple[Any, ...], str] = {}
        self.decisions = 0
        self.stage_at: list[datetime] = []
        self.steps: list[datetime] = []
        """Simulated time of every rollout step the run attempted (the dashboard's rollout axis)."""

    def plan(self, start: datetime, end: datetime) -> None:
        """Stage points of the phase ``start..end``."""
        self.stage_at = [start + (end - start) * f for f in STAGE_POINTS]

    def __call__(self, offer: Offer) -> float:
        while self.stage_at and offer.at >= self.stage_at[0]:
            at = self.stage_at.pop(0)
            self.steps.append(at)
            advance_rollout(self.run, self.log, seed=self.seed + len(self.steps), when=at)
        request = PricingRequest(
            hotel_id=offer.hotel_id, room_type=offer.room_type, stay_date=offer.stay_date, nights=offer.nights,
            channel=offer.channel, event_time=offer.at,
        )
        decision = price(self.run, request)
        self.recent[(offer.hotel_id, offer.room_type, offer.stay_date)] = str(decision["decision_id"])
        self.decisions += 1
        return float(decision["price"])


@dataclass
class DeployedRun:
    """What :func:`play_deployed` returns: pricestream's closed nights, the phases, the rollout steps' times."""

    nights: PolicyNights
    phases: list[Phase]
    decisions: int
    steps: list[datetime]


def play_deployed(
    run: DemoRun, nights: StayNights, *, cuts: list[datetime], seed: int, dp: DPOracle, log: LoopLog,
    regime: Callable[[datetime], str], say: Progress,
) -> DeployedRun:
    """Play ``nights``' shoppers against the deployment, phase by phase at ``cuts``; pricestream's nights."""
    served = _Served(run, log, seed=seed)
    recorded = NetValueRecorder(run.market, served, dp.bid_price)
    sim = ClosedNightsSimulation(run.market, nights, policy=recorded, rng_seed=seed, snapshots=False, background=True)
    played = set(nights.played)
    ledger = NightLedger(run.market, nights, sim)
    phases: list[Phase] = []
    k, before, done = 0, consumed_features(run), 0
    _start_phase(served, cuts, k, say, regime)
    with Producer(run.settings.acting_as("producer").kafka(), topic="behaviour.events") as events:
        for event in sim:
            while k + 1 < len(cuts) - 1 and event.event_time >= cuts[k + 1]:
                phases.append(_end_phase(run, events, log, cuts, k, served.decisions - done, regime, say, before))
                k, before, done = k + 1, consumed_features(run), served.decisions
                _start_phase(served, cuts, k, say, regime)
            ledger.add(event)
            if not isinstance(event, CompetitorRateEvent) or event.stay_date in played:
                events.send(link_decision(event, served.recent))
        phases.append(_end_phase(run, events, log, cuts, k, served.decisions - done, regime, say, before))
    return DeployedRun(PolicyNights(ledger, recorded.total()), phases, served.decisions, served.steps)


def _start_phase(served: _Served, cuts: list[datetime], k: int, say: Progress,
                 regime: Callable[[datetime], str]) -> None:
    served.plan(cuts[k], cuts[k + 1])
    say(f"phase {k + 1}/{len(cuts) - 1}: shoppers of {cuts[k]:%Y-%m-%d} .. {cuts[k + 1]:%Y-%m-%d} "
        f"({regime(cuts[k])}) priced by serve over HTTP, their events to Kafka")


def _end_phase(
    run: DemoRun, events: Producer, log: LoopLog, cuts: list[datetime], k: int, decisions: int,
    regime: Callable[[datetime], str], say: Progress, before: int,
) -> Phase:
    events.flush()
    say(f"phase {k + 1}/{len(cuts) - 1} done ({decisions} decisions): labels, active sampling, guarded training "
        "(waiting on the services)")
    await_feedback(run, log, say, when=cuts[k + 1])
    await_features(run, before, say)
    return Phase(k + 1, cuts[k], cuts[k + 1], decisions, serving(run), regime(cuts[k]))
