"""Strict parsing of the pricing API's request bodies, and the error bodies it answers with.

The one function the endpoints (and ``bench/fuzz_requests.py``) call is
:func:`parse_body`: raw bytes and a content type in, contract models out, or a
:class:`BadRequest` carrying the HTTP status and one :class:`FieldError` per problem.
Nothing else may escape it, whatever the bytes: the boundary is where a 5xx would
otherwise be born.

Order of checks, each cheaper than the next and each a precondition of the next:

1. content type ``application/json`` (charset UTF-8 if given), else 415;
2. the bytes are UTF-8, else 422 naming the byte offset;
3. the text is JSON as RFC 8259 has it: ``NaN``, ``Infinity``, numbers beyond a
   double (``1e309``) and lone surrogates (``"\\ud800"``) are refused, naming the field
   they sit in; nesting deeper than :data:`MAX_DEPTH` is refused;
4. the shape (an object; for a batch an array of 1 to ``max_batch`` objects);
5. the contract model (:class:`~events.models.PricingRequest`), whose errors become
   field errors; anything else the model raises is a 422 too, naming the field whose
   value provoked it.

Every string in an error body is valid Unicode and every number finite, so the body is
strict JSON (:func:`error_json`).

Example:
    >>> ok = b'{"hotel_id": "h1", "room_type": "std", "stay_date": "2026-12-24", "nights": 2}'
    >>> parse_body(ok, content_type="application/json").nights
    2
    >>> try:
    ...     parse_body(b'{"hotel_id": "h1", "last_published_price": NaN}', content_type="application/json")
    ... except BadRequest as exc:
    ...     err = exc
    >>> err.status, err.errors[0].field, err.errors[0].value
    (422, 'last_published_price', 'NaN')
    >>> from serving.errors import error_json
    >>> json.loads(error_json(err))["errors"][0]["expected"]
    'a finite JSON number (NaN, Infinity and -Infinity are not JSON)'
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal, overload

from pydantic import ValidationError

from events.models import DUPLICATE_EXPECTED, RULE_FIELDS, PricingRequest
from serving.errors import MAX_DEPTH, MAX_ERRORS, VALUE_CHARS, BadRequest, FieldError, NotJson, clip, safe_value

# -- values, rendered safely -----------------------------------------------------------------------


# -- bytes to JSON ---------------------------------------------------------------------------------


def _constant(token: str) -> NotJson:
    return NotJson(token)


def _float(token: str) -> float | NotJson:
    number = float(token)
    return number if math.isfinite(number) else NotJson(token)


class _DuplicateKey(ValueError):
    def __init__(self, key: str, value: object) -> None:
        super().__init__(key)
        self.key, self.value = key, value


def _pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in items:
        if key in out:
            raise _DuplicateKey(key, value)
        out[key] = value
    return out


_DECODER = json.JSONDecoder(parse_constant=_constant, parse_float=_float, object_pairs_hook=_pairs)
_NON_FINITE = "a finite JSON number (NaN, Infinity and -Infinity are not JSON)"
_OVERFLOW = "a finite JSON number (this one overflows a 64-bit float)"


def _body_error(value: object, expected: str) -> BadRequest:
    return BadRequest(422, "validation_error", [FieldError("<body>", safe_value(value), expected)])


_PLAIN_DECODER = json.JSONDecoder(parse_constant=_constant, parse_float=_float)


def _decoded(decoder: json.JSONDecoder, text: str) -> Any:
    """``text`` decoded, every failure of the decoder a 422 naming it (a duplicate key passes through)."""
    try:
        return decoder.decode(text)
    except RecursionError as exc:  # the C scanner recurses per level: a body of '[' * 60_000 gets here
        shown = "JSON nested thousands of levels deep"
        raise _body_error(shown, f"at most {MAX_DEPTH} levels") from exc
    except _DuplicateKey:
        raise
    except json.JSONDecodeError as exc:
        shown = f"malformed JSON at line {exc.lineno} column {exc.colno} (character {exc.pos}): {exc.msg}"
        raise _body_error(shown, "a JSON value") from exc
    except ValueError as exc:  # an integer literal past Python's 4300-digit conversion limit
        raise _body_error(f"an integer literal too long to read ({exc})"[:VALUE_CHARS], "a JSON number") from exc


def decode_json(raw: bytes) -> Any:
    """Strict JSON of ``raw``: UTF-8, no non-finite numbers, no lone surrogates, no key twice in an object,
    at most :data:`MAX_DEPTH` deep.

    Raises:
        BadRequest: 422 naming the byte or character offset, or the field holding the bad value.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = raw[exc.start : exc.start + 4]
        shown = f"bytes {bad!r} at byte {exc.start}"
        raise _body_error(shown, "a UTF-8 encoded JSON body") from exc
    if not text.strip():
        shown = "an empty body"
        raise _body_error(shown, "a JSON body")
    try:
        value = _decoded(_DECODER, text)
    except _DuplicateKey as exc:
        _decoded(_PLAIN_DECODER, text)  # a text that is not JSON as a whole says so first (trailing data)
        raise BadRequest(422, "validation_error", [FieldError(clip(exc.key), safe_value(exc.value),
                                                              DUPLICATE_EXPECTED)]) from exc
    if _may_hold_problems(text):
        problems = list(_problems(value))
        if problems:
            raise BadRequest(422, "validation_error", problems)
    return value


