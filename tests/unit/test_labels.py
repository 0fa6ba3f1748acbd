from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime, timedelta

import pytest

from events.models import BookingEvent, CancellationEvent, PricingDecision
from feedback.errors import FeedbackConfigError, LabelJoinError
from feedback.labels import LabelJoiner

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
H = timedelta(hours=24)


def decision(minutes: int = 0, *, prob: float = 0.4, price: float = 120.0) -> PricingDecision:
    return PricingDecision(
        hotel_id="h1",
        room_type="std",
        stay_date=date(2026, 4, 1),
        event_time=T0 + timedelta(minutes=minutes),
        request_id=uuid.uuid4(),
        price=price,
        tier="light",
        model_version="light-v3",
        feature_version=7,
        complexity=0.4,
        expected_booking_prob=prob,
        latency_ms=1.5,
        features={"occupancy": 0.8, "searches_24h": None},
    )


def booking(d: PricingDecision, hours: float, booking_id: uuid.UUID | None = None) -> BookingEvent:
    return BookingEvent(
        hotel_id=d.hotel_id,
        room_type=d.room_type,
        stay_date=d.stay_date,
        event_time=T0 + timedelta(hours=hours),
        price_paid=d.price,
        decision_id=d.decision_id,
        booking_id=booking_id or uuid.uuid4(),
    )


def cancel(b: BookingEvent, hours: float) -> CancellationEvent:
    return CancellationEvent(
        hotel_id=b.hotel_id,
        room_type=b.room_type,
        stay_date=b.stay_date,
        event_time=T0 + timedelta(hours=hours),
        booking_id=b.booking_id,
    )


def key(labels):
    return [(lab.decision_id, lab.label, lab.reason, lab.revision, lab.event_time) for lab in labels]


def test_scripted_sequence_gives_exact_labels() -> None:
    joiner = LabelJoiner(H, grace=timedelta(hours=12))
    d1, d2, d3, d4, d5 = (decision(i) for i in range(5))
    out = []
    for d in (d1, d2, d3, d4):
        out += joiner.add_decision(d)
    b1 = booking(d1, 2)
    out += joiner.add_outcome(b1)  # booked inside the horizon
    b5 = booking(d5, 3)
    out += joiner.add_outcome(b5)  # arrives before its decision
    out += joiner.add_decision(d5)
    out += joiner.add_outcome(booking(d4, 26))  # after the horizon: not a positive
    out += joiner.advance(T0 + timedelta(hours=25))  # d2, d3, d4 have no booking by their deadline
    out += joiner.add_outcome(booking(d3, 20))  # late outcome whose event time is inside the horizon
    out += joiner.add_outcome(cancel(b1, 30))  # cancellation revises d1
    out += joiner.advance(T0 + timedelta(hours=26))  # nothing new is due
    expected = [
        (d1.decision_id, 1, "booked", 0, T0 + timedelta(hours=2)),
        (d5.decision_id, 1, "booked", 0, T0 + timedelta(hours=3)),
        (d2.decision_id, 0, "no_booking", 0, d2.event_time + H),
        (d3.decision_id, 0, "no_booking", 0, d3.event_time + H),
        (d4.decision_id, 0, "no_booking", 0, d4.event_time + H),
        (d3.decision_id, 1, "late_booking", 1, T0 + timedelta(hours=20)),
        (d1.decision_id, 0, "cancelled", 1, T0 + timedelta(hours=30)),
    ]
    assert key(out) == expected
    assert joiner.stats["post_horizon_booking"] == 1


def test_label_carries_decision_context_and_stable_ids() -> None:
    d = decision(prob=0.33, price=99.0)
    joiner = LabelJoiner(H)
    joiner.add_decision(d)
    [lab] = joiner.add_outcome(booking(d, 1))
    assert (lab.price, lab.tier, lab.model_version, lab.feature_version) == (99.0, "light", "light-v3", 7)
    assert lab.predicted_prob == 0.33
    assert lab.features == {"occupancy": 0.8, "searches_24h": None}
    again = LabelJoiner(H)
    again.add_decision(d)
    [lab2] = again.add_outcome(booking(d, 1))
    assert lab2.event_id == lab.event_id


