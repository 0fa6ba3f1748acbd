"""Hypothesis strategies generated from the contract spec (``events.contract.field_spec``).

Valid events draw every field from its rule; an invalid event is a valid one with exactly one
defect (a field of the wrong type, out of bounds, too long, off-pattern, missing, null, or one the
contract does not know), so every path must refuse it and name the same field. The strategies read
the spec, not the models: a new rule reaches these tests, the SDK and the Flink job at once.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from events.contract import field_spec

SPEC = field_spec()
REQUEST_SPEC = field_spec(("pricing_request",), envelope=False)["pricing_request"]
_T0 = datetime(2026, 1, 1, tzinfo=UTC)
_SPAN_S = 150 * 86400
_ID_ALPHABET = st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Zl", "Zp"), blacklist_characters="\x85")


def _number(rule: dict[str, Any], *, integer: bool) -> st.SearchStrategy[Any]:
    low = rule.get("minimum", rule.get("exclusiveMinimum"))
    high = rule.get("maximum", rule.get("exclusiveMaximum", 10_000))
    low = 0 if low is None else low
    if integer:
        return st.integers(int(low) + (1 if "exclusiveMinimum" in rule else 0), int(min(high, 10_000)))
    return st.floats(float(low), float(min(high, 10_000)), exclude_min="exclusiveMinimum" in rule,
                     allow_nan=False, allow_infinity=False).map(lambda x: round(x, 2) or 0.01)


def _value(rule: dict[str, Any]) -> st.SearchStrategy[Any]:
    kind = rule["kind"]
    if kind == "enum":
        return st.sampled_from(rule["values"])
    if kind == "string":
        text = st.text(_ID_ALPHABET, min_size=rule.get("minLength", 1), max_size=min(rule.get("maxLength", 16), 16))
        pattern = rule.get("pattern")
        return text if pattern is None else text.filter(lambda s: re.match(pattern, s) is not None)
    if kind == "integer":
        return _number(rule, integer=True)
    if kind == "number":
        return _number(rule, integer=False)
    if kind == "uuid":
        return st.uuids().map(str)
    msg = f"no strategy for {rule}"
    raise ValueError(msg)


def _rules(kind: str) -> list[dict[str, Any]]:
    return REQUEST_SPEC if kind == "pricing_request" else SPEC[kind]


@st.composite
def valid_event(draw: st.DrawFn, kind: str | None = None) -> dict[str, Any]:
    """A valid behaviour event (or ``kind`` record) as a JSON-ready dict (event_time and stay_date consistent)."""
    kind = kind or draw(st.sampled_from(sorted(SPEC)))
    at = _T0 + timedelta(seconds=draw(st.integers(0, _SPAN_S)))
    out: dict[str, Any] = {}
    for rule in _rules(kind):
        name = rule["name"]
        if name == "event_time":
            out[name] = int(at.timestamp() * 1000)
        elif name == "stay_date":
            out[name] = (at.date() + timedelta(days=draw(st.integers(0, 120)))).isoformat()
        elif rule["required"] or draw(st.booleans()):
            out[name] = draw(_value(rule))
    if kind == "inventory":
        out["rooms_left"] = min(out["rooms_left"], out["capacity"])
    return out


def _defects(rule: dict[str, Any]) -> list[Any]:
    """Values that break ``rule`` (each alone is enough to refuse the record)."""
    kind = rule["kind"]
    bad: list[Any] = [{"nested": 1}, [1]]
    if not rule["nullable"]:
        bad.append(None)
    if kind == "enum":
        bad += ["teleport" if isinstance(rule["values"][0], str) else 2, 1.5]
    elif kind == "string":
        bad += [12, True, "x" * (rule.get("maxLength", 64) + 1)]
        if rule.get("minLength"):
            bad.append("")
        if rule.get("pattern"):
            bad += ["h\u2028", "tab\there"]
    elif kind in ("integer", "number"):
        bad += ["NaN", "7", True]
        if kind == "integer":
            bad.append(2.5)
        for key, step in (("minimum", -1), ("exclusiveMinimum", 0), ("maximum", 1), ("exclusiveMaximum", 0)):
            if key in rule:
                bad.append(rule[key] + step)
    elif kind == "uuid":
        bad += ["not-a-uuid", uuid.uuid4().hex, "{" + str(uuid.uuid4()) + "}"]
    elif kind == "date":
        bad += ["2026-02-30", "2026-12-24T00:00:00", 20261224]
    elif kind == "instant":
        bad += [-1, 1e20, 4_200_000_000_000, "2026-11-30T09:00:00", 1.5e12, "yesterday"]
    return bad


@st.composite
def invalid_event(draw: st.DrawFn, kind: str | None = None) -> tuple[dict[str, Any], str]:
    """(event, or ``kind`` record, with one defect; the field every path must name)."""
    kind = kind or draw(st.sampled_from(sorted(SPEC)))
    event = draw(valid_event(kind))
    rule = draw(st.sampled_from([r for r in _rules(kind) if r["name"] != "event_type"] + [None]))
    if rule is None:
        how = draw(st.sampled_from(["extra", "event_type"]))
        if how == "extra":
            event["surprise_field"] = draw(st.integers(0, 9))
            return event, "surprise_field"
        event["event_type"] = draw(st.sampled_from(["teleport", 3, None]))
        return event, "event_type"
    name = rule["name"]
    if rule["required"] and draw(st.booleans()):
        event.pop(name, None)
        return event, name
    event[name] = draw(st.sampled_from(_defects(rule)))
    return event, name


def stay_before_event() -> st.SearchStrategy[tuple[dict[str, Any], str]]:
    """A valid event whose stay date is two days before its event date in every zone."""
    def shift(event: dict[str, Any]) -> tuple[dict[str, Any], str]:
        at = datetime.fromtimestamp(event["event_time"] / 1000, tz=UTC).date()
        return {**event, "stay_date": (at - timedelta(days=2)).isoformat()}, "stay_date"
    return valid_event().map(shift)


def encode(event: dict[str, Any]) -> bytes:
    return json.dumps(event).encode()


def draw_examples(strategy: st.SearchStrategy[Any], n: int) -> list[Any]:
    """``n`` examples of ``strategy``, the same on every run (derandomized, no example database)."""
    out: list[Any] = []

    @settings(max_examples=n, derandomize=True, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), deadline=None)
    @given(strategy)
    def collect(example: Any) -> None:
        out.append(example)

    collect()
    return out[:n]

