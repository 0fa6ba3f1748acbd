"""Hostile bodies against a real ``pricestream serve`` on loopback: always a 4xx, a strict-JSON body naming the field.

Every case of issue 11 that concerns the HTTP API is its own test here. After them all,
the same process still prices a valid request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from infra.config import StackConfig
from tests.integration._http_serve import serve, serve_log, strict_json

pytestmark = pytest.mark.integration

VALID = ('{"hotel_id": "h1", "room_type": "std", "stay_date": "2026-12-24", "nights": 2, '
         '"event_time": "2026-12-01T09:00:00Z"%s}')
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("serve-hostile")


@pytest.fixture(scope="module")
def base_url(stack: StackConfig, state_dir: Path) -> Iterator[str]:
    # a limit below the default, so the tests show the setting reaches the running server
    with serve(stack, state_dir, PRICESTREAM_HTTP_MAX_BODY_BYTES="50000") as url:
        yield url


@pytest.fixture(scope="module")
def http(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=30.0) as client:
        yield client


def _with(extra: str) -> bytes:
    return (VALID % (", " + extra)).encode()


def _refused(response: httpx.Response, status: int = 422) -> dict[str, Any]:
    """The answer is ``status`` with a strict JSON error body; its first field error."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    payload = strict_json(response.content)
    assert payload["errors"], payload
    first: dict[str, Any] = payload["errors"][0]
    assert payload["message"] == first["message"]
    assert {"field", "value", "expected", "message"} <= set(first)
    return first


def test_a_valid_request_is_priced(http: httpx.Client) -> None:
    response = http.post("/v1/price", content=_with('"last_published_price": 149.0'), headers=JSON)
    assert response.status_code == 200, response.text
    assert strict_json(response.content)["hotel_id"] == "h1"


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e309", "-1e309"])
def test_non_finite_last_published_price_is_a_422_naming_it(http: httpx.Client, token: str) -> None:
    error = _refused(http.post("/v1/price", content=_with(f'"last_published_price": {token}'), headers=JSON))
    assert (error["field"], error["value"]) == ("last_published_price", token)
    assert "finite JSON number" in error["expected"]


def test_nan_nights_is_a_422_naming_nights(http: httpx.Client) -> None:
    body = VALID.replace('"nights": 2', '"nights": NaN') % ""
    error = _refused(http.post("/v1/price", content=body.encode(), headers=JSON))
    assert (error["field"], error["value"]) == ("nights", "NaN")


def test_nan_event_time_is_a_422_naming_event_time(http: httpx.Client) -> None:
    body = VALID.replace('"event_time": "2026-12-01T09:00:00Z"', '"event_time": NaN') % ""
    error = _refused(http.post("/v1/price", content=body.encode(), headers=JSON))
    assert (error["field"], error["value"]) == ("event_time", "NaN")


@pytest.mark.parametrize("value", ["1e20", "-1e20", "100000000000000000000", "253402300800000"])
def test_overflowing_event_time_is_a_422_naming_event_time(http: httpx.Client, value: str) -> None:
    body = VALID.replace('"event_time": "2026-12-01T09:00:00Z"', f'"event_time": {value}') % ""
    error = _refused(http.post("/v1/price", content=body.encode(), headers=JSON))
    assert error["field"] == "event_time"
    assert float(error["value"]) == float(value)  # echoed exactly (a huge integer as its digits)


@pytest.mark.parametrize("body", [b"[]", b'"a string"', b"42", b"null", b"true", b'[{"hotel_id": "h1"}]'])
def test_a_body_that_is_not_an_object_is_a_422(http: httpx.Client, body: bytes) -> None:
    error = _refused(http.post("/v1/price", content=body, headers=JSON))
    assert (error["field"], error["expected"]) == ("<body>", "a JSON object")


@pytest.mark.parametrize("body", [b"{}", b"[]", b'"x"', b"[1]"])
def test_a_batch_that_is_not_an_array_of_objects_is_a_422(http: httpx.Client, body: bytes) -> None:
    error = _refused(http.post("/v1/price:batch", content=body, headers=JSON))
    assert error["field"] in {"<body>", "[0]"}
    assert "object" in error["expected"]


def test_a_batch_names_the_item_holding_nan(http: httpx.Client) -> None:
    body = b"[" + _with('"last_published_price": 10') + b"," + _with('"last_published_price": NaN') + b"]"
    error = _refused(http.post("/v1/price:batch", content=body, headers=JSON))
    assert (error["field"], error["value"]) == ("[1].last_published_price", "NaN")


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin-1",
                     "multipart/form-data; boundary=x", None],
)
def test_a_wrong_content_type_is_a_415(http: httpx.Client, content_type: str | None) -> None:
    headers = {"content-type": content_type} if content_type else {}
    error = _refused(http.post("/v1/price", content=_with('"nights": 3'), headers=headers), status=415)
    assert error["field"] == "header.Content-Type"
    assert error["value"] == (content_type or "no Content-Type")


def test_a_huge_body_is_a_413_by_its_declared_length(http: httpx.Client) -> None:
    body = _with('"guest_key": "' + "x" * 70_000 + '"')
    response = http.post("/v1/price", content=body, headers=JSON)
    error = _refused(response, status=413)
    assert strict_json(response.content)["limit_bytes"] == 50_000
    assert error["expected"] == "at most 50000 bytes"


