"""Producer SDK and consumer helper against the real Kafka broker."""

from __future__ import annotations

import uuid
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta

import pytest
from confluent_kafka import Consumer

from events.admin import create_topics
from events.config import KafkaConfig
from events.consumer import DLQ_HEADERS, EventConsumer
from events.errors import EventValidationError
from events.models import SearchEvent, ViewEvent, dumps
from events.producer import Producer
from events.topics import TOPICS

pytestmark = pytest.mark.integration


def _next_month() -> date:
    """A stay date a month after today: a search's stay may not be in the past (a fixed date expires)."""
    return datetime.now(tz=UTC).date() + timedelta(days=30)


def _events(n: int) -> list[ViewEvent]:
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    return [
        ViewEvent(
            hotel_id=f"h{i % 17}",
            room_type="standard",
            stay_date=date(2026, 12, 1) + timedelta(days=i % 30),
            event_time=t0 + timedelta(milliseconds=i),
            price_shown=80.0 + (i % 50),
        )
        for i in range(n)
    ]


def _drain(config: KafkaConfig, topic: str, expect: int) -> list:
    consumer = Consumer(
        {
            "bootstrap.servers": config.bootstrap_servers,
            "group.id": f"g{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([config.topic(topic)])
    out: list = []
    idle = 0
    while len(out) < expect and idle < 20:
        batch = consumer.consume(num_messages=5000, timeout=1.0)
        batch = [m for m in batch if m.error() is None]
        idle = idle + 1 if not batch else 0
        out.extend(batch)
    consumer.close()
    return out


def test_ten_thousand_events_round_trip_in_order(kafka_config: KafkaConfig) -> None:
    create_topics(kafka_config, [TOPICS["behaviour.events"], TOPICS["behaviour.events.dlq"]])
    sent = _events(10_000)
    with Producer(kafka_config, topic="behaviour.events") as producer:
        producer.send_many(sent)
    assert producer.stats.delivered == 10_000
    assert producer.stats.failed == 0

    got = _drain(kafka_config, "behaviour.events", 10_000)
    assert len(got) == 10_000
    by_id = {e.event_id.hex: dumps(e) for e in sent}
    per_hotel: dict[bytes, list[int]] = defaultdict(list)
    for msg in got:
        event_id = uuid.UUID(msg.value().split(b'"event_id":"')[1][:36].decode()).hex
        assert msg.value() == by_id.pop(event_id)
        per_hotel[msg.key()].append(int(msg.value().split(b'"event_time":')[1].split(b",")[0]))
    assert not by_id
    for times in per_hotel.values():
        assert times == sorted(times)  # one hotel's events keep their order (one partition per key)


def test_invalid_event_is_refused_before_sending(kafka_config: KafkaConfig) -> None:
    create_topics(kafka_config, [TOPICS["behaviour.events"]])
    with Producer(kafka_config, topic="behaviour.events") as producer:
        with pytest.raises(EventValidationError) as err:
            producer.send(
                {"event_type": "view", "hotel_id": "h1", "room_type": "std", "stay_date": "2026-12-01",
                 "price_shown": -5}
            )
        assert err.value.field == "price_shown"
        assert err.value.value == -5
        assert "greater than 0" in str(err.value)
        with pytest.raises(EventValidationError) as err2:
            producer.send({"event_type": "teleport", "hotel_id": "h1"})
        assert err2.value.field == "event_type"
    assert producer.stats.sent == 0


def test_malformed_record_goes_to_dlq_and_consumer_goes_on(kafka_config: KafkaConfig) -> None:
    create_topics(kafka_config, [TOPICS["behaviour.events"], TOPICS["behaviour.events.dlq"]])
    good = SearchEvent(hotel_id="h1", room_type="std", stay_date=_next_month())
    with Producer(kafka_config, topic="behaviour.events") as producer:
        producer.send(good)
        producer.send_raw(b"h1", b"{not json")
        producer.send_raw(b"h1", b'{"event_type":"view","hotel_id":"h1"}')
        producer.send(good.model_copy(update={"event_id": uuid.uuid4()}))
    seen = []
    with EventConsumer(kafka_config, topic="behaviour.events", group_id=f"g{uuid.uuid4().hex}") as consumer:
        for record in consumer.records(idle_timeout_s=3.0):
            seen.append(record)
    assert len(seen) == 2
    assert consumer.stats.dead_lettered == 2
    dlq = _drain(kafka_config, "behaviour.events.dlq", 2)
    assert len(dlq) == 2
    for msg in dlq:
        headers = dict(msg.headers())
        assert set(DLQ_HEADERS) <= set(headers)
        assert headers["source_topic"] == kafka_config.topic("behaviour.events").encode()
        assert int(headers["source_offset"]) in (1, 2)
        assert headers["error_class"] == b"EventValidationError"
    reasons = sorted(dict(m.headers())["error_message"].decode() for m in dlq)
    assert any("'event_id'" in r for r in reasons)  # the wire envelope comes first, as in the Flink job


def test_sdk_flags_dataset_edge_cases_and_checks_stay_dates_in_the_hotels_zone(kafka_config: KafkaConfig) -> None:
    """A complimentary day-use booking goes out with its flags header; an arrival-evening search
    west of UTC is accepted for a New York hotel and refused for a Tokyo one, before sending."""
    from events.contract import FLAGS_HEADER, HotelProfile
    from events.models import BookingEvent

    create_topics(kafka_config, [TOPICS["behaviour.events"]])
    evening = datetime(2026, 7, 1, 23, 30, tzinfo=UTC)  # 19:30 in New York, 08:30 next day in Tokyo
    hotels = {"ny": HotelProfile(zone="America/New_York"), "tokyo": HotelProfile(zone="Asia/Tokyo")}
    free = BookingEvent(hotel_id="ny", room_type="std", stay_date=date(2026, 7, 1), event_time=evening,
                        price_paid=0.0, nights=0)
    with Producer(kafka_config, topic="behaviour.events", hotels=hotels) as producer:
        producer.send(free)
        producer.send({"event_type": "search", "hotel_id": "ny", "room_type": "std", "stay_date": "2026-07-01",
                       "event_time": int(evening.timestamp() * 1000)})
        with pytest.raises(EventValidationError) as refused:
            producer.send({"event_type": "search", "hotel_id": "tokyo", "room_type": "std",
                           "stay_date": "2026-07-01", "event_time": int(evening.timestamp() * 1000)})
    assert refused.value.field == "stay_date"
    assert (producer.stats.delivered, producer.stats.flagged) == (2, 1)
    got = _drain(kafka_config, "behaviour.events", 2)
    headers = [dict(m.headers() or []) for m in got]
    assert headers[0][FLAGS_HEADER] == b"complimentary,day_use"
    assert FLAGS_HEADER not in headers[1]


def test_a_2mb_record_is_dead_lettered_cut_to_size_and_the_consumer_goes_on(kafka_config: KafkaConfig) -> None:
    from events.contract import DLQ_PAYLOAD_BYTES

    create_topics(kafka_config, [TOPICS["behaviour.events"], TOPICS["behaviour.events.dlq"]])
    good = SearchEvent(hotel_id="h1", room_type="std", stay_date=_next_month())
    huge = b'{"event_type": "view", "pad": "' + b"x" * 2_000_000 + b'"}'
    # a third-party client that lets it through (lz4 packs it far below the broker's limit)
    with Producer(kafka_config, topic="behaviour.events", extra={"message.max.bytes": 4_000_000}) as producer:
        producer._producer.produce(producer.topic, value=huge, key=b"h1")  # raw: past the SDK's own size check
        producer.send(good)
    with EventConsumer(kafka_config, topic="behaviour.events", group_id=f"g{uuid.uuid4().hex}") as consumer:
        seen = list(consumer.records(idle_timeout_s=3.0))
    assert [r.event_id for r in seen] == [good.event_id]
    (dead,) = _drain(kafka_config, "behaviour.events.dlq", 1)
    headers = dict(dead.headers())
    assert int(headers["payload_bytes"]) == len(huge) and len(dead.value()) == DLQ_PAYLOAD_BYTES
    assert b"1000000 bytes" in headers["error_message"]
