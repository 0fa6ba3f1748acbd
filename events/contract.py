"""The contract as data: hotel profiles, plausibility flags, and the rule spec the Flink job runs.

The pydantic models of :mod:`events.models` are the one definition of every field rule.
This module derives from them, never restates them:

- :func:`field_spec` reads each behaviour model's JSON Schema (validation mode) into a compact
  list of field rules: kind, bounds, lengths, pattern, enum, required, nullable. The Flink job's
  parser (``pipelines/udf``, on the JVM) interprets exactly this list, so the SDK and the job
  refuse the same records and name the same field.
- :data:`FLAG_RULES` are the plausibility flags as data, interpreted here (:func:`flags`, used by
  the SDK) and by the JVM parser: a flagged record is kept, never refused.
- :class:`HotelProfile` holds what is per hotel: the time zone of the stay-date rule and the
  price range of the outlier flag.

Decisions, with the public Hotel Booking Demand dataset (119,390 bookings) in mind:

- ``complimentary``: a booking at price 0 (680 complimentary stays plus day-use ones, 1,959
  in all at ADR 0) is a real room sale: counted in demand, kept out of price features.
- ``day_use``: a booking of 0 nights (715 in the dataset) is valid and flagged.
- ``price_outlier``: a price outside the hotel's range (default 5 to 1,000; the dataset's
  largest ADR, 5,400, is one record) is kept and flagged, and kept out of price features.
- A cancellation of a booking the system has not seen is kept (its rooms still left the
  market) and counted by the label service as an orphan; the contract cannot know bookings.

Example:
    >>> from datetime import date
    >>> from events.models import BookingEvent
    >>> free = BookingEvent(hotel_id="Resort Hotel", room_type="A", stay_date=date(2031, 7, 1),
    ...                     price_paid=0.0, nights=0)
    >>> flags(free)
    ('complimentary', 'day_use')
    >>> [rule["name"] for rule in field_spec()["booking"]][:4]
    ['event_id', 'event_time', 'schema_version', 'hotel_id']
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from datetime import tzinfo
from functools import cached_property
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field, field_validator

from events.models import (
    BEHAVIOUR_TYPES,
    CONTRACT,
    DATE_TEXT,
    ENVELOPE,
    EVENT_TIME_MAX_MS,
    EVENT_TIME_MIN_MS,
    INSTANT_TEXT,
    MAX_RECORD_BYTES,
    SCHEMA_VERSION,
    UUID_TEXT,
    Record,
)

DEFAULT_PRICE_RANGE: tuple[float, float] = (5.0, 1000.0)
"""Plausible price per room night of a hotel without a profile (see the module docstring)."""
PRICE_FIELDS: tuple[str, ...] = ("price_shown", "price_paid", "rate")
FLAG_RULES: tuple[dict[str, Any], ...] = (
    {"flag": "complimentary", "event_type": "booking", "field": "price_paid", "equals": 0},
    {"flag": "day_use", "event_type": "booking", "field": "nights", "equals": 0},
    {"flag": "price_outlier", "fields": list(PRICE_FIELDS), "outside": "price_range", "skip_zero": True},
)
"""Plausibility flags, in order: data read by :func:`flags` and by the Flink job's parser."""
DLQ_PAYLOAD_BYTES = 262_144
"""A dead letter keeps at most this many bytes of its record (the headers say how many it had): a record
too large for the producer's ``max.request.size`` once crashed the job at every restart."""
FLAGS_HEADER = "pricestream-flags"
"""Kafka header the SDK sets on a flagged record: the flags, comma-separated."""


