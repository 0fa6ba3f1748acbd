"""The heavy tier as its own service, and the scorer's client of it.

A heavy model that needs its own hardware scales apart from the scorers: ``pricestream heavy
serve`` runs :func:`create_heavy_app` around the registry's heavy pricer, and a scorer whose
settings say ``heavy_tier=remote`` gets a :class:`RemoteHeavyPricer` in the heavy slot. The
client has the :class:`~pricing.tiers.TierPricer` surface, so the scorer's routing, health and
fallback are the same as in process: a quote that misses ``deadline_ms`` (a slow, frozen or
stopped service) raises :class:`HeavyServiceError`, and the scorer keeps the light model's
price, with the decision flagged ``degraded`` and its reason naming the miss.

Routes of the service: ``POST /v1/quote`` (body :class:`QuoteBody`; answers a :class:`Quote`
as JSON, 422 naming the field, value and expectation for a bad body, 503 without a model),
``GET /healthz`` (200 with the model's version, 503 without one), ``GET /metrics``.

Example:
    >>> from datetime import date, datetime, timezone
    >>> from fastapi.testclient import TestClient
    >>> from events.models import PricingRequest
    >>> class Flat:  # a stand-in pricer: the service's contract, not a model's quality, is shown here
    ...     name, version = "demand-heavy", "heavy-v1"
    ...     def quote(self, request, features, *, floor, ceiling, rule_price=None):
    ...         return Quote(price=min(ceiling, 120.0), expected_revenue=60.0, booking_prob=0.5,
    ...                      uncertainty=0.1, candidates=((120.0, 0.5),), model_name=self.name,
    ...                      model_version=self.version)
    >>> client = TestClient(create_heavy_app(lambda: Flat()))
    >>> req = PricingRequest(hotel_id="h1", room_type="std", stay_date=date(2026, 12, 24),
    ...                      event_time=datetime(2026, 12, 1, tzinfo=timezone.utc))
    >>> body = QuoteBody(request=req, features={}, floor=50.0, ceiling=100.0).model_dump(mode="json")
    >>> r = client.post("/v1/quote", json=body)
    >>> r.status_code, quote_from_json(r.json()).price
    (200, 100.0)
    >>> bad = client.post("/v1/quote", json={**body, "floor": "cheap"})
    >>> bad.status_code, bad.json()["errors"][0]["field"]
    (422, 'floor')
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from pydantic import BaseModel, ConfigDict, Field

from events.models import PricingRequest
from pricing.bid_price import DemandForecast
from pricing.errors import PricingError
from pricing.scorer import ModelSource
from pricing.tiers import Quote, TierPricer
from serving.body import from_validation_errors
from serving.errors import BadRequest, FieldError, error_json

PricerSource = Callable[[], TierPricer | None]
"""The heavy pricer in force (``None`` while none is loaded); called per request, so a reload shows at once."""


class HeavyServiceError(PricingError):
    """The heavy service did not answer a quote in time, or answered something else than a quote."""


class QuoteBody(BaseModel):
    """What the scorer sends: the request, its features and the rules' bounds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    request: PricingRequest
    features: dict[str, float | None]
    floor: float = Field(gt=0, allow_inf_nan=False)
    ceiling: float = Field(gt=0, allow_inf_nan=False)
    rule_price: float | None = Field(default=None, gt=0, allow_inf_nan=False)


def quote_to_json(quote: Quote) -> dict[str, Any]:
    """A quote as JSON-safe values (the forecast as a mapping)."""
    return {"price": quote.price, "expected_revenue": quote.expected_revenue, "booking_prob": quote.booking_prob,
            "uncertainty": quote.uncertainty, "candidates": [list(c) for c in quote.candidates],
            "model_name": quote.model_name, "model_version": quote.model_version, "fallback": quote.fallback,
            "bid_price": quote.bid_price, "forecast": None if quote.forecast is None else quote.forecast._asdict(),
            "propensity": quote.propensity}


def quote_from_json(body: Mapping[str, Any]) -> Quote:
    """The :class:`Quote` of :func:`quote_to_json`.

    Raises:
        HeavyServiceError: a field is missing or of the wrong type.
    """
    try:
        forecast = body.get("forecast")
        return Quote(price=float(body["price"]), expected_revenue=float(body["expected_revenue"]),
                     booking_prob=None if body["booking_prob"] is None else float(body["booking_prob"]),
                     uncertainty=float(body["uncertainty"]),
                     candidates=tuple((float(p), float(b)) for p, b in body["candidates"]),
                     model_name=str(body["model_name"]), model_version=str(body["model_version"]),
                     fallback=bool(body.get("fallback", False)), bid_price=body.get("bid_price"),
                     forecast=None if forecast is None else DemandForecast(**forecast),
                     propensity=float(body.get("propensity", 1.0)))
    except (KeyError, TypeError, ValueError) as exc:
        msg = f"heavy service answer: field {exc!s} missing or malformed, expected a quote"
        raise HeavyServiceError(msg) from exc


class _Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.quotes = Counter("pricestream_heavy_quotes_total", "Heavy quotes by outcome.", ["outcome"],
                              registry=registry)
        self.latency = Histogram("pricestream_heavy_quote_seconds", "Time to quote one request.", registry=registry,
                                 buckets=(0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0))


