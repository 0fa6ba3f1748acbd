"""Label service on real Kafka: exact labels for a scripted sequence, and a crash mid-batch."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from delivery.cold_start import MemoryHistoryStore
from events.admin import create_topics
from events.config import KafkaConfig
from events.consumer import DLQ_HEADERS
from events.models import BookingEvent, CancellationEvent, OutcomeLabel, PricingDecision, SearchEvent, parse_event
from events.producer import Producer
from events.topics import TOPICS
from feedback.services.kafka_io import drain
from feedback.services.label_service import LabelService, LabelServiceConfig
from infra.config import StackConfig

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

    counts = MemoryHistoryStore()  # serve's cold-start label counts, set by the service before each commit
    service = LabelService(config, counts=counts)
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

    restarted = LabelService(config, counts=counts)  # same transactional.id: fences the dead one, aborts its txn
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
    # four decisions labelled once each, through the aborted batch's replay; booked: d1 and d2 (d3 cancelled)
    assert counts.counts("h1") == (4, 2) and restarted.by_hotel == {"h1": (4, 2)}
    by_id = {(str(x.decision_id), x.revision): x for x in labels if isinstance(x, OutcomeLabel)}
    assert by_id[(str(d2.decision_id), 0)].event_time == d2.event_time + timedelta(hours=24)
    assert by_id[(str(d1.decision_id), 0)].features["lead_time_days"] == 19.0

    dlq = drain(kafka_config, "behaviour.events.dlq", idle_s=1.0)
    assert len(dlq) == 1
    headers = dict(dlq[0].headers() or [])
    assert tuple(headers)[:5] == DLQ_HEADERS
    assert headers["source_topic"] == kafka_config.topic("behaviour.events").encode()


def test_a_new_hotel_moves_from_rules_to_transfer_to_own_as_the_label_service_joins_its_labels(
    stack: StackConfig, tmp_path: Path
) -> None:
    """Cold start deployed: ``serve`` and ``services run labels`` as processes; the counts come from the joins."""
    import subprocess
    import time

    import httpx
    import redis

    from delivery.cold_start import RedisHistoryStore, history_prefix
    from routing.calibration import Thresholds
    from routing.threshold_state import ThresholdStore
    from tests.integration.serve_helpers import (
        PRICESTREAM,
        STAY_DATE,
        request_body,
        seed_models,
        stack_env,
        start_serve,
    )

    env = stack_env(stack, tmp_path / "state", PRICESTREAM_COLD_START_OWN_AFTER_LABELS="3",
                    PRICESTREAM_COLD_START_OWN_AFTER_BOOKINGS="3", PRICESTREAM_COLD_START_COUNTS_TTL_S="0",
                    PRICESTREAM_OPS_PORT="0")
    kafka = KafkaConfig(bootstrap_servers=stack.kafka_bootstrap, topic_prefix=env["PRICESTREAM_TOPIC_PREFIX"])
    create_topics(kafka)
    seed_models(env)
    from pricestream.settings import Settings

    ThresholdStore(Settings(state_dir=Path(env["PRICESTREAM_STATE_DIR"])).router_thresholds()).publish(
        Thresholds(rules_below=0.0, heavy_above=0.99), at=datetime.now(tz=UTC), reason="test: models price all")
    client = redis.Redis.from_url(stack.redis_url)
    store = RedisHistoryStore(client, prefix=history_prefix(env["PRICESTREAM_FEAST_PROJECT"]))  # type: ignore[arg-type]
    hotel = f"new-{uuid.uuid4().hex[:8]}"
    server = start_serve(env, tmp_path / "serve.log")
    labels = subprocess.Popen([PRICESTREAM, "services", "run", "labels"], env=env,
                              stdout=(tmp_path / "labels.log").open("ab"), stderr=subprocess.STDOUT)
    try:
        now_ms = int(time.time() * 1000)
        with httpx.Client(base_url=server.url, timeout=30.0) as http:
            def price(i: int, at_ms: int) -> dict:
                answer = http.post("/v1/price", json={**request_body(i, hotel=hotel), "event_time": at_ms})
                assert answer.status_code == 200, answer.text
                return answer.json()

            first = price(0, now_ms - 2 * 86_400_000)  # its first request, two days ago
            transfer = [price(i, now_ms) for i in (1, 2, 3)]
            assert (first["tier"], first["rule_ids"][-1]) == ("rules", "cold_start:rules")
            assert [d["rule_ids"][-1] for d in transfer] == ["cold_start:transfer"] * 3
            assert store.counts(hotel) == (0, 0)
            booked = transfer[:2] + [first]  # three bookings of its decisions, one decision left unbooked
            behaviour = Producer(kafka, topic="behaviour.events")
            behaviour.send_many([BookingEvent(hotel_id=hotel, room_type="std", stay_date=date.fromisoformat(STAY_DATE),
                                              event_time=datetime.now(tz=UTC), price_paid=d["price"],
                                              decision_id=d["decision_id"]) for d in booked])
            behaviour.flush()
            deadline = time.monotonic() + 120.0  # a bound on waiting for the join, not an assertion
            while store.counts(hotel) != (3, 3) and time.monotonic() < deadline and labels.poll() is None:
                time.sleep(0.5)
            assert store.counts(hotel) == (3, 3), (tmp_path / "labels.log").read_text()[-2000:]
            after = price(4, now_ms + 1000)
        assert after["tier"] in ("light", "heavy") and after["rule_ids"][-1] == "cold_start:own"
        assert after["model_version"] is not None
        assert {str(x.decision_id) for x in _labels_of(kafka, hotel)} == {d["decision_id"] for d in booked}
    finally:
        labels.terminate()
        labels.wait(60)
        server.terminate()
        client.close()


def _labels_of(kafka: KafkaConfig, hotel: str) -> list[OutcomeLabel]:
    found = [parse_event(m.value() or b"") for m in drain(kafka, "feedback.labels", idle_s=2.0)]
    return [x for x in found if isinstance(x, OutcomeLabel) and x.hotel_id == hotel]
