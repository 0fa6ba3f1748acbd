"""The event contract on the SDK path: generated valid and one-defect events, and the issue's hostile cases."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime
from typing import Any

import pytest
from hypothesis import given, settings

from events.contract import HotelProfile, field_spec, flags, job_spec
from events.errors import EventValidationError
from events.models import BookingEvent, CancellationEvent, SearchEvent, ViewEvent, dumps, parse_event
from tests.strategies import encode, invalid_event, stay_before_event, valid_event

T = datetime(2026, 11, 30, 20, 30, tzinfo=UTC)  # 20:30 UTC: still the 30th in New York, already the 1st nowhere


def _view(**patch: Any) -> bytes:
    body = json.loads(dumps(ViewEvent(hotel_id="h1", room_type="std", stay_date=date(2026, 12, 24), event_time=T,
                                      price_shown=120.0)))
    return json.dumps(body | patch).encode()


def _refused(raw: bytes | str, **kw: Any) -> EventValidationError:
    with pytest.raises(EventValidationError) as info:
        parse_event(raw, **kw)
    return info.value


@settings(max_examples=300, deadline=None)
@given(valid_event())
def test_generated_valid_events_parse(event: dict[str, Any]) -> None:
    record = parse_event(encode(event))
    assert record.event_type == event["event_type"]
    assert json.loads(dumps(record))["event_time"] == event["event_time"]


@settings(max_examples=500, deadline=None)
@given(invalid_event())
def test_generated_one_defect_events_are_refused_naming_the_field(sample: tuple[dict[str, Any], str]) -> None:
    event, field = sample
    assert _refused(encode(event)).field == field


@settings(max_examples=100, deadline=None)
@given(stay_before_event())
def test_a_stay_before_the_event_date_is_refused_in_every_zone(sample: tuple[dict[str, Any], str]) -> None:
    event, field = sample
    assert _refused(encode(event)).field == field


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"price_shown": "NaN"}, "price_shown"),
        ({"schema_version": 2}, "schema_version"),
        ({"hotel_id": 42}, "hotel_id"),
        ({"room_type": 7}, "room_type"),
        ({"hotel_id": "h" * 200}, "hotel_id"),
        ({"event_id": "not-a-uuid"}, "event_id"),
        ({"event_time": -1}, "event_time"),
        ({"event_time": 1e20}, "event_time"),
        ({"price_shown": 1e9 * 10}, "price_shown"),
        ({"hotel_id": "h\u2028"}, "hotel_id"),
        ({"hotel_id": "h\u0085"}, "hotel_id"),
    ],
)
def test_issue_cases_the_flink_job_once_accepted_are_refused(patch: dict[str, Any], field: str) -> None:
    error = _refused(_view(**patch))
    assert error.field == field
    assert "Input should be" not in error.expected  # "expected Input should be ..." read badly


@pytest.mark.parametrize("raw", [
    _view()[:-1] + b',"x":1} trailing',
    _view() + b" garbage",
    _view().replace(b'"h1"', b'"h\xff("'),
    _view().replace(b'"h1"', b'"h\\ud800"'),
    b"",
    b"[1, 2]",
])
def test_malformed_text_is_refused_as_a_record(raw: bytes) -> None:
    assert _refused(raw).field == "<record>"


def test_a_cancellation_without_booking_id_is_refused() -> None:
    body = json.loads(_view())
    body.pop("price_shown")
    body["event_type"] = "cancellation"
    assert _refused(json.dumps(body)).field == "booking_id"


def test_nights_above_sixty_is_refused_by_every_path_the_same() -> None:
    assert _refused(_view(event_type="search", price_shown=None)).field in {"price_shown"}
    search = json.loads(dumps(SearchEvent(hotel_id="h1", room_type="std", stay_date=date(2026, 12, 24), event_time=T)))
    assert _refused(json.dumps(search | {"nights": 61})).field == "nights"


def test_constructing_a_model_raises_our_error_with_a_readable_expectation() -> None:
    with pytest.raises(EventValidationError) as info:
        BookingEvent(hotel_id="h1", room_type="std", stay_date=date(2026, 12, 24), price_paid=-5.0, event_time=T)
    assert (info.value.field, info.value.value) == ("price_paid", -5.0)
    assert info.value.expected == "greater than or equal to 0"


def test_complimentary_and_day_use_bookings_are_valid_and_flagged() -> None:
    booking = BookingEvent(hotel_id="Resort Hotel", room_type="A", stay_date=date(2026, 12, 1), price_paid=0.0,
                           nights=0, event_time=T)
    again = parse_event(dumps(booking))
    assert flags(again) == ("complimentary", "day_use")


def test_a_price_outlier_is_kept_and_flagged_against_the_hotels_range() -> None:
    view = parse_event(_view(price_shown=5400.0))
    assert flags(view) == ("price_outlier",)
    assert flags(view, {"h1": HotelProfile(price_range=(100.0, 9000.0))}) == ()
    assert flags(parse_event(_view(price_shown=50.0)), {"h1": HotelProfile(price_range=(100.0, 900.0))}) == (
        "price_outlier",)


def test_a_cancellation_of_an_unknown_booking_is_accepted() -> None:
    cancel = CancellationEvent(hotel_id="h1", room_type="std", stay_date=date(2026, 12, 24), event_time=T,
                               booking_id=uuid.uuid4())
    assert parse_event(dumps(cancel)).booking_id == cancel.booking_id


def test_stay_dates_compare_in_the_hotels_local_zone() -> None:
    """20:30 UTC on Nov 30 is 15:30 in New York: an arrival that evening is valid there, not in Tokyo."""
    arrival = _view(stay_date="2026-11-30")
    new_york = {"hotels": {"h1": HotelProfile(zone="America/New_York")}}
    tokyo = {"hotels": {"h1": HotelProfile(zone="Asia/Tokyo")}}
    assert parse_event(arrival, context=new_york).stay_date == date(2026, 11, 30)
    assert parse_event(arrival).stay_date == date(2026, 11, 30)  # no profile: the westmost zone accepts it
    assert _refused(arrival, context=tokyo).field == "stay_date"


def test_the_job_spec_is_derived_from_the_models() -> None:
    rules = {r["name"]: r for r in field_spec()["booking"]}
    assert rules["price_paid"]["minimum"] == 0 and rules["nights"]["minimum"] == 0
    assert rules["hotel_id"]["maxLength"] == 64 and rules["event_id"]["required"]
    assert rules["schema_version"]["values"] == [1]
    assert job_spec({"h1": HotelProfile(zone="Asia/Tokyo")})["hotels"]["h1"]["zone"] == "Asia/Tokyo"