class HotelProfile(BaseModel):
    """What the contract's rules need to know about one hotel.

    Example:
        >>> HotelProfile(zone="America/New_York").tz.key
        'America/New_York'
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    zone: str = Field(default="Etc/GMT+12", description="IANA time zone of the hotel (stay dates are local)")
    price_range: tuple[float, float] = DEFAULT_PRICE_RANGE
    room_types: tuple[str, ...] | None = Field(
        default=None, description="room types the hotel sells; a request for another is priced by the rules, saying so")
    price_decimals: int | None = Field(
        default=None, ge=0, le=4, description="digits of the currency's minor unit (default the deployment's, 2)")

    @field_validator("zone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (KeyError, ValueError) as exc:  # ZoneInfoNotFoundError is a KeyError
            msg = f"an IANA time zone name, got {value!r}"
            raise ValueError(msg) from exc
        return value

    @cached_property
    def tz(self) -> tzinfo:
        return ZoneInfo(self.zone)


def flags(record: Record, hotels: Mapping[str, HotelProfile] | None = None) -> tuple[str, ...]:
    """The plausibility flags of a valid record (empty for most records)."""
    out: list[str] = []
    values = record.__dict__
    kind = values.get("event_type")
    for rule in FLAG_RULES:
        if "equals" in rule:
            if kind == rule["event_type"] and values.get(rule["field"]) == rule["equals"]:
                out.append(rule["flag"])
            continue
        profile = (hotels or {}).get(str(values.get("hotel_id")))
        low, high = profile.price_range if profile is not None else DEFAULT_PRICE_RANGE
        prices = [values.get(name) for name in rule["fields"]]
        if any(isinstance(p, float | int) and not (rule["skip_zero"] and p == 0) and not low <= p <= high
               for p in prices):
            out.append(rule["flag"])
    return tuple(out)


def _kind(prop: Mapping[str, Any]) -> dict[str, Any]:
    """One JSON Schema property as a compact rule (the nullable part of an ``anyOf`` folded in)."""
    options = prop.get("anyOf")
    if options:
        concrete = [o for o in options if o.get("type") != "null"]
        if len(concrete) != 1:
            msg = f"property {prop.get('title')!r}: one non-null type expected in anyOf, got {options}"
            raise ValueError(msg)
        return {**_kind(concrete[0]), "nullable": len(concrete) < len(options)}
    rule: dict[str, Any] = {}
    fmt, typ = prop.get("format"), prop.get("type")
    if "const" in prop:
        rule["kind"], rule["values"] = "enum", [prop["const"]]
    elif "enum" in prop:
        rule["kind"], rule["values"] = "enum", list(prop["enum"])
    elif fmt in ("uuid", "date", "date-time"):
        rule["kind"] = {"uuid": "uuid", "date": "date", "date-time": "instant"}[fmt]
    elif typ in ("string", "integer", "number"):
        rule["kind"] = typ
    else:
        msg = f"property {prop.get('title')!r}: no wire rule for {prop}"
        raise ValueError(msg)
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern"):
        if key in prop:
            rule[key] = prop[key]
    return rule


def field_spec(kinds: tuple[str, ...] = BEHAVIOUR_TYPES, *, envelope: bool = True) -> dict[str, list[dict[str, Any]]]:
    """Record type -> its field rules in model order, read from the models' JSON Schema (behaviour events
    by default: what the Flink job reads). ``envelope``: the envelope fields are required (the wire form;
    the HTTP API fills them)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for kind in kinds:
        schema = CONTRACT[kind].model_json_schema(mode="validation")
        required = set(schema.get("required", ()))
        rules = []
        for name, prop in schema["properties"].items():
            needed = name in required or (envelope and name in ENVELOPE)
            rule = {"name": name, "required": needed, "nullable": False, **_kind(prop)}
            if name == "schema_version":  # a validator pins it; the schema only says "integer"
                rule |= {"kind": "enum", "values": [SCHEMA_VERSION]}
            rules.append(rule)
        out[kind] = rules
    return out


def job_spec(hotels: Mapping[str, HotelProfile] | None = None) -> dict[str, Any]:
    """Everything the Flink job's parser checks, as one JSON-able document."""
    return {
        "schema_version": SCHEMA_VERSION,
        "max_record_bytes": MAX_RECORD_BYTES,
        "dlq_payload_bytes": DLQ_PAYLOAD_BYTES,
        "event_time_ms": [EVENT_TIME_MIN_MS, EVENT_TIME_MAX_MS],
        "text_forms": {"uuid": UUID_TEXT, "date": DATE_TEXT, "instant": INSTANT_TEXT},
        "types": field_spec(),
        "flags": list(FLAG_RULES),
        "default_zone": HotelProfile().zone,
        "default_price_range": list(DEFAULT_PRICE_RANGE),
        "hotels": {h: {"zone": p.zone, "price_range": list(p.price_range)} for h, p in (hotels or {}).items()},
    }


def encoded_job_spec(hotels: Mapping[str, HotelProfile] | None = None) -> str:
    """:func:`job_spec` as URL-safe base64 (a Flink job parameter cannot hold ``,`` or ``:``).

    Example:
        >>> json.loads(base64.urlsafe_b64decode(encoded_job_spec()))["schema_version"]
        1
    """
    return base64.urlsafe_b64encode(json.dumps(job_spec(hotels), sort_keys=True).encode()).decode()
