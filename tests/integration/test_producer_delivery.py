"""Producer SDK on the real broker: failed deliveries raise, the body's own error wins, big records are refused."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, date, datetime

import pytest
from confluent_kafka import Consumer
from pydantic import SecretStr

from events.admin import create_topic
from events.config import KafkaConfig
from events.errors import DeliveryError, EventValidationError
from events.models import MAX_RECORD_BYTES, ViewEvent
from events.producer import Producer

pytestmark = pytest.mark.integration

_FAIL_FAST = {"message.timeout.ms": 5_000}
"""A record for an unknown topic waits for metadata up to its timeout: 5 s keeps the test short."""


def _view(hotel_id: str = "h1") -> ViewEvent:
    return ViewEvent(hotel_id=hotel_id, room_type="std", stay_date=date(2026, 12, 24),
                     event_time=datetime(2026, 12, 1, tzinfo=UTC), price_shown=120.0)


def _count(config: KafkaConfig, topic: str, expect: int) -> int:
    consumer = Consumer({"bootstrap.servers": config.bootstrap_servers, "group.id": f"g{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got, idle = 0, 0
    while got < expect and idle < 15:
        batch = [m for m in consumer.consume(num_messages=100, timeout=1.0) if m.error() is None]
        idle = idle + 1 if not batch else 0
        got += len(batch)
    consumer.close()
    return got


def test_flush_raises_naming_the_count_and_first_error_for_a_missing_topic(kafka_config: KafkaConfig) -> None:
    # the broker runs with auto.create.topics.enable=false (infra/kafka.py): the topic never appears
    producer = Producer(kafka_config, topic="no-such-topic", extra=_FAIL_FAST)
    producer.send(_view())
    producer.send(_view("h2"))
    with pytest.raises(DeliveryError) as err:
        producer.flush(timeout_s=30)
    text = str(err.value)
    assert "2 records failed delivery" in text
    assert "first error:" in text and "topic" in text.lower()
    assert (producer.stats.sent, producer.stats.failed, producer.stats.delivered) == (2, 2, 0)
    producer.flush(timeout_s=5)  # the count restarts: nothing new failed, nothing raised


def test_close_raises_too(kafka_config: KafkaConfig) -> None:
    producer = Producer(kafka_config, topic="no-such-topic", extra=_FAIL_FAST)
    producer.send(_view())
    with pytest.raises(DeliveryError, match="1 records failed delivery"):
        producer.close(timeout_s=30)


def test_context_manager_raises_delivery_error_when_the_body_succeeded(kafka_config: KafkaConfig) -> None:
    with pytest.raises(DeliveryError, match="1 records failed delivery"), Producer(
        kafka_config, topic="no-such-topic", extra=_FAIL_FAST
    ) as producer:
        producer.send(_view())


def test_context_manager_keeps_the_bodys_own_exception(
    kafka_config: KafkaConfig, caplog: pytest.LogCaptureFixture
) -> None:
    class BodyFailed(RuntimeError):
        pass

    caplog.set_level(logging.ERROR, logger="events.producer")
    with pytest.raises(BodyFailed) as err, Producer(kafka_config, topic="no-such-topic", extra=_FAIL_FAST) as p:
        p.send(_view())
        msg = "the caller's own failure"
        raise BodyFailed(msg)
    notes = getattr(err.value, "__notes__", [])
    assert len(notes) == 1 and "1 records failed delivery" in notes[0]
    assert any("BodyFailed" in r.getMessage() and "failed delivery" in r.getMessage() for r in caplog.records)


def test_successful_deliveries_do_not_raise_and_arrive(kafka_config: KafkaConfig) -> None:
    create_topic(kafka_config, "ok.events", partitions=1)
    with Producer(kafka_config, topic="ok.events") as producer:
        for i in range(50):
            producer.send(_view(f"h{i}"))
    assert (producer.stats.delivered, producer.stats.failed) == (50, 0)
    assert _count(kafka_config, kafka_config.topic("ok.events"), 50) == 50


def test_oversized_record_is_refused_before_sending_at_the_default_limit(kafka_config: KafkaConfig) -> None:
    create_topic(kafka_config, "big.events", partitions=1)
    producer = Producer(kafka_config, topic="big.events")
    assert producer.max_record_bytes == MAX_RECORD_BYTES
    with pytest.raises(EventValidationError) as err:
        producer.send_raw(b"h1", b"x" * MAX_RECORD_BYTES)
    assert err.value.field == "<record>"
    assert err.value.value == f"{MAX_RECORD_BYTES + 2} bytes"
    assert f"at most {MAX_RECORD_BYTES} bytes" in err.value.expected
    assert producer.stats.sent == 0
    producer.send_raw(b"h1", b"x" * 900_000)  # under the limit: delivered
    producer.flush(timeout_s=30)
    assert producer.stats.delivered == 1


def test_oversized_event_is_refused_at_a_configured_limit(kafka_config: KafkaConfig) -> None:
    create_topic(kafka_config, "small.events", partitions=1)
    producer = Producer(kafka_config, topic="small.events", extra={"message.max.bytes": 1_000})
    event = {**_view().model_dump(mode="json"), "segment": "s" * 1_200}
    with pytest.raises(EventValidationError) as err:
        producer.send(event)
    assert err.value.field in {"<record>", "segment"}  # the size limit, or a contract bound on segment if any
    assert producer.stats.sent == 0
    producer.send(_view())
    producer.flush(timeout_s=30)
    assert producer.stats.delivered == 1


def test_a_failing_sasl_login_leaks_no_password(
    kafka_config: KafkaConfig, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    secret = "k4fka-s3cret-91b2"
    config = kafka_config.model_copy(update={"security_protocol": "SASL_PLAINTEXT", "sasl_username": "svc",
                                             "sasl_password": SecretStr(secret)})
    producer = Producer(config, topic="sasl.events", extra={**_FAIL_FAST, "sasl.mechanisms": "PLAIN"})
    producer.send(_view())
    with pytest.raises(DeliveryError) as err:  # the broker's listener is PLAINTEXT: the SASL login never completes
        producer.flush(timeout_s=30)
    assert "1 records failed delivery" in str(err.value)
    assert secret not in str(err.value) and secret not in repr(config)
    assert all(secret not in text for text in producer.stats.errors)
    captured = capfd.readouterr()
    assert secret not in captured.out + captured.err
    assert all(secret not in record.getMessage() for record in caplog.records)
