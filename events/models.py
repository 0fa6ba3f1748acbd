"""The event contract: every record that crosses Kafka, as pydantic v2 models.

Wire format: JSON, UTF-8, one record per message, keyed by ``hotel_id``. Every
record carries ``event_id`` (uuid4), ``event_type``, ``event_time`` (UTC epoch
milliseconds on the wire, an aware :class:`~datetime.datetime` in Python) and
``schema_version``.

Example:
    >>> from datetime import date, datetime, timezone
    >>> ev = ViewEvent(hotel_id="h1", room_type="std", stay_date=date(2026, 12, 24),
    ...                event_time=datetime(2026, 12, 1, tzinfo=timezone.utc),
    ...                price_shown=120.0, channel="web")
    >>> ev.model_dump(mode="json")["event_time"]
    1796083200000
    >>> parse_event(ev.model_dump_json()).price_shown
    120.0
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic._internal._model_construction import ModelMetaclass  # the documented way to extend it
from pydantic_core import ErrorDetails, PydanticCustomError

from events.errors import EventValidationError

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


def _to_utc(value: object, info: ValidationInfo) -> datetime:
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


class _ContractModel(ModelMetaclass):
    """Constructing a record (``BookingEvent(...)``) raises our :class:`EventValidationError`, not pydantic's.

    On the metaclass, so that ``model_validate`` and ``model_validate_json`` (which do not call the class)
    keep pydantic's own fast path; :func:`parse_event` translates their errors itself.
    """

    def __call__(cls, *args: object, **kwargs: object) -> object:
        try:
            return super().__call__(*args, **kwargs)
        except ValidationError as exc:
            raise to_validation_error(exc) from exc


class Record(BaseModel, metaclass=_ContractModel):
    """Fields shared by every record on the wire.

    Constructing a record with a bad value raises :class:`~events.errors.EventValidationError`
    (a ``ValueError``), like :func:`parse_event`, never pydantic's own error.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, allow_inf_nan=False)

    event_id: Uuid = Field(default_factory=uuid.uuid4)
    event_time: UtcMillis = Field(default_factory=now_utc)
    schema_version: int = SCHEMA_VERSION

    @field_validator("event_time", mode="before")
    @classmethod
    def _utc(cls, value: object, info: ValidationInfo) -> datetime:
        return _to_utc(value, info)

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value != SCHEMA_VERSION:
            msg = f"schema_version {SCHEMA_VERSION}"
            raise ValueError(msg)
        return value

    @property
    def key(self) -> str:
        """Kafka record key: the hotel, so one hotel's events stay ordered."""
        return str(getattr(self, "hotel_id", self.event_id))


class StayKeyed(Record):
    """A record about one (hotel, room type, arrival night)."""

    hotel_id: Identifier
    room_type: Annotated[str, Field(min_length=1, max_length=32, pattern=ID_PATTERN)]
    stay_date: IsoDate


_STAY_RULE = "stay_date_before_event"
_WESTMOST = timezone(timedelta(hours=-12))
"""The zone whose local date is the earliest on Earth at any instant: the stay-date rule of a hotel with no
configured zone, so that no hotel's valid evening event is refused (the rule once compared UTC dates, and a
hotel west of UTC lost its arrival-day events)."""


class StayDated(StayKeyed):
    """A stay-keyed record sent before or on the arrival night (the events and requests, not derived records).

    Rule: ``stay_date`` is not before the event's date in the hotel's local time zone. The zone comes from
    the hotel profiles passed as validation context (``context={"hotels": {...}}``, see
    :mod:`events.contract`); a hotel with no profile is checked in UTC-12, which accepts every zone's date.
    """

    @model_validator(mode="after")
    def _not_after_arrival(self, info: ValidationInfo) -> StayDated:
        zone = _zone_of(self.hotel_id, info.context)
        local = self.event_time.astimezone(zone).date()
        if self.stay_date < local:
            raise PydanticCustomError(
                _STAY_RULE, "a stay_date on or after the event's local date {local}", {"local": str(local)}
            )
        return self


def _zone_of(hotel_id: str, context: object) -> tzinfo:
    hotels = context.get("hotels") if isinstance(context, dict) else None
    profile = hotels.get(hotel_id) if hotels else None
    return _WESTMOST if profile is None else profile.tz


