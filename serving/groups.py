"""``POST /v1/quote:group``: a block of rooms over several nights, quoted by displacement.

The body names the hotel and room type and either the rooms of each night (``nights``) or a block
(``block``: an arrival, a number of nights and rooms per night). The answer gives the minimum
acceptable rate and a recommended rate per room-night, the transient revenue the block displaces,
each night's bid price, floor and ceiling, and whether every night has the rooms
(:mod:`pricing.groups`). Every quote is written to the audit log like a price.

A body that breaks the contract gets a 422 naming the field: no nights, rooms under 1, a night in
the past or beyond ``horizon_days``, a night named twice, or both ``nights`` and ``block``.

Example:
    >>> body = b'{"hotel_id": "h1", "room_type": "std", "block": {"arrival": "2027-03-01", "nights": 2, "rooms": 5}}'
    >>> [(str(d), r) for d, r in parse_group(body, today=date(2027, 1, 1)).rooms()]
    [('2027-03-01', 5), ('2027-03-02', 5)]
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from starlette.concurrency import run_in_threadpool

from events.models import Channel, Identifier, PricingRequest
from pricing.groups import GroupQuoter
from serving.body import check_content_type, decode_json, from_validation_errors
from serving.errors import BadRequest, FieldError

GROUP_HORIZON_DAYS = 450
"""Furthest night a group may ask for, in days from today: the booking window of the calibrated markets."""
MAX_GROUP_NIGHTS = 60
MAX_GROUP_ROOMS = 1_000

GroupAudit = Callable[[dict[str, Any]], object]
"""Called with each quote's answer, to write it to the audit log."""


class GroupNight(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    stay_date: date
    rooms: int = Field(ge=1, le=MAX_GROUP_ROOMS)


class GroupBlock(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    arrival: date
    nights: int = Field(ge=1, le=MAX_GROUP_NIGHTS)
    rooms: int = Field(ge=1, le=MAX_GROUP_ROOMS)


class GroupRequest(BaseModel):
    """A group's request: the rooms of each night, or a block."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hotel_id: Identifier
    room_type: Identifier
    channel: Channel = "direct"
    nights: list[GroupNight] | None = Field(default=None, min_length=1, max_length=MAX_GROUP_NIGHTS)
    block: GroupBlock | None = None

    @model_validator(mode="after")
    def _one_shape(self) -> GroupRequest:
        if (self.nights is None) == (self.block is None):
            msg = "either nights (rooms per night) or block (arrival, nights, rooms), not both and not neither"
            raise ValueError(msg)
        return self

    def rooms(self) -> list[tuple[date, int]]:
        """(night, rooms) of the request, in order."""
        if self.block is not None:
            b = self.block
            return [(b.arrival + timedelta(days=i), b.rooms) for i in range(b.nights)]
        return [(n.stay_date, n.rooms) for n in self.nights or ()]


class GroupNightValue(BaseModel):
    """One night of a quoted block: what it is worth to the hotel."""

    stay_date: str
    rooms: int
    bid_price: float
    floor: float
    ceiling: float
    rooms_left: float | None


class GroupQuoteAnswer(BaseModel):
    """The answer of ``POST /v1/quote:group`` (also the audit log's entry)."""

    quote_id: str
    event_type: str = "group_quote"
    hotel_id: str
    room_type: str
    channel: str
    quoted_at: str
    minimum_rate: float
    recommended_rate: float
    displaced_revenue: float
    room_nights: int
    feasible: bool
    short_nights: list[str]
    nights: list[GroupNightValue]


def group_request_body() -> dict[str, Any]:
    """``openapi_extra`` of the group route: its JSON body (the service parses it itself, strictly)."""
    schema = {"$ref": "#/components/schemas/GroupRequest"}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def parse_group(raw: bytes, *, today: date | None = None, horizon_days: int = GROUP_HORIZON_DAYS) -> GroupRequest:
    """The strict parse of a group body, with its nights checked against today and the horizon.

    Raises:
        BadRequest: 422 naming the field, the value and what was expected.
    """
    decode_json(raw)  # the strict JSON rules of every body: no duplicate keys, NaN, lone surrogates
    try:
        request = GroupRequest.model_validate_json(raw, strict=True)
    except ValidationError as exc:
        raise from_validation_errors(exc.errors()) from exc
    first = today or datetime.now(UTC).date()
    last = first + timedelta(days=horizon_days)
    seen: set[date] = set()
    for i, (night, _) in enumerate(request.rooms()):
        where = f"nights[{i}].stay_date" if request.nights is not None else "block.arrival"
        if not first <= night <= last:
            raise BadRequest(422, "validation_error",
                             [FieldError(where, str(night), f"a night from {first} to {last} (the horizon)")])
        if night in seen:
            raise BadRequest(422, "validation_error", [FieldError(where, str(night), "each night once")])
        seen.add(night)
    return request


def add_group_route(app: FastAPI, quoter: GroupQuoter, *, audit: GroupAudit | None = None,
                    horizon_days: int = GROUP_HORIZON_DAYS) -> None:
    """Serve ``POST /v1/quote:group`` on ``app`` with ``quoter``; ``audit`` takes every answer."""

    from serving.openapi import ERROR_RESPONSES

    @app.post("/v1/quote:group", summary="Quote a group block by displacement", response_model=GroupQuoteAnswer,
              responses=ERROR_RESPONSES, openapi_extra=group_request_body())
    async def quote_group(request: Request) -> Response:
        check_content_type(request.headers.get("content-type"))
        body = parse_group(await request.body(), horizon_days=horizon_days)
        now = datetime.now(UTC)
        asks = [(PricingRequest(hotel_id=body.hotel_id, room_type=body.room_type, stay_date=night, nights=1,
                                channel=body.channel, event_time=now), rooms) for night, rooms in body.rooms()]
        quote, nights = await run_in_threadpool(quoter.quote, asks)
        answer = {
            "quote_id": str(uuid.uuid4()), "event_type": "group_quote", "hotel_id": body.hotel_id,
            "room_type": body.room_type, "channel": body.channel, "quoted_at": now.isoformat(),
            "minimum_rate": quote.minimum_rate, "recommended_rate": quote.recommended_rate,
            "displaced_revenue": quote.displaced_revenue, "room_nights": quote.room_nights,
            "feasible": quote.feasible, "short_nights": [str(d) for d in quote.short_nights],
            "nights": [{"stay_date": str(n.night), "rooms": n.rooms, "bid_price": n.bid, "floor": n.floor,
                        "ceiling": n.ceiling, "rooms_left": n.rooms_left} for n in nights],
        }
        if audit is not None:
            await run_in_threadpool(audit, answer)
        return Response(json.dumps(answer), media_type="application/json")
