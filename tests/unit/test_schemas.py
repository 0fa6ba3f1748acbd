"""The committed JSON Schema files match the models, and real records validate against them."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker

from events.models import (
    CONTRACT,
    SCHEMA_VERSION,
    BookingEvent,
    CancellationEvent,
    CompetitorRateEvent,
    InventoryEvent,
    OutcomeLabel,
    PricingDecision,
    PricingRequest,
    Record,
    SearchEvent,
    TrainingExample,
    ViewEvent,
    dumps,
    parse_event,
)
from events.schema_export import ENVELOPE, SCHEMA_DIR, drift, export, file_name

_REGENERATE = ".venv/bin/python -m events.schema_export"
_T = datetime(2026, 11, 3, 9, 30, 15, 123000, tzinfo=UTC)
_STAY: dict[str, Any] = {"hotel_id": "h0007", "room_type": "deluxe", "stay_date": date(2026, 12, 24), "event_time": _T}
_ID = uuid.UUID("00000000-0000-4000-8000-000000000001")


def _samples() -> dict[str, Record]:
    feats = {"occupancy": 0.8, "comp_rate_median": None}
    return {
        "search": SearchEvent(**_STAY, nights=3, guests=1, channel="mobile", segment="business"),
        "view": ViewEvent(**_STAY, price_shown=131.5, decision_id=_ID),
        "booking": BookingEvent(**_STAY, price_paid=129.0, rooms=2, nights=2, channel="ota"),
        "cancellation": CancellationEvent(**_STAY, booking_id=_ID, rooms=1),
        "competitor_rate": CompetitorRateEvent(**_STAY, competitor_id="c3", rate=118.25),
        "inventory": InventoryEvent(**_STAY, rooms_left=0, capacity=40),
        "pricing_request": PricingRequest(**_STAY, nights=2, guest_key="g1", last_published_price=140.0),
        "pricing_decision": PricingDecision(
            **_STAY, request_id=_ID, price=142.0, tier="light", model_name="lgbm", model_version="3",
            feature_version=12, rule_ids=("floor", "lead_time"), complexity=0.42, expected_booking_prob=0.31,
            latency_ms=1.7, features=feats,
        ),
        "label": OutcomeLabel(**_STAY, decision_id=_ID, label=1, price=142.0, tier="heavy", features=feats),
        "training_example": TrainingExample(
            **_STAY, decision_id=_ID, label=0, price=99.0, features=feats, weight=2.5, strategy="uncertainty",
            selection_prob=0.4,
        ),
    }


SAMPLES = _samples()


def _validator(event_type: str) -> Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / file_name(event_type)).read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=FormatChecker())


def _errors(event_type: str, payload: dict[str, Any]) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in _validator(event_type).iter_errors(payload)]


def test_committed_schema_files_match_the_models() -> None:
    stale = drift()
    assert stale == [], f"events/schemas is out of date for {stale}; regenerate with `{_REGENERATE}` and commit"


def test_every_contract_type_has_a_sample_and_a_file() -> None:
    assert set(SAMPLES) == set(CONTRACT)
    names = sorted(p.name for p in SCHEMA_DIR.glob(f"*.v{SCHEMA_VERSION}.json"))
    assert names == sorted(file_name(kind) for kind in CONTRACT)


@pytest.mark.parametrize("event_type", sorted(CONTRACT))
def test_wire_form_of_a_sample_validates(event_type: str) -> None:
    event = SAMPLES[event_type]
    payload = json.loads(dumps(event))
    assert _errors(event_type, payload) == []
    assert payload["event_time"] == 1793698215123  # epoch ms on the wire, as the schema says
    assert parse_event(dumps(event)) == event


@pytest.mark.parametrize("event_type", sorted(CONTRACT))
def test_envelope_fields_are_required(event_type: str) -> None:
    payload = json.loads(dumps(SAMPLES[event_type]))
    for name in ENVELOPE:
        broken = {k: v for k, v in payload.items() if k != name}
        assert any(name in e for e in _errors(event_type, broken)), name


@pytest.mark.parametrize(
    ("event_type", "field", "value"),
    [
        ("view", "price_shown", -5.0),
        ("booking", "channel", "fax"),
        ("search", "schema_version", SCHEMA_VERSION + 1),
        ("inventory", "rooms_left", -1),
        ("pricing_decision", "tier", "medium"),
        ("label", "label", 2),
        ("cancellation", "booking_id", "not-a-uuid"),
        ("competitor_rate", "stay_date", "24/12/2026"),
        ("view", "event_time", "2026-11-03T09:30:15Z"),
    ],
)
def test_schema_rejects_a_bad_value(event_type: str, field: str, value: Any) -> None:
    payload = {**json.loads(dumps(SAMPLES[event_type])), field: value}
    errors = _errors(event_type, payload)
    assert len(errors) == 1 and errors[0].startswith(f"['{field}']"), errors


def test_schema_rejects_unknown_fields_like_the_models() -> None:
    payload = {**json.loads(dumps(SAMPLES["view"])), "coupon": "XMAS"}
    assert any("coupon" in e for e in _errors("view", payload))
    with pytest.raises(ValueError, match="coupon"):
        parse_event(json.dumps(payload))


def test_drift_names_edited_missing_and_orphan_files(tmp_path: Path) -> None:
    assert len(export(tmp_path)) == len(CONTRACT)
    assert drift(tmp_path) == []
    assert export(tmp_path) == []  # unchanged files are not rewritten
    (tmp_path / file_name("view")).write_text("{}\n", encoding="utf-8")
    (tmp_path / file_name("search")).unlink()
    (tmp_path / file_name("teleport")).write_text("{}\n", encoding="utf-8")
    (tmp_path / "view.v0.json").write_text("{}\n", encoding="utf-8")  # an older version is history, kept
    assert drift(tmp_path) == [file_name("search"), file_name("view"), file_name("teleport")]
    export(tmp_path)
    assert drift(tmp_path) == []
    assert (tmp_path / "view.v0.json").exists()
