"""Errors of :mod:`serving`: a refused request, each problem with its field, value and expectation.

Exception tree::

    BadRequest (a PricingError and a ValueError)   4xx: status, error code, the field errors

A value shown back to a client is made safe first (:func:`safe_value`): clipped, valid text, finite.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pricing.errors import PricingError

MAX_DEPTH = 8
"""Deepest nesting accepted in a body. A batch is 3 levels (array, object, value); more
than 8 is never a pricing request, and the bound keeps every walk over the value (and
the error rendering) small whatever the client sent."""


MAX_ERRORS = 20
"""Field errors listed in one answer: enough to fix a body, bounded for a hostile one."""


VALUE_CHARS = 200
"""Characters of a rejected value echoed back (bodies can be large)."""


ErrorCode = Literal["validation_error", "unsupported_media_type", "payload_too_large", "request_timeout"]


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem with a request: where, what was sent, what the contract expects.

    Attributes:
        field: ``"nights"``, ``"[2].nights"`` for a batch item, ``"<body>"`` for the whole body.
        value: the rejected value, JSON-safe (see :func:`safe_value`).
        expected: what the contract expects there.
    """

    field: str
    value: object
    expected: str

    @property
    def message(self) -> str:
        return f"field {self.field!r}: got {self.value!r}, expected {self.expected}"

    def as_json(self) -> dict[str, Any]:
        return {"field": self.field, "value": self.value, "expected": self.expected, "message": self.message}


class BadRequest(PricingError, ValueError):
    """A request body the API refuses (4xx), with its field errors.

    Attributes:
        status: the HTTP status (413, 415 or 422).
        code: the ``error`` member of the answer.
        errors: at least one :class:`FieldError`.
    """

    def __init__(self, status: int, code: ErrorCode, errors: Sequence[FieldError]) -> None:
        self.status = status
        self.code = code
        self.errors = tuple(errors[:MAX_ERRORS])
        super().__init__(self.errors[0].message if self.errors else code)


def error_json(exc: BadRequest, **extra: object) -> bytes:
    """The answer's body: ``{"error", "message", "errors": [{field, value, expected, message}]}``, strict JSON."""
    payload = {"error": exc.code, "message": str(exc), "errors": [e.as_json() for e in exc.errors], **extra}
    return json.dumps(_text_safe(payload), ensure_ascii=False, allow_nan=False).encode()


class NotJson(str):
    """A number token JSON cannot carry (``NaN``, ``-Infinity``, ``1e309``), kept as its text."""

    __slots__ = ()


def clip(text: str) -> str:
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")  # lone surrogates become visible escapes
    return text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS] + "..."


def safe_value(value: object) -> object:
    """``value`` as something strict JSON can carry: finite numbers and short valid text as they are,
    anything else as a short string (``"NaN"``, ``'[1, 2]'``, ``"1e+20"``, ``"<integer of 5000 digits>"``).

    Example:
        >>> safe_value(float("nan")), safe_value(2), safe_value("\\ud800"), safe_value(10**20), safe_value(10**40)
        ('nan', 2, '\\\\ud800', '100000000000000000000', '<integer of 41 digits>')
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, NotJson):
        return str(value)
    if isinstance(value, str):
        return clip(value)
    if isinstance(value, int):
        # beyond 2**53 a JSON reader may round it, and str() of a huge int is slow (refused past 4300 digits)
        return value if abs(value) < 2**53 else _big_int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, Mapping | list | tuple):
        try:
            text = json.dumps(_text_safe(value), ensure_ascii=False, allow_nan=False, default=str)
        except (ValueError, RecursionError):  # NaN inside, or a cycle: say what it was instead
            text = f"<{type(value).__name__} of {len(value)} items>"
        return clip(text)
    return clip(str(value))


def _big_int(value: int) -> str:
    """Up to 40 digits, the number as text (exact, whatever the reader's floats); beyond, its size."""
    bits = value.bit_length()
    if bits > 14_000:  # str() would be refused past 4300 digits
        return f"<integer of about {int(bits * math.log10(2)) + 1} digits>"
    text = str(value)
    return text if len(text.lstrip("-")) <= 40 else f"<integer of {len(text.lstrip('-'))} digits>"


def _text_safe(value: object, depth: int = 0) -> object:
    """``value`` with every string (keys too) made valid Unicode; bounded depth."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if depth > MAX_DEPTH + 4:
        return "<nested too deep>"
    if isinstance(value, Mapping):
        return {_text_safe(str(k)): _text_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_text_safe(v, depth + 1) for v in value]
    return value
