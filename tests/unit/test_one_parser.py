"""One strict parser on every path a pricing request enters: HTTP, Kafka (serve-stream) and the SDK.

The same hostile bytes go through the three and must get the same verdict, naming the same field.
The feature job's JVM parser reads the same contract spec (``events.contract``); its agreement with
the SDK is checked against the real stack in ``tests/integration/test_contract_paths.py``.
"""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from events.errors import EventValidationError
from events.models import MAX_RECORD_BYTES, parse_event
from pricing.feature_source import MemoryFeatureSource
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from routing.router import TieredRouter
from serving.http import ServiceConfig, create_app
from serving.stream import parse_request

BASE = {"event_type": "pricing_request", "hotel_id": "h1", "room_type": "std", "stay_date": "2030-12-24",
        "nights": 2}


def _with(**fields: object) -> bytes:
    return json.dumps({**BASE, **fields}).encode()


HOSTILE: dict[str, tuple[bytes, str | None]] = {
    # name: (bytes, the field a refusal must name; None: accepted)
    "valid": (_with(), None),
    "nights true": (_with(nights=True), "nights"),
    "nights 1e1": (_with().replace(b'"nights": 2', b'"nights": 1e1'), "nights"),
    "schema_version true": (_with(schema_version=True), "schema_version"),
    "byte-order mark": (b"\xef\xbb\xbf" + _with(), "<body>"),
    "duplicate hotel_id": (_with()[:-1] + b', "hotel_id": "b"}', "hotel_id"),
    "escaped duplicate": (_with()[:-1] + b', "hotel_\\u0069d": "b"}', "hotel_id"),
    "zero-width id": (_with(hotel_id="h\u200b1"), "hotel_id"),
    "bidi override id": (_with(hotel_id="h\u202e1"), "hotel_id"),
    "all-space id": (_with(hotel_id="   "), "hotel_id"),
    "all-space room": (_with(room_type="\u3000"), "room_type"),
    "NaN price": (_with().replace(b'"nights": 2', b'"nights": 2, "last_published_price": NaN'),
                  "last_published_price"),
    "unknown field": (_with(surprise=1), "surprise"),
    "unknown record type": (_with(event_type="pricing_requests"), "event_type"),
    "trailing text": (_with() + b" x", "<body>"),
}


def _http(client: TestClient, raw: bytes) -> str | None:
    r = client.post("/v1/price", content=raw, headers={"content-type": "application/json"})
    if r.status_code == 200:
        return None
    assert 400 <= r.status_code < 500, r.text
    return str(r.json()["errors"][0]["field"])


def _refused(parse: object, raw: bytes) -> str | None:
    try:
        parse(raw)  # type: ignore[operator]  # the two parsers share a call shape, not a type
    except EventValidationError as exc:
        return exc.field
    return None


@pytest.fixture(scope="module")
def client() -> TestClient:
    scorer = Scorer(ScorerConfig(), rules=RuleSet.from_yaml("min_price: 50\nmax_price: 500\n"),
                    feature_source=MemoryFeatureSource(), light=None, heavy=None, router=TieredRouter())
    return TestClient(create_app(scorer, ServiceConfig(max_body_bytes=2 * MAX_RECORD_BYTES)))


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_http_kafka_and_sdk_give_one_verdict_naming_one_field(client: TestClient, name: str) -> None:
    raw, field = HOSTILE[name]
    stream = _refused(parse_request, raw)
    sdk = _refused(lambda b: parse_event(b, envelope=False), raw)
    http = _http(client, raw)
    verdicts = {"http": http, "kafka": stream, "sdk": sdk}
    refused_on = {path for path, f in verdicts.items() if f is not None}
    assert refused_on == (set() if field is None else {"http", "kafka", "sdk"}), verdicts
    if field is not None and field != "<body>":  # a whole-text refusal is named <body> or <record>
        assert verdicts == {"http": field, "kafka": field, "sdk": field}


def test_a_record_over_the_size_limit_is_refused_on_kafka_and_by_the_sdk(client: TestClient) -> None:
    raw = _with(guest_key="x" * (MAX_RECORD_BYTES + 1))
    assert _refused(parse_request, raw) == "<record>"
    assert _refused(lambda b: parse_event(b, envelope=False), raw) == "<record>"
    assert _http(client, raw) is not None
