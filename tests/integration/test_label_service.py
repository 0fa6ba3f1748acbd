"""Label service on real Kafka: exact labels for a scripted sequence, and a crash mid-batch."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from events.admin import create_topics
from events.config import KafkaConfig
from events.consumer import DLQ_HEADERS
from events.models import BookingEvent, CancellationEvent, OutcomeLabel, PricingDecision, SearchEvent, parse_event
from events.producer import Producer
from events.topics import TOPICS
from feedback.services.kafka_io import drain
from feedback.services.label_service import LabelService, LabelServiceConfig

pytestmark = pytest.mark.integration

T0 = datetime(2026, 3, 1, tzinfo=UTC)
STAY = date(2026, 3, 20)


class Crash(RuntimeError):
    """Raised between produce and commit: the process 'dies' with an open transaction."""


def _decision(hours: float, prob: float | None = 0.5) -> PricingDecision:
    return PricingDecision(
        hotel_id="h1", room_type="std", stay_date=STAY, event_time=T0 + timedelta(hours=hours),
        request_id=uuid.uuid4(), price=100.0, tier="light", complexity=0.2, latency_ms=1.0,
        expected_booking_prob=prob, features={"occupancy": 0.5},
    )


def _booking(d: PricingDecision, hours: float, paid: float = 100.0) -> BookingEvent:
    return BookingEvent(hotel_id="h1", room_type="std", stay_date=STAY, event_time=T0 + timedelta(hours=hours),
                        price_paid=paid, decision_id=d.decision_id)


def _search(hours: float) -> SearchEvent:
    return SearchEvent(hotel_id="h1", room_type="std", stay_date=STAY, event_time=T0 + timedelta(hours=hours))


def _feed(service: LabelService, n: int) -> int:
    """Process batches until ``n`` records were consumed; returns the labels emitted."""
    consumed = labels = 0
    for _ in range(60):
        batch = service.process_batch()
        consumed += batch.consumed
        labels += batch.labels
        if consumed >= n:
            return labels
    msg = f"consumed {consumed} of {n} records"
    raise AssertionError(msg)


def test_labels_exact_and_restart_without_duplicates(kafka_config: KafkaConfig, tmp_path: Path) -> None:
    names = ("pricing.decisions", "behaviour.events", "feedback.labels",
             "behaviour.events.dlq", "pricing.decisions.dlq")
    create_topics(kafka_config, [TOPICS[n] for n in names])
    config = LabelServiceConfig(kafka=kafka_config, checkpoint_dir=tmp_path / "ckpt", group_id="labels-test",
                                transactional_id=f"labels-{uuid.uuid4().hex[:8]}", max_batch=50, poll_timeout_s=0.5)
    d1, d2, d3, d4 = _decision(0, prob=0.05), _decision(1), _decision(2), _decision(3)
    b3 = _booking(d3, 5)
    decisions = Producer(kafka_config, topic="pricing.decisions")
    behaviour = Producer(kafka_config, topic="behaviour.events")

    service = LabelService(config)
    decisions.send_many([d1, d2, d3, d4])
    decisions.flush()
    behaviour.send_many([_booking(d1, 2, paid=150.0), b3, _search(4)])
    behaviour.send_raw(b"h1", b"{not json")
    behaviour.flush()
    assert _feed(service, 8) == 2
    assert service.differences.summary()["by_rule"] == {"booked_low_prob": 1, "price_far": 1}

    # Phase 3 is processed, its labels produced, then the process dies before the commit.
    behaviour.send_many([CancellationEvent(hotel_id="h1", room_type="std", stay_date=STAY,
                                           event_time=T0 + timedelta(hours=10), booking_id=b3.booking_id),
                         _search(26)])
    behaviour.flush()

    def crash(produced: int) -> None:
        raise Crash(produced)

    with pytest.raises(Crash):
        for _ in range(20):
            service.process_batch(before_commit=crash)

    restarted = LabelService(config)  # same transactional.id: fences the dead one, aborts its transaction
    assert restarted.restored_seq is not None
    assert restarted.joiner.n_tracked == 4
    _feed(restarted, 2)
    behaviour.send_many([_booking(d2, 20), _search(28)])  # late but inside d2's horizon; then d4 expires
    behaviour.flush()
    _feed(restarted, 2)
    restarted.close()

    labels = [parse_event(m.value() or b"") for m in drain(kafka_config, "feedback.labels")]
    assert all(isinstance(x, OutcomeLabel) for x in labels)
    got = sorted((str(x.decision_id), x.revision, x.reason, x.label) for x in labels if isinstance(x, OutcomeLabel))
    expected = sorted([
        (str(d1.decision_id), 0, "booked", 1),
        (str(d3.decision_id), 0, "booked", 1),
        (str(d3.decision_id), 1, "cancelled", 0),
        (str(d2.decision_id), 0, "no_booking", 0),
        (str(d2.decision_id), 1, "late_booking", 1),
        (str(d4.decision_id), 0, "no_booking", 0),
    ])
    assert got == expected
    by_id = {(str(x.decision_id), x.revision): x for x in labels if isinstance(x, OutcomeLabel)}
    assert by_id[(str(d2.decision_id), 0)].event_time == d2.event_time + timedelta(hours=24)
    assert by_id[(str(d1.decision_id), 0)].features["lead_time_days"] == 19.0

    dlq = drain(kafka_config, "behaviour.events.dlq", idle_s=1.0)
    assert len(dlq) == 1
    headers = dict(dlq[0].headers() or [])
    assert tuple(headers)[:5] == DLQ_HEADERS
    assert headers["source_topic"] == kafka_config.topic("behaviour.events").encode()
