"""HTTP service: 200 for valid requests, 413 for big bodies, 422 naming the field, and it keeps serving."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from events.catalog import ALL_FEATURES
from events.models import PricingRequest
from pricing.errors import FeatureStoreUnavailable
from pricing.feature_source import FeatureRead, MemoryFeatureSource
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from pricing.tiers import Quote
from routing.router import Thresholds, TieredRouter
from serving.http import ServiceConfig, create_app

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
RULES = "min_price: 40\nmax_price: 600\ndefault_base_rate: 150\n"
BODY = {"hotel_id": "h1", "room_type": "std", "stay_date": "2026-12-20", "nights": 2, "channel": "web",
        "event_time": "2026-11-30T09:00:00Z"}


class HalfPricePricer:
    """Quotes 0.9 x the ceiling: visibly a model answer, not the rules price."""

    name, version = "half", "2"

    def quote(self, request: PricingRequest, features: Mapping[str, float | None], **bounds: Any) -> Quote:
        price = 0.9 * bounds["ceiling"]
        return Quote(price, price * 0.3, 0.3, 0.0, ((price, 0.3),), self.name, self.version)


class FlakySource:
    """Down for hotel ``down``, fine otherwise; offers no ``read_many`` (batches read key by key)."""

    def __init__(self) -> None:
        self.memory = MemoryFeatureSource()

    def read(self, hotel_id: str, room_type: str, stay_date: date) -> FeatureRead:
        if hotel_id == "down":
            msg = "redis: timeout"
            raise FeatureStoreUnavailable(msg)
        return self.memory.read(hotel_id, room_type, stay_date)


@pytest.fixture
def client() -> Iterator[TestClient]:
    source = FlakySource()
    source.memory.put("h1", "std", date(2026, 12, 20), dict.fromkeys(ALL_FEATURES, 2.0), version=5,
               event_time=T0 - timedelta(seconds=10))
    scorer = Scorer(ScorerConfig(), rules=RuleSet.from_yaml(RULES), feature_source=source, light=HalfPricePricer(),
                    heavy=None, router=TieredRouter(Thresholds(rules_below=0.0, heavy_above=1.0)))
    with TestClient(create_app(scorer, ServiceConfig(max_body_bytes=2_000, max_batch=3))) as test_client:
        yield test_client


def _error(response: Any) -> dict[str, Any]:
    assert response.status_code == 422, response.text
    payload: dict[str, Any] = response.json()
    assert payload["error"] == "validation_error"
    return payload["errors"][0]


def test_valid_request_is_priced_by_the_model(client: TestClient) -> None:
    response = client.post("/v1/price", json=BODY)
    assert response.status_code == 200
    decision = response.json()
    assert (decision["tier"], decision["price"], decision["model_version"]) == ("light", 540.0, "2")
    assert (decision["feature_version"], decision["hotel_id"]) == (5, "h1")


def test_store_down_still_answers_200_degraded(client: TestClient) -> None:
    response = client.post("/v1/price", json=BODY | {"hotel_id": "down"})
    assert response.status_code == 200
    decision = response.json()
    assert (decision["tier"], decision["price"], decision["degraded"]) == ("rules", 150.0, True)
    assert decision["degraded_reason"].startswith("feature_store_unavailable")


def test_malformed_json_is_a_422_naming_the_body(client: TestClient) -> None:
    response = client.post("/v1/price", content=b'{"hotel_id": "h1", "stay_date": ', headers={
        "content-type": "application/json"})
    error = _error(response)
    assert error["field"] == "<body>" and "malformed JSON at line 1 column 33 (character 32)" in error["value"]


@pytest.mark.parametrize(
    ("patch", "field", "expected"),
    [
        ({"nights": -2}, "nights", "greater than or equal to 1"),
        ({"event_time": "2026-11-30T09:00:00"}, "event_time", "with an offset"),
        ({"channel": "carrier-pigeon"}, "channel", "'web'"),
        ({"stay_date": "2026-13-45"}, "stay_date", "calendar date"),
        ({"surprise": 1}, "surprise", "Extra inputs are not permitted"),
    ],
)
def test_out_of_range_fields_are_422_naming_field_value_and_expectation(
    client: TestClient, patch: dict[str, Any], field: str, expected: str
) -> None:
    error = _error(client.post("/v1/price", json=BODY | patch))
    assert error["field"] == field
    assert error["value"] == next(iter(patch.values()))
    assert expected in error["expected"]
    assert error["message"].startswith(f"field {field!r}: got ")
    assert client.post("/v1/price", json=BODY).status_code == 200  # and it keeps serving


def test_missing_field_is_named(client: TestClient) -> None:
    body = {k: v for k, v in BODY.items() if k != "hotel_id"}
    error = _error(client.post("/v1/price", json=body))
    assert (error["field"], error["expected"]) == ("hotel_id", "Field required")


def test_oversized_body_is_413_by_header_and_by_stream(client: TestClient) -> None:
    big = json.dumps(BODY | {"guest_key": "x" * 5_000}).encode()
    declared = client.post("/v1/price", content=big, headers={"content-type": "application/json"})
    assert declared.status_code == 413
    assert declared.json()["limit_bytes"] == 2_000 and "at most 2000 bytes" in declared.json()["message"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: chunked transfer
        for i in range(0, len(big), 500):
            yield big[i : i + 500]

    streamed = client.post("/v1/price", content=chunks(), headers={"content-type": "application/json"})
    assert streamed.status_code == 413 and "streamed body" in streamed.json()["message"]
    assert client.post("/v1/price", json=BODY).status_code == 200


def test_batch_prices_each_and_limits_the_count(client: TestClient) -> None:
    response = client.post("/v1/price:batch", json=[BODY, BODY | {"hotel_id": "down"}])
    assert response.status_code == 200
    assert [d["tier"] for d in response.json()] == ["light", "rules"]
    error = _error(client.post("/v1/price:batch", json=[BODY] * 4))
    assert (error["field"], error["value"]) == ("<body>", "an array of 4 items") and "1 to 3" in error["expected"]
    nested = _error(client.post("/v1/price:batch", json=[BODY, BODY | {"nights": 0}]))
    assert nested["field"] == "[1].nights"


def test_deadline_header_degrades_instead_of_failing(client: TestClient) -> None:
    response = client.post("/v1/price", json=BODY, headers={"X-Deadline-Ms": "0.000001"})
    assert response.status_code == 200
    assert response.json()["degraded_reason"].startswith("deadline")
    error = _error(client.post("/v1/price", json=BODY, headers={"X-Deadline-Ms": "-5"}))
    assert error["field"] == "header.X-Deadline-Ms"


def test_health_metrics_and_openapi(client: TestClient) -> None:
    client.post("/v1/price", json=BODY)
    client.post("/v1/price", json=BODY | {"nights": 0})
    health = client.get("/healthz").json()
    assert health["status"] == "ok" and health["light"] == {"name": "half", "version": "2"}
    metrics = client.get("/metrics").text
    assert 'pricestream_decisions_total{tier="light"} 1.0' in metrics
    assert 'pricestream_http_requests_total{route="/v1/price",status="422"} 1.0' in metrics
    spec = client.get("/openapi.json").json()
    assert {"/v1/price", "/v1/price:batch", "/healthz", "/metrics"} <= set(spec["paths"])
    body_spec = spec["paths"]["/v1/price"]["post"]["requestBody"]["content"]["application/json"]
    assert body_spec["examples"]["web"]["value"]["hotel_id"] == "h042"


def test_audit_disk_failure_keeps_pricing_but_fails_health() -> None:
    class FullDisk:
        def append(self, **entry: Any) -> str:
            msg = "No space left on device"
            raise OSError(28, msg)

    scorer = Scorer(ScorerConfig(), rules=RuleSet.from_yaml(RULES), feature_source=MemoryFeatureSource(),
                    light=HalfPricePricer(), heavy=None, router=TieredRouter(), audit=FullDisk())
    with TestClient(create_app(scorer)) as test_client:
        assert test_client.post("/v1/price", json=BODY).status_code == 200
        health = test_client.get("/healthz")
        assert (health.status_code, health.json()["audit_failing"]) == (503, True)
    assert scorer.stats.value("pricestream_scorer_side_errors_total", stage="audit") == 1.0


class DownFeatureSource:
    """A feature source whose store is down, with a password in the address it names."""

    def read(self, hotel_id: str, room_type: str, stay_date: date) -> FeatureRead:
        msg = "Redis at 'redis://app:hunter2@10.0.0.9:6379/0' could not be read: ConnectionError: refused"
        raise FeatureStoreUnavailable(msg)


def test_healthz_is_503_naming_the_failing_source_without_its_password() -> None:
    scorer = Scorer(ScorerConfig(), rules=RuleSet.from_yaml(RULES), feature_source=DownFeatureSource(),
                    light=HalfPricePricer(), heavy=None, router=TieredRouter())
    with TestClient(create_app(scorer)) as test_client:
        health = test_client.get("/healthz")
        assert health.status_code == 503
        body = health.json()
        assert body["status"] == "degraded"
        assert body["reason"] == ("down: Redis at 'redis://app:***@10.0.0.9:6379/0' could not be read: "
                                  "ConnectionError: refused")
        decision = test_client.post("/v1/price", json=BODY).json()
        assert decision["degraded"] is True and "hunter2" not in decision["degraded_reason"]
        assert "app:***@10.0.0.9" in decision["degraded_reason"]


def test_healthz_probes_can_be_named_and_a_rules_only_scorer_stays_200() -> None:
    scorer = Scorer(ScorerConfig(), rules=RuleSet.from_yaml(RULES), feature_source=MemoryFeatureSource(),
                    light=None, heavy=None, router=TieredRouter())

    def kafka_down() -> None:
        msg = "sasl.password=hunter2 rejected by broker"
        raise RuntimeError(msg)

    with TestClient(create_app(scorer, probes={})) as ok_client:
        health = ok_client.get("/healthz")
        assert (health.status_code, health.json()["status"]) == (200, "degraded")
        assert health.json()["reason"] == "no light model loaded: rules prices only"
    with TestClient(create_app(scorer, probes={"kafka": kafka_down})) as down_client:
        health = down_client.get("/healthz")
        assert health.status_code == 503
        assert health.json()["reason"] == "kafka: RuntimeError: sasl.password=*** rejected by broker"


def test_anything_the_contract_model_raises_is_a_422_naming_the_field(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydantic import field_validator

    import serving.body as http_body

    class Fragile(PricingRequest):
        @field_validator("guest_key")
        @classmethod
        def _explode(cls, value: str | None) -> str | None:
            if value == "boom":
                raise OSError(75, "Value too large for defined data type")
            return value

    monkeypatch.setattr(http_body, "PricingRequest", Fragile)
    error = _error(client.post("/v1/price", json=BODY | {"guest_key": "boom"}))
    assert (error["field"], error["value"]) == ("guest_key", "boom")
    assert error["expected"].startswith("a value the contract can read (OSError: ")
    batch = _error(client.post("/v1/price:batch", json=[BODY, BODY | {"guest_key": "boom"}]))
    assert batch["field"] == "[1].guest_key"
    assert client.post("/v1/price", json=BODY | {"guest_key": "fine"}).status_code == 200


@pytest.mark.parametrize(
    ("raw", "field", "value"),
    [
        (b'{"hotel_id": "h1", "room_type": "std", "stay_date": "2026-12-20", "last_published_price": NaN}',
         "last_published_price", "NaN"),
        (b'{"hotel_id": "h1", "room_type": "std", "stay_date": "2026-12-20", "nights": -Infinity}', "nights",
         "-Infinity"),
        (b'{"hotel_id": "\\ud800", "room_type": "std", "stay_date": "2026-12-20"}', "hotel_id", "\\ud800"),
        (b'{"hotel_id": "h\xc3", "room_type": "std", "stay_date": "2026-12-20"}', "<body>",
         "bytes b'\\xc3\", ' at byte 15"),
    ],
)
def test_unrepresentable_values_are_echoed_as_text_in_strict_json(
    client: TestClient, raw: bytes, field: str, value: str
) -> None:
    response = client.post("/v1/price", content=raw, headers={"content-type": "application/json"})
    text = response.content.decode("utf-8")
    error = json.loads(text, parse_constant=lambda token: pytest.fail(f"{token} in the answer"))["errors"][0]
    assert response.status_code == 422
    assert (error["field"], error["value"]) == (field, value)


def test_docs_page_and_its_assets_come_from_the_service_not_a_cdn() -> None:
    from fastapi.testclient import TestClient

    scorer = Scorer(ScorerConfig(), rules=RuleSet.from_yaml("min_price: 50\nmax_price: 500\n"),
                    feature_source=MemoryFeatureSource(), light=None, heavy=None, router=TieredRouter())
    client = TestClient(create_app(scorer, ServiceConfig(freeze_gc=False)))
    page = client.get("/docs")
    assert page.status_code == 200
    assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert assets and all(a.startswith("/docs/assets/") for a in assets), assets
    assert "cdn" not in page.text
    for asset in assets:
        got = client.get(asset)
        assert got.status_code == 200 and len(got.content) > 500, asset
