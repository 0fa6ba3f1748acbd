"""The pricing API's OpenAPI document: every constraint the service enforces, stated.

The request schema is the contract model's own JSON Schema
(:class:`~events.models.PricingRequest`), so a bound changes in one place. Two things
the model checks outside its annotations are stated here from the same constants:
``schema_version`` is :data:`~events.models.SCHEMA_VERSION`, and ``event_time`` may be
epoch milliseconds in the contract's range as well as ISO-8601 text. The 4xx answers share one error schema
(:class:`ErrorBody`), ``/metrics`` is ``text/plain`` and ``/healthz`` documents its 503.

Example:
    >>> from fastapi import FastAPI
    >>> app = FastAPI()
    >>> spec = documented_openapi(app)()
    >>> spec["components"]["schemas"]["PricingRequest"]["properties"]["schema_version"]["const"]
    1
    >>> sorted(spec["components"]["schemas"]["ErrorBody"]["properties"])
    ['error', 'errors', 'limit_bytes', 'message']
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ConfigDict, Field

from events.models import EVENT_TIME_MAX_MS, EVENT_TIME_MIN_MS, SCHEMA_VERSION, PricingRequest
from serving.errors import ErrorCode

_REF = "#/components/schemas/{model}"
_REQUEST_REF = {"$ref": _REF.format(model="PricingRequest")}

EXAMPLE = {
    "hotel_id": "h042",
    "room_type": "double",
    "stay_date": "2026-12-24",
    "nights": 2,
    "channel": "web",
    "event_time": "2026-11-30T09:15:00Z",
    "last_published_price": 149.0,
}


class FieldErrorBody(BaseModel):
    """One problem: the field (``nights``, ``[2].nights``, ``<body>``), what was sent, what is expected."""

    field: str
    value: Any = Field(description="the rejected value; a string when JSON cannot carry it (NaN, huge numbers)")
    expected: str
    message: str


class ErrorBody(BaseModel):
    """Every 4xx answer of the pricing endpoints."""

    error: ErrorCode
    message: str
    errors: list[FieldErrorBody] = Field(min_length=1)
    limit_bytes: int | None = Field(default=None, description="the body size limit (413 only)")


class Health(BaseModel):
    """``/healthz``: ``ok``, or ``degraded`` with the reason (a 503 when a dependency fails)."""

    model_config = ConfigDict(extra="allow")

    status: Literal["ok", "degraded"]
    reason: str | None = Field(default=None, description="what is wrong, e.g. 'redis: ... connection refused'")


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorBody, "description": description}


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    408: _error("body not received whole within the service's body_timeout_s (a slow client)"),
    413: _error("body larger than the service's max_body_bytes"),
    415: _error("Content-Type other than application/json (UTF-8)"),
    422: _error("body that is not strict JSON (UTF-8, no NaN/Infinity, no lone surrogates) or breaks the contract"),
}
HEALTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    503: {"model": Health, "description": "a dependency that decisions need is failing (Redis, the audit log)"},
}
METRICS_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "Prometheus text exposition format",
          "content": {"text/plain": {"schema": {"type": "string"}}}},
}


def request_body(*, batch: bool, max_batch: int) -> dict[str, Any]:
    """``openapi_extra`` of a pricing endpoint: its JSON body (the service parses it itself)."""
    if batch:
        schema: dict[str, Any] = {"type": "array", "items": _REQUEST_REF, "minItems": 1, "maxItems": max_batch}
        examples: dict[str, Any] = {"two": {"summary": "two stays", "value": [EXAMPLE] * 2}}
    else:
        schema, examples = dict(_REQUEST_REF), {"web": {"summary": "a web search", "value": EXAMPLE}}
    content = {"application/json": {"schema": schema, "examples": examples}}
    return {"requestBody": {"required": True, "content": content}}


def request_schemas() -> dict[str, Any]:
    """Component schemas of the request: the contract model's, with its non-annotated rules stated."""
    schema = PricingRequest.model_json_schema(ref_template=_REF)
    defs: dict[str, Any] = schema.pop("$defs", {})
    props = schema["properties"]
    version = props["schema_version"]
    if "const" not in version and "enum" not in version:
        version["const"] = SCHEMA_VERSION
    event_time = props["event_time"]
    if "anyOf" not in event_time:
        text = {k: v for k, v in event_time.items() if k in ("type", "format")}
        millis = {"type": "integer", "minimum": EVENT_TIME_MIN_MS, "exclusiveMaximum": EVENT_TIME_MAX_MS}
        props["event_time"] = {
            "title": event_time.get("title", "Event Time"), "anyOf": [text, millis],
            "description": f"ISO-8601 with an offset, or UTC epoch milliseconds; from {_day(EVENT_TIME_MIN_MS)} "
                           f"(included) to {_day(EVENT_TIME_MAX_MS)} (excluded), UTC",
        }
    return {**defs, "PricingRequest": schema}


def _day(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).date().isoformat()


def documented_openapi(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """``app.openapi`` replaced by one that adds :func:`request_schemas` (built once, then cached)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            schemas = spec.setdefault("components", {}).setdefault("schemas", {})
            schemas.update(copy.deepcopy(request_schemas()))
            if "ErrorBody" not in schemas:  # an app without the pricing routes (the doctest)
                schemas.update(_model_schemas(ErrorBody))
            if any(getattr(route, "path", "") == "/v1/quote:group" for route in app.routes):
                from serving.groups import GroupRequest  # the group route's body, parsed by the service itself

                schemas.update(_model_schemas(GroupRequest))
            app.openapi_schema = spec
        return app.openapi_schema

    return openapi


def _model_schemas(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema(ref_template=_REF)
    return {**schema.pop("$defs", {}), model.__name__: schema}
