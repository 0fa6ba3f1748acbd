"""``/healthz`` and ``/metrics``: the probes of a scorer's dependencies, the health report, the ops app.

:func:`create_app` (:mod:`serving.http`) serves them beside the pricing routes; :func:`create_ops_app`
serves them alone, to bind apart from the pricing port. ``serve-stream`` (:mod:`serving.stream`) reports
the same probes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from datetime import date
from typing import Any

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from events.redact import redact, redact_exception
from pricing.errors import FeatureStoreUnavailable
from pricing.feature_source import FeatureSource
from pricing.pricer import Pricer
from serving.openapi import HEALTH_RESPONSES, METRICS_RESPONSES, Health

PROBE_KEY = ("\x00healthz", "\x00", date(2000, 1, 1))
"""Stay key the health probe reads: no real hotel has it (NUL is outside the contract's ``hotel_id``),
so the probe costs one round trip of the very kind a decision makes, and finds nothing."""

Probe = Callable[[], None]
"""A health check: returns when the dependency works, raises when it does not."""


def feature_probe(source: FeatureSource) -> Probe:
    """A probe that reads :data:`PROBE_KEY` from ``source`` (a :class:`~pricing.feature_source.FeatureSource`)."""

    def probe() -> None:
        source.read(*PROBE_KEY)

    return probe


def default_probes(scorer: object) -> dict[str, Probe]:
    """The scorer's feature source, named after its class (``RedisFeatureSource`` -> ``redis``).

    A rollout serves through arms that share the incumbent's source: that one is probed.
    """
    source = getattr(scorer, "feature_source", None)
    if source is None:
        source = getattr(getattr(getattr(scorer, "arms", None), "incumbent", None), "feature_source", None)
    if source is None:
        return {}
    name = type(source).__name__.removesuffix("FeatureSource").lower() or "feature_store"
    return {name: feature_probe(source)}


def health_report(scorer: Pricer, probes: Mapping[str, Probe]) -> tuple[int, dict[str, Any]]:
    """``(status code, body)`` of ``/healthz``: 503 while a probe fails or the audit log cannot be written."""
    health = dict(scorer.health())
    failing: list[str] = []
    if health.get("audit_failing"):
        failing.append("audit: the decision log cannot be written")
    for name, probe in probes.items():
        try:
            probe()
        except FeatureStoreUnavailable as exc:
            failing.append(f"{name}: {redact(str(exc))}")
        except Exception as exc:  # noqa: BLE001 - a probe reports any failure; /healthz itself must answer
            failing.append(f"{name}: {redact_exception(exc)}")
    if failing:
        health.update(status="degraded", reason="; ".join(failing))
        return 503, health
    if health.get("status") != "ok":  # served, but by rules alone: say so, stay in rotation
        health["reason"] = "no light model loaded: rules prices only"
    return 200, health


def finite_json(value: object) -> object:
    """``value`` with non-finite floats as ``None`` (a threshold at infinity must not turn /healthz into a 500)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): finite_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(v) for v in value]
    return value


def add_ops_routes(app: FastAPI, scorer: Pricer, checks: Mapping[str, Probe]) -> None:
    """Add ``/healthz`` (the scorer's health and ``checks``, see :func:`health_report`) and ``/metrics`` to ``app``."""

    @app.get("/healthz", summary="Liveness, dependencies and models in force", response_model=Health,
             responses=HEALTH_RESPONSES)
    def healthz() -> Response:
        status, health = health_report(scorer, checks)
        return Response(json.dumps(finite_json(health), allow_nan=False, default=str), status_code=status,
                        media_type="application/json")

    @app.get("/metrics", summary="Prometheus metrics", response_class=PlainTextResponse, responses=METRICS_RESPONSES)
    def metrics() -> Response:
        return Response(scorer.stats.render(), media_type=CONTENT_TYPE_LATEST)


def create_ops_app(scorer: Pricer, *, probes: Mapping[str, Probe] | None = None) -> FastAPI:
    """``/healthz`` and ``/metrics`` of ``scorer`` alone, to bind apart from the pricing port.

    Example:
        >>> from fastapi.testclient import TestClient
        >>> from pricing.feature_source import MemoryFeatureSource
        >>> from pricing.rules import RuleSet
        >>> from pricing.scorer import Scorer, ScorerConfig
        >>> from routing.router import TieredRouter
        >>> scorer = Scorer(ScorerConfig(), rules=RuleSet.from_yaml("min_price: 50\\nmax_price: 500\\n"),
        ...                 feature_source=MemoryFeatureSource(), light=None, heavy=None, router=TieredRouter())
        >>> ops = TestClient(create_ops_app(scorer))
        >>> ops.get("/healthz").status_code, ops.post("/v1/price", json={}).status_code
        (200, 404)
    """
    app = FastAPI(title="pricestream ops", version="1", docs_url=None, redoc_url=None, openapi_url=None)
    add_ops_routes(app, scorer, default_probes(scorer) if probes is None else dict(probes))
    return app