# Supersets of what _problems looks for, each one C-level scan of the text: a lone surrogate needs a
# \uD800-\uDFFF escape (valid UTF-8 cannot carry one raw); a non-finite number the text NaN or Infinity, or
# a value of 1e309 or more: integer digits + exponent >= 309, so an exponent of 2+ digits or, with a 1-digit
# one, 300+ digits in a row; excess depth more than MAX_DEPTH brackets. Most bodies match none and skip the
# walk (13 of the 50 us a valid request cost here).
_SUSPECT = re.compile(r"\\u[dD][89a-fA-F]|NaN|Infinity|[eE][+]?0*[1-9][0-9]+|[0-9]{300,}")


def _may_hold_problems(text: str) -> bool:
    return text.count("[") + text.count("{") > MAX_DEPTH or _SUSPECT.search(text) is not None


def _problems(value: object) -> Iterator[FieldError]:
    """Lone surrogates, non-finite numbers and excess depth anywhere in ``value`` (iterative walk)."""
    stack: list[tuple[str, Any, int]] = [("", value, 0)]
    while stack:
        path, item, depth = stack.pop()
        if isinstance(item, NotJson):
            yield FieldError(path or "<body>", str(item), _OVERFLOW if item[-1:].isdigit() else _NON_FINITE)
        elif isinstance(item, str):
            if not _is_unicode(item):
                yield FieldError(path or "<body>", safe_value(item), "valid Unicode text (no lone surrogates)")
        elif isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                yield FieldError(path or "<body>", safe_value(item), f"at most {MAX_DEPTH} levels of nesting")
                continue
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in reversed(list(pairs)):
                if isinstance(key, str) and not _is_unicode(key):
                    yield FieldError(_join(path, key), safe_value(key), "a key of valid Unicode text")
                stack.append((_join(path, key), child, depth + 1))


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    key = clip(key)
    return f"{path}.{key}" if path else key


# -- content type, shape, contract -----------------------------------------------------------------


def check_content_type(content_type: str | None) -> None:
    """Refuse anything but ``application/json`` (parameters allowed; a charset must be UTF-8).

    Raises:
        BadRequest: 415 naming the content type received.

    Example:
        >>> check_content_type("application/json; charset=UTF-8")
        >>> try:
        ...     check_content_type("text/plain")
        ... except BadRequest as exc:
        ...     print(exc.status, exc.errors[0].expected)
        415 application/json (charset utf-8)
    """
    media, _, params = (content_type or "").partition(";")
    charset = next((v.strip().strip('"').lower() for k, _, v in (p.partition("=") for p in params.split(";"))
                    if k.strip().lower() == "charset"), "utf-8")
    if media.strip().lower() != "application/json" or charset not in ("utf-8", "utf8"):
        shown = safe_value(content_type) if content_type else "no Content-Type"
        raise BadRequest(415, "unsupported_media_type",
                         [FieldError("header.Content-Type", shown, "application/json (charset utf-8)")])


