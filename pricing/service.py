"""HTTP pricing service: a FastAPI app around a :class:`~pricing.scorer.Scorer`.

Routes: ``POST /v1/price``, ``POST /v1/price:batch``, ``GET /healthz``,
``GET /metrics`` (Prometheus text) and ``GET /openapi.json``.

Contract: a valid request always gets a 200 (the scorer degrades instead of
failing); a body over ``max_body_bytes`` gets a 413; a body that breaks the
request contract gets a 422 whose JSON names the field, the value and the
expectation. An optional ``X-Deadline-Ms`` header shortens the time budget,
counted from the moment the request reached the app.

Example:
    >>> from fastapi.testclient import TestClient
    >>> from pricing.feature_source import MemoryFeatureSource
    >>> from pricing.rules import RuleSet
    >>> from pricing.scorer import Scorer, ScorerConfig
    >>> from routing.router import TieredRouter
    >>> scorer = Scorer(ScorerConfig(), rules=RuleSet.from_yaml("min_price: 50\\nmax_price: 500\\n"),
    ...                 feature_source=MemoryFeatureSource(), light=None, heavy=None, router=TieredRouter())
    >>> client = TestClient(create_app(scorer))
    >>> body = {"hotel_id": "h1", "room_type": "std", "stay_date": "2026-12-24", "nights": 0}
    >>> r = client.post("/v1/price", json=body)
    >>> r.status_code, r.json()["errors"][0]["field"]
    (422, 'nights')
    >>> client.post("/v1/price", json={**body, "nights": 2}).json()["tier"]
    'rules'
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Body, FastAPI, Header, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from events.models import PricingDecision, PricingRequest
from pricing.metrics import ScorerMetrics
from pricing.scorer import Scorer

MAX_DEADLINE_MS = 10_000.0
"""Largest ``X-Deadline-Ms`` accepted: longer budgets only hide a stuck dependency."""

_VALUE_CHARS = 200
"""Characters of a rejected value echoed back in a 422 (bodies can be large)."""

_KNOWN_ROUTES = frozenset({"/v1/price", "/v1/price:batch", "/healthz", "/metrics", "/openapi.json", "/docs"})

_EXAMPLE = {
    "hotel_id": "h042",
    "room_type": "double",
    "stay_date": "2026-12-24",
    "nights": 2,
    "channel": "web",
    "event_time": "2026-11-30T09:15:00Z",
    "last_published_price": 149.0,
}


_DeadlineHeader = Annotated[
    float | None, Header(alias="X-Deadline-Ms", gt=0, le=MAX_DEADLINE_MS, description="time budget of this request, ms")
]
_One = Annotated[PricingRequest, Body(openapi_examples={"web": {"summary": "a web search", "value": _EXAMPLE}})]
_Many = Annotated[
    list[PricingRequest],
    Body(min_length=1, openapi_examples={"two": {"summary": "two stays", "value": [_EXAMPLE] * 2}}),
]


class _Guard:
    """Pure ASGI middleware: body size limit (declared and streamed) and status counting.

    The body (small by construction) is read up front and replayed to the app, so an
    oversized one is refused before any parsing, whatever Content-Length claimed.
    """

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, stats: ScorerMetrics) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.stats = stats

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope.setdefault("state", {})["t0"] = time.perf_counter()
        route = scope["path"] if scope["path"] in _KNOWN_ROUTES else "other"

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.stats.http.labels(route=route, status=str(message["status"])).inc()
            await send(message)

        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body_bytes):
            await _too_large(counted, self.max_body_bytes, declared.decode("latin-1"))
            return
        body = await self._read(receive)
        if body is None:
            await _too_large(counted, self.max_body_bytes, None)
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, counted)

    async def _read(self, receive: Receive) -> bytes | None:
        chunks: list[bytes] = []
        total = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            total += len(chunk)
            if total > self.max_body_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


async def _too_large(send: Send, limit: int, declared: str | None) -> None:
    got = f"Content-Length {declared}" if declared is not None else f"a streamed body over {limit} bytes"
    payload = {
        "error": "payload_too_large",
        "field": "<body>",
        "message": f"request body: got {got}, expected at most {limit} bytes",
        "limit_bytes": limit,
    }
    raw = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": raw})


def _field(loc: tuple[Any, ...] | list[Any]) -> str:
    """``("body", 3, "nights")`` -> ``"[3].nights"``; ``("body", "nights")`` -> ``"nights"``."""
    parts = list(loc[1:] if loc and loc[0] == "body" else loc)
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<body>"


def _describe(error: dict[str, Any]) -> dict[str, Any]:
    """One pydantic/FastAPI error as ``{field, value, expected, message}``."""
    if error.get("type") == "json_invalid":
        position = error["loc"][-1] if error.get("loc") else None
        detail = (error.get("ctx") or {}).get("error", "invalid JSON")
        field, value, expected = "<body>", f"malformed JSON at character {position} ({detail})", "a JSON object"
    else:
        field = _field(tuple(error.get("loc", ())))
        value = jsonable_encoder(error.get("input"), custom_encoder={bytes: lambda b: b.decode("latin-1")})
        if len(repr(value)) > _VALUE_CHARS:
            value = repr(value)[:_VALUE_CHARS] + "..."
        expected = str(error.get("msg", "a valid value")).removeprefix("Value error, ")
    return {"field": field, "value": value, "expected": expected, "message": f"field {field!r}: got {value!r}, "
            f"expected {expected}"}


async def _invalid(request: Request, exc: Exception) -> JSONResponse:
    errors = [_describe(e) for e in exc.errors()] if isinstance(exc, RequestValidationError) else []
    message = errors[0]["message"] if errors else "invalid request"
    return JSONResponse(status_code=422, content={"error": "validation_error", "message": message, "errors": errors})


def _budget(request: Request, header_ms: float | None, default_ms: float | None, config_ms: float) -> float:
    """Milliseconds left of this request's budget (time already spent in the server is charged)."""
    budget = header_ms if header_ms is not None else (default_ms if default_ms is not None else config_ms)
    started = request.scope.get("state", {}).get("t0")
    spent = 0.0 if started is None else (time.perf_counter() - started) * 1000.0
    return max(0.0, budget - spent)


