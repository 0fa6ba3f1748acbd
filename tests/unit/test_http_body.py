"""serving.body: the strict parser's fast path never lets a non-JSON token through as a value."""

from __future__ import annotations

import json

import pytest

from serving.body import parse_body
from serving.errors import MAX_DEPTH, BadRequest, safe_value

BASE = '{"hotel_id": "h1", "room_type": "std", "stay_date": "2026-12-24", "guest_key": %s}'


def _refused(raw: str) -> BadRequest:
    with pytest.raises(BadRequest) as err:
        parse_body(raw.encode("utf-8", "surrogatepass"), content_type="application/json")
    return err.value


@pytest.mark.parametrize(
    "token", ["NaN", "Infinity", "-Infinity", "1e309", "1E+309", "2e308", "1" + "0" * 250 + "e99", "9" * 310 + ".0",
              "1e0000309", "[1e309]", '{"x": NaN}'],
)
def test_a_non_finite_token_is_refused_even_where_a_string_is_expected(token: str) -> None:
    error = _refused(BASE % token).errors[0]
    assert error.field.startswith("guest_key")
    assert "finite JSON number" in error.expected


@pytest.mark.parametrize("token", ['"\\ud800"', '"\\uDBFF"', '"x\\udc00y"', '["\\ud800"]'])
def test_a_lone_surrogate_escape_is_refused(token: str) -> None:
    assert "surrogate" in _refused(BASE % token).errors[0].expected


@pytest.mark.parametrize("token", ['"NaN-guest"', '"Infinity pool"', '"1e309"', '"\\ud83d\\ude00"', "1e308", "1e-400"])
def test_look_alikes_that_are_valid_json_pass_the_strict_checks(token: str) -> None:
    raw = (BASE % token).encode()
    try:
        request = parse_body(raw, content_type="application/json")
    except BadRequest as exc:  # a number is not a guest key: the contract refuses it, not the JSON checks
        assert "finite JSON number" not in exc.errors[0].expected and "surrogate" not in exc.errors[0].expected
        assert exc.errors[0].field == "guest_key"
    else:
        assert request.guest_key == json.loads(token)


def test_depth_is_bounded_exactly_at_max_depth() -> None:
    ok = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    assert "levels" not in _refused(BASE % ok).errors[0].expected  # deep enough to be legal JSON here
    too_deep = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert "levels of nesting" in _refused(BASE % too_deep).errors[0].expected


def test_safe_value_renders_everything_json_can_carry() -> None:
    values = [float("nan"), float("-inf"), 10**5000, "\udfff", {"a": float("nan")}, [1, 2], b"\xff", None, True]
    rendered = json.dumps([safe_value(v) for v in values], allow_nan=False)
    assert json.loads(rendered)[:4] == ["nan", "-inf", "<integer of about 5001 digits>", "\\udfff"]
