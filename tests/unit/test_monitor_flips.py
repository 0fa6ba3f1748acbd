"""The monitor's flip rate counts requests priced twice with identical inputs, and only those."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta

from prometheus_client import CollectorRegistry

from events.models import PricingDecision
from feedback.monitors.stream import DecisionMonitor, MonitorConfig

T0 = datetime(2026, 9, 1, 9, tzinfo=UTC)


def _priced(minutes: int, price: float, *, occupancy: float = 0.5, room: str = "std") -> PricingDecision:
    """One served decision: a fresh request id and time each call, as a re-sent request has."""
    return PricingDecision(hotel_id="h1", room_type=room, stay_date=date(2026, 9, 20), request_id=uuid.uuid4(),
                           price=price, tier="light", complexity=0.3, latency_ms=2.0, model_version="v1",
                           event_time=T0 + timedelta(minutes=minutes), features={"occupancy": occupancy})


def test_a_request_sent_twice_counts_once_and_flips_when_its_price_moves() -> None:
    monitor = DecisionMonitor(MonitorConfig(features=("occupancy",)), registry=CollectorRegistry())
    monitor.learn_many([
        _priced(0, 100.0), _priced(5, 100.0),  # sent twice, same inputs, same price: compared, not flipped
        _priced(1, 120.0, room="suite"), _priced(9, 125.0, room="suite"),  # same inputs, another price: a flip
        _priced(2, 100.0, occupancy=0.6),  # other features: a different input, compared with nothing
        _priced(3, 90.0, occupancy=0.7),
    ])
    report = monitor.flip_report()
    assert (report.n_inputs, report.n_flipped) == (2, 1)
    assert report.rate == 0.5 and report.by_version == {"v1": (2, 1)}


def test_the_same_request_on_another_day_is_another_input() -> None:
    monitor = DecisionMonitor(MonitorConfig(features=("occupancy",)), registry=CollectorRegistry())
    monitor.learn_many([_priced(0, 100.0), _priced(24 * 60, 110.0)])  # a day later: its lead time differs
    assert monitor.flip_report().n_inputs == 0