def create_heavy_app(source: PricerSource, *, registry: CollectorRegistry | None = None) -> FastAPI:
    """The heavy tier's HTTP service around ``source`` (see the module docstring)."""
    metrics = _Metrics(registry or CollectorRegistry())
    app = FastAPI(title="pricestream heavy tier", version="1", docs_url=None, redoc_url=None)

    async def refused(request: Request, exc: Exception) -> Response:
        del request
        bad = from_validation_errors(exc.errors()) if isinstance(exc, RequestValidationError) else exc
        if not isinstance(bad, BadRequest):
            raise exc
        metrics.quotes.labels(outcome="refused").inc()
        return Response(error_json(bad), status_code=bad.status, media_type="application/json")

    app.add_exception_handler(RequestValidationError, refused)

    @app.post("/v1/quote")
    def quote(body: QuoteBody) -> Response:
        pricer = source()
        if pricer is None:
            metrics.quotes.labels(outcome="no_model").inc()
            return _unavailable("no heavy model loaded")
        if body.floor > body.ceiling:
            bad = BadRequest(422, "validation_error", [FieldError("floor", body.floor, f"<= ceiling {body.ceiling}")])
            return Response(error_json(bad), status_code=422, media_type="application/json")
        started = time.perf_counter()
        answer = pricer.quote(body.request, body.features, floor=body.floor, ceiling=body.ceiling,
                              rule_price=body.rule_price)
        metrics.latency.observe(time.perf_counter() - started)
        metrics.quotes.labels(outcome="quoted").inc()
        return Response(_json(quote_to_json(answer)), media_type="application/json")

    @app.get("/healthz")
    def healthz() -> Response:
        pricer = source()
        if pricer is None:
            return _unavailable("no heavy model loaded")
        return Response(_json({"status": "ok", "name": pricer.name, "version": pricer.version}),
                        media_type="application/json")

    @app.get("/metrics")
    def metrics_route() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app


def _json(value: object) -> bytes:
    import json

    return json.dumps(value, allow_nan=False).encode()


def _unavailable(reason: str) -> Response:
    return Response(_json({"status": "unavailable", "reason": reason}), status_code=503,
                    media_type="application/json")


class RemoteHeavyPricer:
    """The heavy slot of a scorer, answered by the heavy service at ``url`` within ``deadline_ms``.

    Args:
        url: the service's base URL (``http://heavy:8100``).
        version: the registry's heavy version this client stands for (the service answers with its own).
        deadline_ms: longest wait for one quote, connection included.
        name: the model name shown before the first answer.
    """

    def __init__(self, url: str, *, version: str, deadline_ms: float, name: str = "demand-heavy") -> None:
        self.url = url.rstrip("/")
        self.deadline_ms = deadline_ms
        self.name = name
        self.version = version
        self._client = httpx.Client(base_url=self.url, timeout=deadline_ms / 1000.0)

    def quote(
        self,
        request: PricingRequest,
        features: Mapping[str, float | None],
        *,
        floor: float,
        ceiling: float,
        rule_price: float | None = None,
    ) -> Quote:
        """The service's quote.

        Raises:
            HeavyServiceError: no answer within ``deadline_ms`` (slow or stopped), or not a 200 quote.
        """
        body = QuoteBody(request=request, features=dict(features), floor=floor, ceiling=ceiling,
                         rule_price=rule_price)
        try:
            r = self._client.post("/v1/quote", content=body.model_dump_json(),
                                  headers={"content-type": "application/json"})
        except httpx.TimeoutException as exc:
            msg = f"heavy service {self.url} missed its {self.deadline_ms:g} ms deadline"
            raise HeavyServiceError(msg) from exc
        except httpx.TransportError as exc:
            msg = f"heavy service {self.url} unreachable ({type(exc).__name__})"
            raise HeavyServiceError(msg) from exc
        if r.status_code != 200:
            msg = f"heavy service {self.url} answered {r.status_code}: {r.text[:200]}"
            raise HeavyServiceError(msg)
        return quote_from_json(r.json())

    def close(self) -> None:
        self._client.close()


class HeavySlot:
    """The service's heavy pricer, following a :class:`~pricing.scorer.ModelSource` (registry or control plane).

    Calling the slot returns the pricer in force (a :data:`PricerSource`); :meth:`refresh` loads the
    source's current heavy version when its generation moved.

    Args:
        models: the registry directory, or the control plane's state.
        loader: bundle directory -> pricer.
    """

    def __init__(self, models: ModelSource, *, loader: Callable[[Path], TierPricer]) -> None:
        self.models = models
        self.loader = loader
        self.pricer: TierPricer | None = None
        self._generation: int | None = None

    def __call__(self) -> TierPricer | None:
        return self.pricer

    def refresh(self) -> bool:
        """Load the current heavy version if the source moved; True when the pricer changed."""
        generation = int(self.models.generation)
        if generation == self._generation:
            return False
        entry = self.models.current("heavy")
        changed = entry is not None and (self.pricer is None or str(self.pricer.version) != str(entry.version))
        if changed and entry is not None:
            self.pricer = self.loader(entry.path)
        self._generation = generation
        return changed