def test_a_huge_chunked_body_is_a_413(http: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"hotel_id": "'
        for _ in range(100):
            yield b"y" * 1_000

    error = _refused(http.post("/v1/price", content=chunks(), headers=JSON), status=413)
    assert "streamed body" in error["value"]


def test_deeply_nested_json_is_a_422(http: httpx.Client) -> None:
    error = _refused(http.post("/v1/price", content=b"[" * 40_000 + b"]" * 2_000, headers=JSON))
    assert error["field"] == "<body>" and "levels" in error["expected"]


def test_nesting_inside_a_field_is_a_422_naming_the_path(http: httpx.Client) -> None:
    error = _refused(http.post("/v1/price", content=_with('"guest_key": ' + "[" * 12 + "]" * 12), headers=JSON))
    assert error["field"].startswith("guest_key[0]") and "levels of nesting" in error["expected"]


def test_invalid_utf8_is_a_422_naming_the_byte(http: httpx.Client) -> None:
    body = b'{"hotel_id": "h\xff\xfe", "room_type": "std", "stay_date": "2026-12-24"}'
    error = _refused(http.post("/v1/price", content=body, headers=JSON))
    assert error["field"] == "<body>" and "at byte 15" in error["value"]


def test_surrogate_bytes_are_invalid_utf8(http: httpx.Client) -> None:
    body = b'{"hotel_id": "h\xed\xa0\x80", "room_type": "std", "stay_date": "2026-12-24"}'  # WTF-8 U+D800
    error = _refused(http.post("/v1/price", content=body, headers=JSON))
    assert error["field"] == "<body>" and "UTF-8" in error["expected"]


@pytest.mark.parametrize("escape", ["\\ud800", "\\udfff", "a\\ud83d"])
def test_a_lone_surrogate_escape_is_a_422_naming_the_field(http: httpx.Client, escape: str) -> None:
    body = VALID.replace('"hotel_id": "h1"', f'"hotel_id": "{escape}"') % ""
    error = _refused(http.post("/v1/price", content=body.encode(), headers=JSON))
    assert error["field"] == "hotel_id" and "surrogate" in error["expected"]
    assert error["value"] == escape.replace("\\\\", "\\")


def test_a_lone_surrogate_in_a_key_is_a_422(http: httpx.Client) -> None:
    error = _refused(http.post("/v1/price", content=_with('"\\udc00": 1'), headers=JSON))
    assert "surrogate" in error["expected"] or "Unicode" in error["expected"]


@pytest.mark.parametrize("separator", ["\\u2028", "\\u0085"])
def test_a_line_separator_in_hotel_id_is_a_422(http: httpx.Client, separator: str) -> None:
    body = VALID.replace('"hotel_id": "h1"', f'"hotel_id": "h{separator}1"') % ""
    error = _refused(http.post("/v1/price", content=body.encode(), headers=JSON))
    assert error["field"] == "hotel_id"


def test_a_huge_integer_is_a_422_rendered_as_text(http: httpx.Client) -> None:
    body = VALID.replace('"nights": 2', '"nights": ' + "9" * 5_000) % ""
    error = _refused(http.post("/v1/price", content=body.encode(), headers=JSON))
    assert error["field"] == "<body>" and isinstance(error["value"], str)


def test_trailing_garbage_is_a_422(http: httpx.Client) -> None:
    error = _refused(http.post("/v1/price", content=_with('"nights": 3') + b" trailing", headers=JSON))
    assert error["field"] == "<body>" and "Extra data" in error["value"]


def test_the_process_still_serves_after_all_of_it(http: httpx.Client) -> None:
    response = http.post("/v1/price", content=_with('"last_published_price": 99.5'), headers=JSON)
    assert response.status_code == 200
    health = http.get("/healthz")
    assert (health.status_code, strict_json(health.content)["status"]) == (200, "ok")
    metrics = http.get("/metrics")
    assert metrics.headers["content-type"].startswith("text/plain")
    assert 'route="/v1/price",status="422"' in metrics.text


def test_the_process_logged_no_traceback(base_url: str, state_dir: Path) -> None:
    del base_url  # the process has answered every hostile body above
    logs = serve_log(state_dir)
    assert "serving on" in logs and "Traceback" not in logs


def test_http_and_the_sdk_agree_on_generated_requests(http: httpx.Client) -> None:
    """200 valid and 200 one-defect pricing requests from the contract's strategies: the same verdict
    and the same field from the running server and from the SDK's parser."""
    from events.errors import EventValidationError
    from events.models import parse_event
    from tests.strategies import draw_examples, invalid_event, valid_event

    samples = [(e, None) for e in draw_examples(valid_event("pricing_request"), 200)]
    samples += draw_examples(invalid_event("pricing_request"), 200)
    disagreements = []
    for body, expected in samples:
        try:
            parse_event({**body, "event_type": body.get("event_type", "pricing_request")}, envelope=False)
            sdk = None
        except EventValidationError as exc:
            sdk = exc.field
        response = http.post("/v1/price", content=json.dumps(body).encode(), headers=JSON)
        served = None if response.status_code == 200 else strict_json(response.content)["errors"][0]["field"]
        served = "<record>" if served == "<body>" else served
        if response.status_code >= 500 or sdk != expected or served != expected:
            disagreements.append((expected, sdk, response.status_code, served, body))
    assert disagreements == []
