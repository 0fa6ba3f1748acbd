"""HTTP pricing service: a FastAPI app around a :class:`~pricing.pricer.Pricer`.

Routes: ``POST /v1/price``, ``POST /v1/price:batch``, ``GET /healthz``,
``GET /metrics`` (Prometheus text) and ``GET /openapi.json``. ``/healthz`` and ``/metrics``
can move to a separate ops app (:func:`serving.health.create_ops_app`, its own port).

Security (:mod:`serving.auth`): with a keys file, ``/v1/`` needs an API key (401 without a
valid one; the file is re-read when it changes); with a rate limit, a client above it gets
429 with ``Retry-After``.

Contract: a valid request always gets a 200 (the scorer degrades instead of
failing). Any other body gets a 4xx, never a 5xx, whose body is strict JSON naming
the field, the value and the expectation (:mod:`serving.body` parses every body):
413 over ``max_body_bytes``, 415 for a content type other than JSON, 422 for bytes that
are not strict JSON or break the request contract. An optional ``X-Deadline-Ms``
header shortens the time budget, counted from the moment the request reached the app.

``/healthz`` answers 503 with ``{"status": "degraded", "reason": "redis: ..."}`` while a
dependency that decisions need fails (the feature store, probed on each call, or the
audit log), and 200 otherwise. Reasons never carry credentials.

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
    >>> r = client.post("/v1/price", content=b'{"hotel_id": "h1", "nights": NaN}',
    ...                 headers={"content-type": "application/json"})
    >>> r.status_code, r.json()["errors"][0]["value"]
    (422, 'NaN')
    >>> client.post("/v1/price", json={**body, "nights": 2}).json()["tier"]
    'rules'
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated

from fastapi import FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from events.models import PricingDecision
from pricing.groups import GroupQuoter
from pricing.metrics import ScorerMetrics
from pricing.pricer import Pricer
from serving.auth import KeyRing, RateLimiter, SecurityGate, refused_counter
from serving.body import from_validation_errors, parse_body
from serving.errors import BadRequest, FieldError, error_json
from serving.groups import GroupAudit, add_group_route
from serving.health import Probe, add_ops_routes, default_probes
from serving.openapi import ERROR_RESPONSES, documented_openapi
from serving.openapi import request_body as spec_request_body

MAX_DEADLINE_MS = 10_000.0
"""Largest ``X-Deadline-Ms`` accepted: longer budgets only hide a stuck dependency."""

_KNOWN_ROUTES = frozenset({"/v1/price", "/v1/price:batch", "/healthz", "/metrics", "/openapi.json", "/docs"})

_DeadlineHeader = Annotated[
    float | None, Header(alias="X-Deadline-Ms", gt=0, le=MAX_DEADLINE_MS, description="time budget of this request, ms")
]


class ServiceConfig(BaseModel):
    """Settings of the HTTP service.

    Attributes:
        max_body_bytes: larger bodies get a 413 (checked on Content-Length and on the bytes read).
            64 kB holds a full batch (256 requests of ~200 bytes) with room to spare.
        max_batch: most requests accepted by ``/v1/price:batch``.
        deadline_ms: default time budget per request (the scorer's config when ``None``).
        freeze_gc: at start-up, move every object alive (modules, models, the Feast registry) out of the
            cyclic garbage collector's reach (``gc.freeze``), so that a full collection never walks them
            (one costs ~150 ms with them on this machine, a stall the p99.9 would show).
        keys_file: API keys file (:class:`~serving.auth.KeyStore`); None: ``/v1/`` needs no key.
        rate_limit: per-client limits (``"100/second;2000/minute"``); None: unlimited.
        ops_routes: serve ``/healthz`` and ``/metrics`` here (False: on :func:`serving.health.create_ops_app`).
        tls_cert: PEM certificate of the pricing port; with ``tls_key`` the server speaks HTTPS only.
        tls_key: its unencrypted PEM private key.
        group_margin: ``/v1/quote:group``'s recommended rate above the displacement minimum (0.1: +10%).
        group_horizon_days: the furthest night a group may ask for, in days from today.
        body_timeout_s: a body not received whole within this many seconds gets a 408 and the
            connection is closed: a slow client cannot hold a worker and a connection open forever.

    Example:
        >>> ServiceConfig().scheme, ServiceConfig(tls_cert=Path("c.pem"), tls_key=Path("k.pem")).scheme
        ('http', 'https')
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_body_bytes: int = Field(default=64_000, gt=0)
    max_batch: int = Field(default=256, ge=1)
    deadline_ms: float | None = Field(default=None, gt=0, le=MAX_DEADLINE_MS)
    freeze_gc: bool = True
    keys_file: Path | None = None
    rate_limit: str | None = None
    ops_routes: bool = True
    tls_cert: Path | None = None
    tls_key: Path | None = None
    body_timeout_s: float = Field(default=10.0, gt=0, le=3600)
    group_margin: float = Field(default=0.1, ge=0.0, le=10.0)
    group_horizon_days: int = Field(default=450, ge=1, le=3650)

    @model_validator(mode="after")
    def _tls_pair(self) -> ServiceConfig:
        if (self.tls_cert is None) != (self.tls_key is None):
            msg = (f"tls_key: got {self.tls_key}, expected the private key of tls_cert {self.tls_cert} "
                   "(PRICESTREAM_HTTP_TLS_KEY), or neither")
            if self.tls_cert is None:
                msg = (f"tls_cert: got None, expected the certificate of tls_key {self.tls_key} "
                       "(PRICESTREAM_HTTP_TLS_CERT), or neither")
            raise ValueError(msg)
        return self

    @property
    def scheme(self) -> str:
        """``https`` with a certificate, else ``http``."""
        return "http" if self.tls_cert is None else "https"


class _Guard:
    """Pure ASGI middleware: body size limit (declared and streamed) and status counting.

    The body (small by construction) is read up front and replayed to the app, so an
    oversized one is refused before any parsing, whatever Content-Length claimed.
    """

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, stats: ScorerMetrics,
                 body_timeout_s: float = 10.0) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.stats = stats
        self.body_timeout_s = body_timeout_s

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
        try:
            body = await asyncio.wait_for(self._read(receive), self.body_timeout_s)
        except TimeoutError:
            await _timed_out(counted, self.body_timeout_s)
            return
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