class SearchEvent(StayDated):
    """A guest searched availability for a stay."""

    event_type: Literal["search"] = "search"
    nights: int = Field(default=1, ge=1, le=60)
    guests: int = Field(default=2, ge=1, le=12)
    channel: Channel = "web"
    segment: Segment = "leisure"


class ViewEvent(StayDated):
    """A guest saw a room offer at a price."""

    event_type: Literal["view"] = "view"
    price_shown: Price
    channel: Channel = "web"
    segment: Segment = "leisure"
    decision_id: Uuid | None = None


class BookingEvent(StayDated):
    """A guest booked rooms at a price."""

    event_type: Literal["booking"] = "booking"
    booking_id: Uuid = Field(default_factory=uuid.uuid4)
    price_paid: PaidPrice
    rooms: int = Field(default=1, ge=1, le=20)
    nights: int = Field(default=1, ge=0, le=60)
    """0 is a day-use stay: 715 of the dataset's bookings have 0 nights and are real room sales, so accepted."""
    channel: Channel = "web"
    segment: Segment = "leisure"
    decision_id: Uuid | None = None

    @property
    def complimentary(self) -> bool:
        """A stay given for free (price 0): counted as a booking, kept out of price features."""
        return self.price_paid == 0


class CancellationEvent(StayDated):
    """A booking was cancelled."""

    event_type: Literal["cancellation"] = "cancellation"
    booking_id: Uuid
    rooms: int = Field(default=1, ge=1, le=20)


class CompetitorRateEvent(StayDated):
    """A competitor's published rate for a comparable room."""

    event_type: Literal["competitor_rate"] = "competitor_rate"
    competitor_id: Identifier
    rate: Price


class InventoryEvent(StayDated):
    """Rooms left to sell, and the capacity, for a room type on a night."""

    event_type: Literal["inventory"] = "inventory"
    rooms_left: int = Field(ge=0)
    capacity: int = Field(gt=0)


BehaviourEvent = Annotated[
    SearchEvent | ViewEvent | BookingEvent | CancellationEvent | CompetitorRateEvent | InventoryEvent,
    Field(discriminator="event_type"),
]
BEHAVIOUR_TYPES: tuple[str, ...] = (
    "search",
    "view",
    "booking",
    "cancellation",
    "competitor_rate",
    "inventory",
)


class PricingRequest(StayDated):
    """Ask for a price for a stay."""

    event_type: Literal["pricing_request"] = "pricing_request"
    request_id: Uuid = Field(default_factory=uuid.uuid4)
    nights: int = Field(default=1, ge=1, le=60)
    channel: Channel = "web"
    guest_key: str | None = Field(default=None, max_length=128)
    last_published_price: Price | None = None

    @property
    def request_time(self) -> datetime:
        return self.event_time


class PricingDecision(StayKeyed):
    """The scorer's answer to one pricing request."""

    event_type: Literal["pricing_decision"] = "pricing_decision"
    decision_id: Uuid = Field(default_factory=uuid.uuid4)
    request_id: Uuid
    price: Price
    model_price: float | None = Field(default=None, gt=0.0, allow_inf_nan=False,
                                      description="the price before rounding to the currency's minor unit")
    tier: Tier
    channel: Channel = "web"
    model_name: str | None = None
    model_version: str | None = None
    feature_version: int | None = None
    snapshot_id: str | None = None
    rule_ids: tuple[str, ...] = ()
    complexity: float = Field(ge=0.0, allow_inf_nan=False)
    expected_booking_prob: float | None = Field(default=None, ge=0.0, le=1.0)
    bid_price: float | None = Field(default=None, ge=0.0, allow_inf_nan=False, description="cost per room-night")
    forecast_views: float | None = Field(default=None, ge=0.0, allow_inf_nan=False, description="shoppers to come")
    degraded: bool = False
    degraded_reason: str | None = None
    arm: str = "incumbent"
    propensity: float = Field(default=1.0, gt=0.0, le=1.0)
    latency_ms: float = Field(ge=0.0, allow_inf_nan=False)
    features: dict[str, float | None] = Field(default_factory=dict)