def test_cancellation_before_booking_waits_and_only_full_cancel_flips() -> None:
    d = decision()
    joiner = LabelJoiner(H)
    joiner.add_decision(d)
    b1, b2 = booking(d, 1), booking(d, 2)
    assert joiner.add_outcome(cancel(b1, 5)) == []  # its booking is not known yet
    labels = joiner.add_outcome(b1)
    assert [(x.label, x.reason, x.revision) for x in labels] == [(1, "booked", 0), (0, "cancelled", 1)]
    labels = joiner.add_outcome(b2)  # a second booking books the decision again
    assert [(x.label, x.reason, x.revision) for x in labels] == [(1, "booked", 2)]
    assert joiner.add_outcome(b2) == []  # duplicate delivery
    assert joiner.stats["duplicate_booking"] == 1


def test_a_booking_read_before_its_decision_waits_and_settles_it_on_arrival() -> None:
    d = decision()
    joiner = LabelJoiner(H)
    b = booking(d, 3)
    assert joiner.add_outcome(b) == [] and joiner.waiting_bookings(d.decision_id) == (b,)
    labels = joiner.add_decision(d)
    assert [(x.label, x.reason, x.event_time) for x in labels] == [(1, "booked", b.event_time)]
    assert joiner.waiting_bookings(d.decision_id) == () and joiner.n_waiting == 0


def test_state_is_bounded_by_eviction() -> None:
    joiner = LabelJoiner(H, grace=timedelta(hours=1))
    for i in range(50):
        joiner.add_decision(decision(i * 60))
    assert joiner.n_tracked == 50
    labels = joiner.advance(T0 + timedelta(hours=24 + 1 + 10, minutes=1))
    assert len(labels) == 12  # deadlines at T0+24h .. T0+35h
    assert joiner.n_tracked == 50 - 11  # decision times < T0 + 10h + 1min are evicted
    late = booking(decision(0), 1)
    joiner.add_outcome(late)  # an orphan for a decision never seen
    joiner.advance(T0 + timedelta(days=5))
    assert joiner.n_tracked == 0 and joiner.n_waiting == 0


def test_state_dict_round_trip_through_json() -> None:
    joiner = LabelJoiner(H)
    d1, d2 = decision(0), decision(1)
    joiner.add_decision(d1)
    joiner.add_decision(d2)
    b1 = booking(d1, 1)
    joiner.add_outcome(b1)
    joiner.add_outcome(booking(decision(3), 2))  # orphan waits
    state = json.loads(json.dumps(joiner.state_dict()))
    restored = LabelJoiner(H)
    restored.load_state(state)
    assert restored.n_tracked == 2 and restored.n_waiting == 1
    [lab] = restored.add_outcome(cancel(b1, 3))
    assert (lab.label, lab.reason, lab.revision) == (0, "cancelled", 1)
    [neg] = restored.advance(T0 + timedelta(hours=25))
    assert neg.decision_id == d2.decision_id
    with pytest.raises(LabelJoinError, match="horizon_s"):
        LabelJoiner(timedelta(hours=2)).load_state(state)


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(FeedbackConfigError, match="horizon"):
        LabelJoiner(timedelta(0))
    joiner = LabelJoiner(H)
    with pytest.raises(LabelJoinError, match="watermark"):
        joiner.advance(datetime(2026, 1, 1))  # noqa: DTZ001 - naive on purpose
    with pytest.raises(LabelJoinError, match="event_type"):
        joiner.add_outcome(decision())  # type: ignore[arg-type]
    joiner.advance(T0 + timedelta(hours=5))
    assert joiner.advance(T0) == [] and joiner.watermark == T0 + timedelta(hours=5)