async def _timed_out(send: Send, timeout_s: float) -> None:
    refused = BadRequest(408, "request_timeout",
                         [FieldError("<body>", f"not received whole within {timeout_s:g} s",
                                     f"the whole body within {timeout_s:g} s")])
    raw = error_json(refused)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode()),
               (b"connection", b"close")]
    await send({"type": "http.response.start", "status": 408, "headers": headers})
    await send({"type": "http.response.body", "body": raw})


async def _too_large(send: Send, limit: int, declared: str | None) -> None:
    got = f"Content-Length {declared[:40]}" if declared is not None else f"a streamed body over {limit} bytes"
    refused = BadRequest(413, "payload_too_large", [FieldError("<body>", got, f"at most {limit} bytes")])
    raw = error_json(refused, limit_bytes=limit)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": raw})


async def _refused(request: Request, exc: Exception) -> Response:
    del request
    if isinstance(exc, RequestValidationError):
        exc = from_validation_errors(exc.errors())
    if not isinstance(exc, BadRequest):  # registered for these two types only
        raise exc
    return Response(error_json(exc), status_code=exc.status, media_type="application/json")


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


DOCS_ASSETS = "/docs/assets"
"""Where Swagger UI's scripts and styles are served from, out of the ``swagger_ui_bundle`` package."""


def _add_docs(app: FastAPI) -> None:
    """``/docs`` with Swagger UI's assets served by this process: the page works with no internet."""
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.staticfiles import StaticFiles
    from swagger_ui_bundle import swagger_ui_path

    app.mount(DOCS_ASSETS, StaticFiles(directory=str(swagger_ui_path)), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> Response:
        return get_swagger_ui_html(openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} - API",
                                   swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
                                   swagger_favicon_url=f"{DOCS_ASSETS}/favicon-32x32.png")