@overload
def parse_body(raw: bytes, *, content_type: str | None, batch: Literal[False] = ...,
               max_batch: int = ...) -> PricingRequest: ...
@overload
def parse_body(raw: bytes, *, content_type: str | None, batch: Literal[True], max_batch: int = ...
               ) -> list[PricingRequest]: ...
def parse_body(
    raw: bytes, *, content_type: str | None, batch: bool = False, max_batch: int = 256
) -> PricingRequest | list[PricingRequest]:
    """The request (or, with ``batch``, the requests in order) in ``raw``, checked against the contract.

    Raises:
        BadRequest: and nothing else, for any bytes.
    """
    check_content_type(content_type)
    value = decode_json(raw)
    if not batch:
        return _one(value, "")
    if not isinstance(value, list) or not 1 <= len(value) <= max_batch:
        shown = f"an array of {len(value)} items" if isinstance(value, list) else safe_value(value)
        raise _body_error(shown, f"a JSON array of 1 to {max_batch} request objects")
    requests: list[PricingRequest] = []
    errors: list[FieldError] = []
    for i, item in enumerate(value):
        try:
            requests.append(_one(item, f"[{i}]"))
        except BadRequest as exc:
            errors.extend(exc.errors)
            if len(errors) >= MAX_ERRORS:
                break
    if errors:
        raise BadRequest(422, "validation_error", errors)
    return requests


def _one(value: object, prefix: str) -> PricingRequest:
    if not isinstance(value, dict):
        raise BadRequest(422, "validation_error", [FieldError(prefix or "<body>", safe_value(value), "a JSON object")])
    kind = value.get("event_type", "pricing_request")
    if kind != "pricing_request":  # another record type: say so before its missing fields
        raise BadRequest(422, "validation_error",
                         [FieldError(_join(prefix, "event_type"), safe_value(kind), "'pricing_request'")])
    try:
        return PricingRequest.model_validate(value, strict=True)  # the wire contract: JSON types are exact
    except ValidationError as exc:
        raise BadRequest(422, "validation_error", [_from_pydantic(e, prefix) for e in exc.errors()]) from exc
    except Exception as exc:  # noqa: BLE001 - a contract validator may raise anything (OSError, OverflowError):
        # at this boundary that is still the client's bad value, never a 500.
        field, value_of = _culprit(value)
        error = FieldError(_join(prefix, field) if field else prefix or "<body>", safe_value(value_of),
                           f"a value the contract can read ({type(exc).__name__}: {exc})"[:VALUE_CHARS])
        raise BadRequest(422, "validation_error", [error]) from exc


def _culprit(value: dict[str, Any]) -> tuple[str, Any]:
    """The field whose value alone makes the model raise something other than a validation error."""
    for key, item in value.items():
        try:
            PricingRequest.model_validate({key: item})
        except ValidationError:
            continue  # the missing required fields: not the culprit
        except Exception:  # noqa: BLE001 - the probe looks for exactly these
            return key, item
    return "", value


def _from_pydantic(error: Mapping[str, Any], prefix: str) -> FieldError:
    loc = [part for part in error.get("loc", ()) if part != "body"]
    rule_field = RULE_FIELDS.get(str(error.get("type")))
    if not loc and rule_field is not None:  # a model-level rule about one field (the stay date's)
        loc = [rule_field]
        inp = error.get("input")
        error = {**error, "input": inp.get(rule_field) if isinstance(inp, dict) else inp}
    path = prefix
    for part in loc:
        path = _join(path, part)
    expected = str(error.get("msg", "a valid value")).removeprefix("Value error, ")
    return FieldError(path or "<body>", safe_value(error.get("input")), clip(expected))


def from_validation_errors(errors: Sequence[Mapping[str, Any]]) -> BadRequest:
    """FastAPI's own validation errors (headers) as a :class:`BadRequest` (422)."""
    fields = [_from_pydantic({**e, "loc": tuple(e.get("loc", ()))}, "") for e in errors]
    return BadRequest(422, "validation_error", fields or [FieldError("<request>", None, "a valid request")])
