"""The field types and bounds of the event contract: what a value on the wire may be.

Identifiers, prices, instants (epoch milliseconds or offset ISO-8601 text), UUIDs and dates, with the
bounds every parser of the contract (pydantic here, the JVM feature job through
:mod:`events.contract`) applies alike. :mod:`events.models` builds the records from them and
re-exports every public name.

Example:
    >>> from pydantic import TypeAdapter
    >>> TypeAdapter(IsoDate).validate_python("2026-12-24")
    datetime.date(2026, 12, 24)
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, PlainSerializer, ValidationInfo

SCHEMA_VERSION = 1
"""Bumped on any change that an old consumer could not read."""

Channel = Literal["web", "mobile", "ota", "gds", "direct", "corporate"]
CHANNELS: tuple[str, ...] = ("web", "mobile", "ota", "gds", "direct", "corporate")
Tier = Literal["rules", "light", "heavy"]


MAX_RECORD_BYTES = 1_000_000
"""Largest record the contract accepts, in bytes of JSON: under Kafka's default ``max.request.size``
(1 MiB), so that whatever the SDK sends can also be written to a DLQ. A real event is under 1 KB."""
ENVELOPE: tuple[str, ...] = ("event_id", "event_type", "event_time", "schema_version")
"""Fields every record on the wire carries. Required when parsing the wire form; Python callers and
the HTTP API may leave them to their defaults (a new id, now, the current version)."""

EVENT_TIME_MIN_MS = 946_684_800_000
"""2000-01-01T00:00:00Z. Decision: no hotel event of this system predates it; the public Hotel Booking
Demand dataset starts in 2015. A bound keeps ``-1`` or ``0`` (a producer's unset clock) out of the features."""
EVENT_TIME_MAX_MS = 4_102_444_800_000
"""2100-01-01T00:00:00Z. Beyond it ``datetime.fromtimestamp`` overflows on some platforms (``1e20`` raised OSError)."""
PRICE_MAX = 1_000_000.0
"""Hard ceiling of any price, per room night, in the hotel's currency. Decision: the dataset's largest ADR is
5,400; presidential suites reach tens of thousands. Anything above a million is a unit or typing error, refused.
Prices far outside a hotel's own range are *flagged* (see :mod:`events.contract`), not refused."""
_ID_NEVER = (
    "\\x00-\\x1f\\x7f-\\x9f"  # C0 and C1 controls (U+0085 broke line-oriented readers: the audit log)
    "\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff"  # zero-width, bidi, separators
)
_ID_SPACE = " \u00a0\u1680\u2000-\u200a\u202f\u205f\u3000"
ID_PATTERN = f"^[^{_ID_NEVER}]*[^{_ID_NEVER}{_ID_SPACE}][^{_ID_NEVER}]*$"
"""Identifiers are free text (the dataset's hotels are "Resort Hotel" and "City Hotel") with at least one
character that is not a space, and none of: control characters, line and paragraph separators, zero-width
characters (U+200B-U+200D, U+2060, U+FEFF) and bidirectional controls (U+200E, U+200F, U+202A-U+202E,
U+2066-U+2069, U+061C), which make two ids that print alike differ. No lookaround, so that pydantic's
regex engine, Java's (the feature job reads the pattern from the job spec) and Python's read it alike.

Example:
    >>> import re
    >>> [bool(re.match(ID_PATTERN, s)) for s in ("City Hotel", "   ", "h\u200b1", "h\u202e1", "h1")]
    [True, False, False, False, True]
"""
UUID_TEXT = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
DATE_TEXT = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"


def _epoch_ms(value: int) -> datetime:
    """Epoch milliseconds (an integer, in range) to an aware UTC datetime."""
    if not EVENT_TIME_MIN_MS <= value < EVENT_TIME_MAX_MS:
        msg = f"epoch milliseconds in [{EVENT_TIME_MIN_MS}, {EVENT_TIME_MAX_MS}) (2000-01-01 to 2100-01-01 UTC)"
        raise ValueError(msg)
    return datetime.fromtimestamp(value / 1000.0, tz=UTC)


INSTANT_TEXT = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-](0[0-9]|1[0-7]):[0-5][0-9]|[+-]18:00)$"
)
"""The one text form of an instant the contract accepts: ISO-8601 with seconds and an explicit offset
(at most 18 h, the range every ISO parser we run, Python's and Java's, agrees on)."""
_ISO_INSTANT = re.compile(INSTANT_TEXT)
_INSTANT = "integer epoch milliseconds, or ISO-8601 text with an offset (2026-11-30T09:15:00Z)"


def to_utc(value: object, info: ValidationInfo) -> datetime:
    """Integer epoch milliseconds or offset ISO-8601 text; in Python also an aware datetime. Naive times are refused."""
    if isinstance(value, datetime) and value.__class__ is datetime and value.tzinfo is UTC:
        return value  # the common case (our own records, re-checked before sending): nothing to convert
    if isinstance(value, int) and value.__class__ is int:  # bool is an int subclass; float ms are not the wire form
        return _epoch_ms(value)
    if isinstance(value, str) and _ISO_INSTANT.fullmatch(value):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise ValueError(_INSTANT) from exc
    elif info.mode == "json" or not isinstance(value, datetime):
        raise ValueError(_INSTANT)
    if value.tzinfo is None:
        msg = "a timezone-aware datetime (naive times are ambiguous)"
        raise ValueError(msg)
    _epoch_ms(round(value.timestamp() * 1000))
    return value.astimezone(UTC)


def _to_millis(value: datetime) -> int:
    return round(value.timestamp() * 1000)  # round() of a float is already an int


def _text_form(pattern: str, convert: Callable[[str], object], expected: str) -> BeforeValidator:
    """A before-validator: a string must match ``pattern`` and convert (objects of the target type pass).

    Converting here rather than in pydantic: strict wire parsing would refuse the string that a
    before-validator hands on, and pydantic's own parsers accept more forms than the contract (a UUID
    without hyphens or in braces, a date with a time part).
    """
    compiled = re.compile(pattern)

    def check(value: object) -> object:
        if isinstance(value, str):
            if not compiled.fullmatch(value):
                raise ValueError(expected)
            try:
                return convert(value)
            except ValueError as exc:
                raise ValueError(expected) from exc
        return value

    return BeforeValidator(check)


UtcMillis = Annotated[datetime, PlainSerializer(_to_millis, return_type=int, when_used="json")]
Uuid = Annotated[uuid.UUID, _text_form(UUID_TEXT, uuid.UUID, "a UUID in its 8-4-4-4-12 hexadecimal form")]
IsoDate = Annotated[date, _text_form(DATE_TEXT, date.fromisoformat, "a calendar date YYYY-MM-DD")]
Price = Annotated[float, Field(gt=0, le=PRICE_MAX, allow_inf_nan=False)]
PaidPrice = Annotated[float, Field(ge=0, le=PRICE_MAX, allow_inf_nan=False)]
"""A price paid may be 0: complimentary stays (680 of the dataset's 119,390 bookings) are real room nights."""
Identifier = Annotated[str, Field(min_length=1, max_length=64, pattern=ID_PATTERN)]
Segment = Annotated[str, Field(min_length=1, max_length=32, pattern=ID_PATTERN)]


def now_utc() -> datetime:
    """Current time, UTC, truncated to milliseconds (the wire precision)."""
    now = datetime.now(tz=UTC)
    return now.replace(microsecond=(now.microsecond // 1000) * 1000)