def create_app(
    scorer: Pricer,
    config: ServiceConfig | None = None,
    *,
    probes: Mapping[str, Probe] | None = None,
    groups: GroupQuoter | None = None,
    group_audit: GroupAudit | None = None,
) -> FastAPI:
    """Build the pricing API around ``scorer``.

    Args:
        scorer: the routed scorer (or anything with its surface: a rollout).
        config: the service settings (:class:`ServiceConfig` defaults when ``None``).
        probes: ``/healthz`` checks by name (:func:`default_probes` of ``scorer`` when ``None``).
        groups: serves ``POST /v1/quote:group`` with it (:mod:`serving.groups`); ``None``: not served.
        group_audit: writes each group quote to the audit log.
    """
    config = config or ServiceConfig()
    checks = default_probes(scorer) if probes is None else dict(probes)
    app = FastAPI(
        lifespan=_frozen_gc if config.freeze_gc else None,
        title="pricestream pricing",
        version="1",
        description="Routed hotel room pricing: rules, a light and a heavy model. Decisions are audited.",
        docs_url=None,
        redoc_url=None,
    )
    _add_docs(app)
    app.add_exception_handler(RequestValidationError, _refused)
    app.add_exception_handler(BadRequest, _refused)
    _add_price_routes(app, scorer, config)
    if groups is not None:
        add_group_route(app, groups, audit=group_audit, horizon_days=config.group_horizon_days)
    if config.ops_routes:
        add_ops_routes(app, scorer, checks)
    keys = KeyRing(config.keys_file) if config.keys_file is not None else None
    limiter = RateLimiter(config.rate_limit) if config.rate_limit else None
    if keys is not None or limiter is not None:
        app.add_middleware(SecurityGate, keys=keys, limiter=limiter, refused=refused_counter(scorer.stats.registry))
    app.add_middleware(_Guard, max_body_bytes=config.max_body_bytes, stats=scorer.stats,
                       body_timeout_s=config.body_timeout_s)
    app.openapi = documented_openapi(app)  # type: ignore[method-assign]
    return app


def _add_price_routes(app: FastAPI, scorer: Pricer, config: ServiceConfig) -> None:
    """``POST /v1/price`` and ``POST /v1/price:batch``: the strict body parser, then the pricer in a thread."""
    config_ms = scorer.config.deadline_ms
    max_batch = config.max_batch

    @app.post("/v1/price", response_model=PricingDecision, summary="Price one stay", responses=ERROR_RESPONSES,
              openapi_extra=spec_request_body(batch=False, max_batch=max_batch))
    async def price(request: Request, x_deadline_ms: _DeadlineHeader = None) -> Response:
        body = parse_body(await request.body(), content_type=request.headers.get("content-type"))
        # In the thread pool, not inline on the event loop: the feature read is blocking I/O, and a hung Redis
        # (up to redis_timeout_s per read) would stall every request, /healthz and /metrics behind it.
        budget = _budget(request, x_deadline_ms, config.deadline_ms, config_ms)
        decision = await run_in_threadpool(scorer.price, body, deadline_ms=budget)
        return Response(decision.model_dump_json(), media_type="application/json")

    @app.post(
        "/v1/price:batch",
        response_model=list[PricingDecision],
        summary="Price many stays",
        description=f"At most {max_batch} requests; the answer keeps their order.",
        responses=ERROR_RESPONSES,
        openapi_extra=spec_request_body(batch=True, max_batch=max_batch),
    )
    async def price_batch(request: Request, x_deadline_ms: _DeadlineHeader = None) -> Response:
        body = parse_body(await request.body(), content_type=request.headers.get("content-type"), batch=True,
                          max_batch=max_batch)
        budget = _budget(request, x_deadline_ms, config.deadline_ms, config_ms)
        decisions = await run_in_threadpool(scorer.price_batch, body, deadline_ms=budget)
        raw = b"[" + b",".join(d.__pydantic_serializer__.to_json(d) for d in decisions) + b"]"
        return Response(raw, media_type="application/json")