class OutcomeLabel(StayKeyed):
    """A decision joined with what the guest did (on ``feedback.labels``)."""

    event_type: Literal["label"] = "label"
    decision_id: Uuid
    label: Literal[0, 1]
    price: Price
    tier: Tier
    model_version: str | None = None
    feature_version: int | None = None
    predicted_prob: float | None = Field(default=None, ge=0.0, le=1.0)
    revision: int = Field(default=0, ge=0)
    reason: Literal["booked", "no_booking", "cancelled", "late_booking"] = "booked"
    features: dict[str, float | None] = Field(default_factory=dict)


class TrainingExample(StayKeyed):
    """A selected, weighted example for the trainers (on ``training.examples``)."""

    event_type: Literal["training_example"] = "training_example"
    decision_id: Uuid
    label: Literal[0, 1]
    price: Price
    features: dict[str, float | None]
    weight: float = Field(gt=0.0, allow_inf_nan=False)
    strategy: str
    selection_prob: float = Field(gt=0.0, le=1.0)
    model_version: str | None = None


CONTRACT: dict[str, type[Record]] = {
    "search": SearchEvent,
    "view": ViewEvent,
    "booking": BookingEvent,
    "cancellation": CancellationEvent,
    "competitor_rate": CompetitorRateEvent,
    "inventory": InventoryEvent,
    "pricing_request": PricingRequest,
    "pricing_decision": PricingDecision,
    "label": OutcomeLabel,
    "training_example": TrainingExample,
}

# Built once: constructing a TypeAdapter costs ~0.4 ms, more than parsing a record.
_JSON_OBJECT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


RULE_FIELDS = {_STAY_RULE: "stay_date"}
"""Model-level rules and the field each one is about (pydantic locates them on the record)."""


def _expectation(error: ErrorDetails) -> str:
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
    return EventValidationError(field, value, _expectation(first))


def parse_event(
    raw: bytes | str | dict[str, Any], *, context: dict[str, Any] | None = None, envelope: bool = True
) -> Record:
    """Parse any contract record from its wire form; the ``event_type`` picks the model.

    Wire parsing is strict: types are JSON's own (a number is not a string, ``2.0`` is not an integer),
    the text is one JSON object in valid UTF-8 with nothing after it, and ``event_time`` is integer epoch
    milliseconds. The :data:`ENVELOPE` fields are required unless ``envelope`` is false (the HTTP API
    fills them). ``context`` carries the hotel profiles of the model-level rules (see
    :mod:`events.contract`). A dict is checked as its JSON text would be.

    Raises:
        EventValidationError: naming the field, the value and the expectation.
    """
    text = raw if not isinstance(raw, dict) else _dict_to_json(raw)
    if len(text) > MAX_RECORD_BYTES:  # str: characters, at most 4 bytes each; checked again as bytes on the way out
        raise EventValidationError(field="<record>", value=f"{len(text)} bytes",
                                   expected=f"a record of at most {MAX_RECORD_BYTES} bytes")
    try:
        payload = _JSON_OBJECT.validate_json(text)
    except ValidationError as exc:
        shown = text[:80]
        raise EventValidationError(field="<record>", value=shown, expected=_expectation(exc.errors()[0])) from exc
    twice = duplicate_key(text)
    if twice is not None:
        raise EventValidationError(field=twice, value=payload.get(twice), expected=DUPLICATE_EXPECTED)
    kind = payload.get("event_type")
    model = CONTRACT.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise EventValidationError(field="event_type", value=kind, expected=f"one of {sorted(CONTRACT)}")
    for name in ENVELOPE if envelope else ():
        if name not in payload:
            raise EventValidationError(field=name, value=None, expected="a value (the field is required)")
    try:
        return model.model_validate_json(text, strict=True, context=context)
    except ValidationError as exc:
        raise to_validation_error(exc) from exc


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


def _dict_to_json(payload: dict[str, Any]) -> bytes:
    """The JSON text of a mapping, for the same strict checks as a record read off the wire."""
    try:
        return _JSON_OBJECT.dump_json(payload)
    except (ValueError, TypeError) as exc:  # pydantic_core's PydanticSerializationError is a ValueError
        raise EventValidationError(field="<record>", value=repr(payload)[:80], expected="JSON values only") from exc


def dumps(record: Record) -> bytes:
    """Serialise a record to its wire form (compact JSON, UTF-8)."""
    return record.__pydantic_serializer__.to_json(record)
