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

import math
import uuid
from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    TypeAdapter,
    ValidationError,
    field_validator,
)

from events.errors import EventValidationError

SCHEMA_VERSION = 1
"""Bumped on any change that an old consumer could not read."""

Channel = Literal["web", "mobile", "ota", "gds", "direct", "corporate"]
CHANNELS: tuple[str, ...] = ("web", "mobile", "ota", "gds", "direct", "corporate")
Tier = Literal["rules", "light", "heavy"]


_NUMBER = (int, float)


def _to_utc(value: Any) -> Any:
    """Accept epoch milliseconds, ISO-8601 or an aware datetime; refuse naive times."""
    if value.__class__ is datetime and value.tzinfo is UTC:
        return value  # the common case (our own records, re-checked before sending): nothing to convert
    if isinstance(value, bool):
        return value
    if isinstance(value, _NUMBER):
        if not math.isfinite(value):
            return value
        return datetime.fromtimestamp(value / 1000.0, tz=UTC)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
    if isinstance(value, datetime):
        if value.tzinfo is None:
            msg = "a timezone-aware datetime (naive times are ambiguous)"
            raise ValueError(msg)
        return value.astimezone(UTC)
    return value


def _to_millis(value: datetime) -> int:
    return round(value.timestamp() * 1000)  # round() of a float is already an int


UtcMillis = Annotated[datetime, PlainSerializer(_to_millis, return_type=int, when_used="json")]
Price = Annotated[float, Field(gt=0, allow_inf_nan=False)]


def now_utc() -> datetime:
    """Current time, UTC, truncated to milliseconds (the wire precision)."""
    now = datetime.now(tz=UTC)
    return now.replace(microsecond=(now.microsecond // 1000) * 1000)


class Record(BaseModel):
    """Fields shared by every record on the wire."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    event_id: uuid.UUID = Field(default_factory=uuid.uuid4)
    event_time: UtcMillis = Field(default_factory=now_utc)
    schema_version: int = SCHEMA_VERSION

    @field_validator("event_time", mode="before")
    @classmethod
    def _utc(cls, value: Any) -> Any:
        return _to_utc(value)

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

    hotel_id: str = Field(min_length=1, max_length=64)
    room_type: str = Field(min_length=1, max_length=32)
    stay_date: date


class SearchEvent(StayKeyed):
    """A guest searched availability for a stay."""

    event_type: Literal["search"] = "search"
    nights: int = Field(default=1, ge=1, le=60)
    guests: int = Field(default=2, ge=1, le=12)
    channel: Channel = "web"
    segment: str = "leisure"


class ViewEvent(StayKeyed):
    """A guest saw a room offer at a price."""

    event_type: Literal["view"] = "view"
    price_shown: Price
    channel: Channel = "web"
    segment: str = "leisure"
    decision_id: uuid.UUID | None = None


class BookingEvent(StayKeyed):
    """A guest booked rooms at a price."""

    event_type: Literal["booking"] = "booking"
    booking_id: uuid.UUID = Field(default_factory=uuid.uuid4)
    price_paid: Price
    rooms: int = Field(default=1, ge=1, le=20)
    nights: int = Field(default=1, ge=1, le=60)
    channel: Channel = "web"
    segment: str = "leisure"
    decision_id: uuid.UUID | None = None


class CancellationEvent(StayKeyed):
    """A booking was cancelled."""

    event_type: Literal["cancellation"] = "cancellation"
    booking_id: uuid.UUID
    rooms: int = Field(default=1, ge=1, le=20)


class CompetitorRateEvent(StayKeyed):
    """A competitor's published rate for a comparable room."""

    event_type: Literal["competitor_rate"] = "competitor_rate"
    competitor_id: str = Field(min_length=1)
    rate: Price


class InventoryEvent(StayKeyed):
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


class PricingRequest(StayKeyed):
    """Ask for a price for a stay."""

    event_type: Literal["pricing_request"] = "pricing_request"
    request_id: uuid.UUID = Field(default_factory=uuid.uuid4)
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
    decision_id: uuid.UUID = Field(default_factory=uuid.uuid4)
    request_id: uuid.UUID
    price: Price
    tier: Tier
    channel: Channel = "web"
    model_name: str | None = None
    model_version: str | None = None
    feature_version: int | None = None
    snapshot_id: str | None = None
    rule_ids: tuple[str, ...] = ()
    complexity: float = Field(ge=0.0, allow_inf_nan=False)
    expected_booking_prob: float | None = Field(default=None, ge=0.0, le=1.0)
    degraded: bool = False
    degraded_reason: str | None = None
    arm: str = "incumbent"
    propensity: float = Field(default=1.0, gt=0.0, le=1.0)
    latency_ms: float = Field(ge=0.0, allow_inf_nan=False)
    features: dict[str, float | None] = Field(default_factory=dict)


class OutcomeLabel(StayKeyed):
    """A decision joined with what the guest did (on ``feedback.labels``)."""

    event_type: Literal["label"] = "label"
    decision_id: uuid.UUID
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
    decision_id: uuid.UUID
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


def to_validation_error(exc: ValidationError) -> EventValidationError:
    """Translate pydantic's error into ours, naming the first offending field."""
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "<record>"
    return EventValidationError(field, first.get("input"), first["msg"])


def parse_event(raw: bytes | str | dict[str, Any]) -> Record:
    """Parse any contract record; the ``event_type`` picks the model.

    Raises:
        EventValidationError: naming the field, the value and the expectation.
    """
    try:
        if isinstance(raw, dict):
            payload = raw
        else:
            payload = _JSON_OBJECT.validate_json(raw)
    except ValidationError as exc:
        shown = raw[:80] if not isinstance(raw, dict) else raw
        raise EventValidationError(field="<record>", value=shown, expected="a JSON object") from exc
    kind = payload.get("event_type")
    model = CONTRACT.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise EventValidationError(field="event_type", value=kind, expected=f"one of {sorted(CONTRACT)}")
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise to_validation_error(exc) from exc


def dumps(record: Record) -> bytes:
    """Serialise a record to its wire form (compact JSON, UTF-8)."""
    return record.__pydantic_serializer__.to_json(record)
