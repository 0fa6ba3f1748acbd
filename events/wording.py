"""How a refused record is worded: pydantic's error as our :class:`EventValidationError`, and duplicate keys.

Every refusal names the offending field, the value and what was expected (the contract's parsers,
Python's and the JVM's, word them alike). :mod:`events.models` re-exports every public name.

Example:
    >>> from pydantic import BaseModel, ValidationError
    >>> class Offer(BaseModel):
    ...     price: float
    >>> try:
    ...     Offer(price="cheap")
    ... except ValidationError as exc:
    ...     error = to_validation_error(exc)
    >>> error.field, error.value, error.expected
    ('price', 'cheap', 'a valid number, unable to parse string as a number')
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from events.errors import EventValidationError

STAY_RULE = "stay_date_before_event"
"""The model-level rule that a stay is not dated before its event (see :class:`events.models.StayDated`)."""

RULE_FIELDS = {STAY_RULE: "stay_date"}
"""Model-level rules and the field each one is about (pydantic locates them on the record)."""


def expectation(error: ErrorDetails) -> str:
    """pydantic's message as what was expected: "Input should be greater than 0" -> "greater than 0"."""
    kind, msg = error["type"], error["msg"]
    if kind == "missing":
        return "a value (the field is required)"
    if kind == "extra_forbidden":
        return "no such field (the contract has no field of this name)"
    if kind == "json_invalid":
        return "one JSON object in UTF-8 (" + str(msg).removeprefix("Invalid JSON: ") + ")"
    for prefix in ("Input should be ", "Value error, ", "String should "):
        if msg.startswith(prefix):
            return ("" if prefix != "String should " else "a string that should ") + str(msg).removeprefix(prefix)
    return str(msg)


def to_validation_error(exc: ValidationError) -> EventValidationError:
    """Translate pydantic's error into ours, naming the first offending field."""
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or RULE_FIELDS.get(first["type"], "<record>")
    value = first.get("input")
    if isinstance(value, dict) and field != "<record>" and field in RULE_FIELDS.values():
        value = value.get(field)
    if first["type"] == "json_invalid":
        value = None
    return EventValidationError(field, value, expectation(first))


DUPLICATE_EXPECTED = "a key that appears once in its object (JSON readers disagree on which value wins)"
_KEY_TOKEN = re.compile(rb'"((?:[^"\\]|\\.)*)"\s*:')
"""A quoted key followed by a colon: every key of a JSON text matches it (and a string value holding
``"...":`` may too, which only sends the text to the exact check)."""


def duplicate_key(text: bytes | str) -> str | None:
    """The first key that appears twice in one object of the valid JSON ``text``, or ``None``.

    A scan of the key tokens settles nearly every record (all distinct, no escapes); only a text
    with a repeated or escaped token is decoded again with its objects' key lists.

    Example:
        >>> duplicate_key(b'{"hotel_id": "a", "hotel_id": "b"}'), duplicate_key('{"a": {"b": 1}, "b": 2}')
        ('hotel_id', None)
        >>> duplicate_key('{"hotel_\\\\u0069d": "a", "hotel_id": "b"}')
        'hotel_id'
    """
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    keys = _KEY_TOKEN.findall(raw)
    if len(keys) == len(set(keys)) and not any(b"\\" in k for k in keys):
        return None
    found: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for key, _ in items:
            if key in seen and not found:
                found.append(key)
            seen.add(key)
        return dict(items)

    json.loads(raw, object_pairs_hook=pairs)
    return found[0] if found else None