@asynccontextmanager
async def _frozen_gc(app: FastAPI) -> AsyncIterator[None]:
    del app
    gc.collect()
    gc.freeze()
    yield


def create_app(
    scorer: Scorer,
    *,
    max_body_bytes: int = 64_000,
    deadline_ms: float | None = None,
    max_batch: int = 256,
    freeze_gc: bool = True,
) -> FastAPI:
    """Build the pricing API around ``scorer``.

    Args:
        scorer: the routed scorer.
        max_body_bytes: larger bodies get a 413 (checked on Content-Length and on the bytes read).
        deadline_ms: default time budget per request (the scorer's config when ``None``).
        max_batch: most requests accepted by ``/v1/price:batch``.
        freeze_gc: at start-up, move every object alive (modules, models, the Feast registry) out of the
            cyclic garbage collector's reach (``gc.freeze``), so that a full collection never walks them
            (one costs ~150 ms with them on this machine, a stall the p99.9 would show).
    """
    app = FastAPI(
        lifespan=_frozen_gc if freeze_gc else None,
        title="pricestream pricing",
        version="1",
        description="Routed hotel room pricing: rules, a light and a heavy model. Decisions are audited.",
    )
    app.add_exception_handler(RequestValidationError, _invalid)
    config_ms = scorer.config.deadline_ms

    @app.post("/v1/price", response_model=PricingDecision, summary="Price one stay")
    def price(request: Request, body: _One, x_deadline_ms: _DeadlineHeader = None) -> Response:
        # In the thread pool, not inline on the event loop: the feature read is blocking I/O, and a hung Redis
        # (up to redis_timeout_s per read) would stall every request, /healthz and /metrics behind it.
        decision = scorer.price(body, deadline_ms=_budget(request, x_deadline_ms, deadline_ms, config_ms))
        return Response(decision.model_dump_json(), media_type="application/json")

    @app.post(
        "/v1/price:batch",
        response_model=list[PricingDecision],
        summary="Price many stays",
        description=f"At most {max_batch} requests; the answer keeps their order.",
    )
    def price_batch(request: Request, body: _Many, x_deadline_ms: _DeadlineHeader = None) -> Response:
        if len(body) > max_batch:
            error = {"type": "too_long", "loc": ("body",), "input": f"{len(body)} requests",
                     "msg": f"List should have at most {max_batch} items"}
            raise RequestValidationError([error])
        decisions = scorer.price_batch(body, deadline_ms=_budget(request, x_deadline_ms, deadline_ms, config_ms))
        raw = b"[" + b",".join(d.__pydantic_serializer__.to_json(d) for d in decisions) + b"]"
        return Response(raw, media_type="application/json")

    @app.get("/healthz", summary="Liveness and models in force")
    def healthz() -> JSONResponse:
        health = scorer.health()
        return JSONResponse(health, status_code=503 if health["audit_failing"] else 200)

    @app.get("/metrics", summary="Prometheus metrics")
    def metrics() -> Response:
        return Response(scorer.stats.render(), media_type=CONTENT_TYPE_LATEST)

    app.add_middleware(_Guard, max_body_bytes=max_body_bytes, stats=scorer.stats)
    return app
