"""The seams of the scorer and what leaves it with a decision: its audit :class:`Trail` and sinks.

Split from :mod:`pricing.scorer` (which re-exports every name here) so that a component that records
decisions or hands out models (the audit log, the model registry, progressive delivery) is typed
against these :class:`~typing.Protocol` s without the scorer itself.

Example:
    >>> from datetime import date, datetime, timezone
    >>> from events.models import PricingDecision
    >>> from pricing.metrics import ScorerMetrics
    >>> req = PricingRequest(hotel_id="h1", room_type="std", stay_date=date(2026, 12, 24),
    ...                      event_time=datetime(2026, 12, 1, tzinfo=timezone.utc))
    >>> seen = []
    >>> d = PricingDecision(hotel_id="h1", room_type="std", stay_date=date(2026, 12, 24), request_id=req.request_id,
    ...                     price=100.0, tier="rules", complexity=0.0, latency_ms=1.0)
    >>> record_decision(req, d, Trail({}), audit=None, on_decision=lambda r, x: seen.append(x.price),
    ...                 stats=ScorerMetrics()), seen
    (None, [100.0])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from events.models import PricingDecision, PricingRequest
from pricing.metrics import ScorerMetrics

DecisionCallback = Callable[[PricingRequest, PricingDecision], None]
"""``on_decision(request, decision)``: e.g. publish the decision to ``pricing.decisions``."""


class DecisionSink(Protocol):
    """Where the audit trail of decisions goes (:class:`audit.log.AuditLog`).

    ``append`` may raise anything (a closed log, a full disk): :func:`record_decision` counts it
    and the price still goes back to the caller.
    """

    def append(
        self,
        *,
        request: PricingRequest,
        features: Mapping[str, float | None],
        decision: PricingDecision,
        models: Sequence[tuple[str, str | None]] = (),
        candidates: Sequence[tuple[float, float]] = (),
        feature_versions: Mapping[str, Any] | None = None,
    ) -> str: ...


class ModelEntry(Protocol):
    """One promoted model version of a :class:`ModelSource`."""

    @property
    def version(self) -> str: ...

    @property
    def path(self) -> Path: ...


@runtime_checkable
class Enveloped(Protocol):
    """A pricer that knows its training envelope: the share of a request's features outside it."""

    def ood_distance(self, request: PricingRequest, features: Mapping[str, float | None]) -> float: ...


class ModelSource(Protocol):
    """The promoted models (:class:`feedback.registry.ModelRegistry`); ``generation`` moves on every change."""

    @property
    def generation(self) -> int: ...

    def current(self, tier: str) -> ModelEntry | None: ...


@dataclass(frozen=True, slots=True)
class Trail:
    """What the audit trail records of a decision besides the decision itself.

    Attributes:
        features: the features the decision saw (hashed with the request).
        models: (name, version) of every model consulted, in order.
        candidates: (price, booking probability) pairs the optimiser compared.
        feature_label: label of the feature set (``features.v1``).
    """

    features: Mapping[str, float | None]
    models: tuple[tuple[str, str | None], ...] = ()
    candidates: tuple[tuple[float, float], ...] = ()
    feature_label: str = "features.v1"


def record_decision(
    request: PricingRequest,
    decision: PricingDecision,
    trail: Trail,
    *,
    audit: DecisionSink | None,
    on_decision: DecisionCallback | None,
    stats: ScorerMetrics,
) -> bool | None:
    """Audit, then publish one decision; never raises. Returns whether the audit took it (None: no audit)."""
    ok = None
    if audit is not None:
        try:
            audit.append(
                request=request,
                features=trail.features,
                decision=decision,
                models=trail.models,
                candidates=trail.candidates,
                feature_versions={"label": trail.feature_label, "version": decision.feature_version},
            )
            ok = True
        except Exception:  # noqa: BLE001 - a sink's failure (closed, disk full) must not take the price back
            ok = False
            stats.errors.labels(stage="audit").inc()
    if on_decision is not None:
        try:
            on_decision(request, decision)
        except Exception:  # noqa: BLE001 - a consumer's failure must not take the price back
            stats.errors.labels(stage="on_decision").inc()
    return ok
