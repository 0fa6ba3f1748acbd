"""The event contract: every record that crosses Kafka, as pydantic v2 models.

Wire format: JSON, UTF-8, one record per message, keyed by ``hotel_id``. Every
record carries ``event_id`` (uuid4), ``event_type``, ``event_time`` (UTC epoch
milliseconds on the wire, an aware :class:`~datetime.datetime` in Python) and
``schema_version``.

The field types and bounds live in :mod:`events.fields`, the wording of a refusal in
:mod:`events.wording`; every public name of the contract is importable from here.

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

import uuid
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic._internal._model_construction import ModelMetaclass  # the documented way to extend it
from pydantic_core import PydanticCustomError

from events.errors import EventValidationError
from events.fields import (
    CHANNELS,
    DATE_TEXT,
    ENVELOPE,
    EVENT_TIME_MAX_MS,
    EVENT_TIME_MIN_MS,
    ID_PATTERN,
    INSTANT_TEXT,
    MAX_RECORD_BYTES,
    PRICE_MAX,
    SCHEMA_VERSION,
    UUID_TEXT,
    Channel,
    Identifier,
    IsoDate,
    PaidPrice,
    Price,
    Segment,
    Tier,
    UtcMillis,
    Uuid,
    now_utc,
    to_utc,
)
from events.wording import (
    DUPLICATE_EXPECTED,
    RULE_FIELDS,
    STAY_RULE,
    duplicate_key,
    expectation,
    to_validation_error,
)

# The contract's public names, wherever they are defined: all importable from here, as before the split.
__all__ = [
    "BEHAVIOUR_TYPES", "BehaviourEvent", "BookingEvent", "CHANNELS", "CONTRACT", "CancellationEvent", "Channel",
    "CompetitorRateEvent", "DATE_TEXT", "DUPLICATE_EXPECTED", "ENVELOPE", "EVENT_TIME_MAX_MS", "EVENT_TIME_MIN_MS",
    "ID_PATTERN", "INSTANT_TEXT", "Identifier", "InventoryEvent", "IsoDate", "MAX_RECORD_BYTES", "OutcomeLabel",
    "PRICE_MAX", "PaidPrice", "Price", "PricingDecision", "PricingRequest", "RULE_FIELDS", "Record",
    "SCHEMA_VERSION", "SearchEvent", "Segment", "StayDated", "StayKeyed", "Tier", "TrainingExample", "UUID_TEXT",
    "UtcMillis", "Uuid", "ViewEvent", "dumps", "duplicate_key", "now_utc", "parse_event", "to_validation_error"
]


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
        return to_utc(value, info)

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
                STAY_RULE, "a stay_date on or after the event's local date {local}", {"local": str(local)}
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
        raise EventValidationError(field="<record>", value=shown, expected=expectation(exc.errors()[0])) from exc
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




def _dict_to_json(payload: dict[str, Any]) -> bytes:
    """The JSON text of a mapping, for the same strict checks as a record read off the wire."""
    try:
        return _JSON_OBJECT.dump_json(payload)
    except (ValueError, TypeError) as exc:  # pydantic_core's PydanticSerializationError is a ValueError
        raise EventValidationError(field="<record>", value=repr(payload)[:80], expected="JSON values only") from exc


def dumps(record: Record) -> bytes:
    """Serialise a record to its wire form (compact JSON, UTF-8)."""
    return record.__pydantic_serializer__.to_json(record)
