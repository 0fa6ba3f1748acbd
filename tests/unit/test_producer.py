"""Producer.send refuses records that skipped validation, before anything is queued (no broker needed)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from events.config import KafkaConfig
from events.errors import EventValidationError
from events.models import InventoryEvent, ViewEvent, dumps
from events.producer import Producer, _revalidate, producer_conf
from market._fast import build

_T = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def producer() -> Iterator[Producer]:
    # Nothing listens on port 1: librdkafka connects lazily, and no record may ever be queued here.
    p = Producer(KafkaConfig(bootstrap_servers="127.0.0.1:1"), topic="t", extra={"log_level": 0})
    yield p
    assert p.stats.sent == 0


def _view(**fields: object) -> ViewEvent:
    base = {"hotel_id": "h1", "room_type": "std", "stay_date": date(2026, 12, 1), "event_time": _T, "price_shown": 99.0}
    return ViewEvent(**{**base, **fields})  # type: ignore[arg-type]


def test_model_construct_with_a_bad_price_is_refused(producer: Producer) -> None:
    bad = ViewEvent.model_construct(**{**_view().__dict__, "price_shown": -5.0})
    with pytest.raises(EventValidationError) as err:
        producer.send(bad)
    assert (err.value.field, err.value.value) == ("price_shown", -5.0)


def test_model_copy_update_skips_validation_but_send_does_not(producer: Producer) -> None:
    bad = _view().model_copy(update={"channel": "fax"})
    with pytest.raises(EventValidationError) as err:
        producer.send(bad)
    assert err.value.field == "channel"


def test_naive_time_in_an_unvalidated_record_is_refused(producer: Producer) -> None:
    bad = ViewEvent.model_construct(**{**_view().__dict__, "event_time": datetime(2026, 11, 1, 12, 0)})  # noqa: DTZ001
    with pytest.raises(EventValidationError) as err:
        producer.send(bad)
    assert err.value.field == "event_time"


def test_missing_field_and_foreign_objects_are_refused(producer: Producer) -> None:
    with pytest.raises(EventValidationError) as err:
        producer.send(InventoryEvent.model_construct(hotel_id="h1", room_type="std", stay_date=date(2026, 12, 1)))
    assert err.value.field in {"rooms_left", "capacity"}
    with pytest.raises(EventValidationError) as err2:
        producer.send("not an event")  # type: ignore[arg-type]
    assert (err2.value.field, err2.value.value) == ("<record>", "str")


def test_revalidation_normalises_to_utc_and_keeps_the_wire_bytes() -> None:
    plus2 = timezone(timedelta(hours=2))
    built = build(ViewEvent, {**_view().__dict__, "event_time": _T.astimezone(plus2)})
    checked = _revalidate(built)
    assert checked.event_time.tzinfo is UTC
    assert dumps(checked) == dumps(_view(event_id=built.event_id))
    assert json.loads(dumps(checked))["event_time"] == 1793534400000


def test_revalidation_returns_an_equal_record_for_a_valid_one() -> None:
    event = _view(decision_id=uuid.uuid4())
    assert _revalidate(event) == event
    assert _revalidate(event) is not event


def test_producer_conf_keeps_the_delivery_guarantees() -> None:
    conf = producer_conf(KafkaConfig(linger_ms=7), extra={"compression.type": "zstd"})
    assert (conf["acks"], conf["enable.idempotence"], conf["linger.ms"]) == ("all", True, 7)
    assert conf["compression.type"] == "zstd"


def _wire(**patch: object) -> dict[str, object]:
    """A valid view as it travels (every field, JSON types), with ``patch`` applied."""
    return {**_view().model_dump(mode="json"), **patch}


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"event_time": 1e20}, "event_time"),  # datetime.fromtimestamp raised OSError [Errno 75] here
        ({"event_time": -1e20}, "event_time"),
        ({"event_time": float("nan")}, "event_time"),
        ({"price_shown": float("nan")}, "price_shown"),
        ({"price_shown": float("inf")}, "price_shown"),
        ({"price_shown": "NaN"}, "price_shown"),
        ({"schema_version": 2}, "schema_version"),
        ({"hotel_id": "h" * 200}, "hotel_id"),
        ({"hotel_id": 42}, "hotel_id"),
    ],
)
def test_the_sdk_refuses_the_issue_cases_with_event_validation_error(
    producer: Producer, patch: dict[str, object], field: str
) -> None:
    with pytest.raises(EventValidationError) as err:
        producer.send(_wire(**patch))
    assert err.value.field == field


def test_an_oversized_record_is_refused_before_queueing(producer: Producer) -> None:
    small = Producer(KafkaConfig(bootstrap_servers="127.0.0.1:1"), topic="t",
                     extra={"log_level": 0, "message.max.bytes": 1_000})
    assert small.max_record_bytes == 1_000
    with pytest.raises(EventValidationError) as err:
        small.send_raw(b"h1", b"x" * 999)
    assert (err.value.field, err.value.value) == ("<record>", "1001 bytes")
    assert small.stats.sent == 0
    assert producer.max_record_bytes == 1_000_000
