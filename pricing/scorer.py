"""The routed scorer: features, then rules, then the router picks rules, the light or the heavy model.

Flow of one request (:meth:`Scorer.price`):

1. read the online features (timed); a store failure degrades to the rules price;
2. ``rules.evaluate``: a rule that decides outright is final, never overridden;
3. complexity of the request (``routing.complexity``) -> router: ``rules`` answers
   with the rules price, otherwise the light model quotes; when the score including
   the light model's uncertainty is above the heavy threshold, the heavy model quotes;
4. the price is clamped to the rules' bounds, the decision is counted, audited and
   handed to ``on_decision``.

Seams (typed :class:`~typing.Protocol` s, so a reader and mypy see what plugs in where):
:class:`DecisionSink` takes the audit trail (:class:`audit.log.AuditLog`),
:class:`ModelSource` hands out the promoted models (:class:`feedback.registry.ModelRegistry`),
and ``on_decision`` (a :data:`DecisionCallback`) publishes each decision. A caller that decides
what to record itself (progressive delivery stamps the arm first) prices with
:meth:`Scorer.price_traced` and records with :func:`record_decision`.

Whatever fails around a decision (store down, a model raising or answering a
non-finite price, a nearly spent deadline) yields a rules-only (or light-only)
decision with ``degraded=True`` and the reason; a valid request never raises.

Example:
    >>> from datetime import date, datetime, timezone
    >>> from pricing.rules import RuleSet
    >>> from routing.router import TieredRouter
    >>> rules = RuleSet.from_yaml("min_price: 50\\nmax_price: 500\\ndefault_base_rate: 100\\n")
    >>> scorer = Scorer(ScorerConfig(), rules=rules, feature_source=MemoryFeatureSource(),
    ...                 light=None, heavy=None, router=TieredRouter())
    >>> req = PricingRequest(hotel_id="h1", room_type="std", stay_date=date(2026, 12, 24),
    ...                      event_time=datetime(2026, 12, 1, tzinfo=timezone.utc))
    >>> d = scorer.price(req)
    >>> d.price, d.tier, d.degraded_reason
    (100.0, 'rules', 'no_light_model')
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from events.models import PricingDecision, PricingRequest
from pricing import degraded as dg
from pricing.decision_assembly import PathResult, decision_of, model_id, trail_of
from pricing.degraded import Deadline, Degradation, missing_features, sanitize_features
from pricing.feature_source import FeatureRead, FeatureSource, MemoryFeatureSource, safe_read, safe_read_many
from pricing.input_guard import InputGuard
from pricing.metrics import ScorerMetrics
from pricing.rules import RuleOutcome, RuleSet
from pricing.scorer_config import ScorerConfig as ScorerConfig
from pricing.scorer_seams import DecisionCallback as DecisionCallback
from pricing.scorer_seams import DecisionSink as DecisionSink
from pricing.scorer_seams import Enveloped as Enveloped
from pricing.scorer_seams import ModelEntry as ModelEntry
from pricing.scorer_seams import ModelSource as ModelSource
from pricing.scorer_seams import Trail as Trail
from pricing.scorer_seams import record_decision as record_decision
from pricing.vectorize import BASE_RATE
from routing.complexity import OOD_HALF, TrainingStats, complexity_score, inputs_from
from routing.router import TieredRouter

if TYPE_CHECKING:
    from pricing.tiers import Quote, TierPricer

__all__ = [
    "DecisionCallback",
    "DecisionSink",
    "FeatureRead",
    "FeatureSource",
    "MemoryFeatureSource",
    "ModelEntry",
    "ModelSource",
    "Scorer",
    "ScorerConfig",
    "Trail",
    "record_decision",
]

SEEN_CAP = 1_000
"""Per-hotel request counts stop growing here: the cold-start test only needs "at least 30"."""


@dataclass(frozen=True, slots=True)
class _Models:
    light: TierPricer | None
    heavy: TierPricer | None


class Scorer:
    """Prices requests through rules, the light and the heavy model; never raises for a valid request.

    Args:
        config: scorer settings.
        rules: the :class:`~pricing.rules.RuleSet`.
        feature_source: the online features (:class:`FeatureSource`).
        light: the light :class:`~pricing.tiers.TierPricer`, or ``None`` (rules only).
        heavy: the heavy pricer, or ``None`` (the light quote stands).
        router: a :class:`~routing.router.TieredRouter`.
        stats: metrics (a fresh :class:`~pricing.metrics.ScorerMetrics` when ``None``).
        audit: a :class:`DecisionSink` such as :class:`~audit.log.AuditLog` (or ``None``).
        on_decision: called with (request, decision) after every decision, e.g. to publish it.
        training_stats: the light model's training statistics for the out-of-distribution signal;
            when ``None``, the light pricer's ``ood_distance`` (share outside its training envelope).
    """

    def __init__(
        self,
        config: ScorerConfig,
        *,
        rules: RuleSet,
        feature_source: FeatureSource,
        light: TierPricer | None,
        heavy: TierPricer | None,
        router: TieredRouter,
        stats: ScorerMetrics | None = None,
        audit: DecisionSink | None = None,
        on_decision: DecisionCallback | None = None,
        training_stats: TrainingStats | None = None,
    ) -> None:
        self.config = config
        self.rules = rules
        self.feature_source = feature_source
        self.router = router
        self.stats = ScorerMetrics() if stats is None else stats
        self.audit = audit
        self.on_decision = on_decision
        self._training_stats = training_stats
        self._models = _Models(light, heavy)
        self._swap_lock = threading.Lock()
        self._seen: dict[str, int] = {}
        self._generation: int | None = None
        self.audit_failing = False
        self._guard = None if config.input_guard is None else InputGuard(config.input_guard)

    # -- models ---------------------------------------------------------------------------
    @property
    def light(self) -> TierPricer | None:
        """The light pricer in force."""
        return self._models.light

    @property
    def heavy(self) -> TierPricer | None:
        """The heavy pricer in force."""
        return self._models.heavy

    def swap_models(self, *, light: TierPricer | None = None, heavy: TierPricer | None = None) -> None:
        """Atomically replace the light and/or heavy pricer (``None`` keeps the current one).

        In-flight decisions finish with the pricers they started with.
        """
        with self._swap_lock:
            current = self._models
            self._models = _Models(current.light if light is None else light, current.heavy if heavy is None else heavy)
        for tier, model in (("light", light), ("heavy", heavy)):
            if model is not None:
                self.stats.reloads.labels(tier=tier).inc()

    def reload_from(self, registry: ModelSource, *, loader: Callable[[Path], Any] | None = None) -> bool:
        """Hot-swap to the registry's current models when its ``generation`` moved; True if swapped.

        Args:
            registry: a :class:`ModelSource` such as :class:`feedback.registry.ModelRegistry`.
            loader: bundle dir -> pricer (``pricing.tiers.load_pricer`` when ``None``).
        """
        generation = int(registry.generation)
        if generation == self._generation:
            return False
        if loader is None:
            from pricing.tiers import load_pricer  # deferred: onnxruntime loads only when reloading

            loader = load_pricer
        fresh: dict[str, Any] = {}
        for tier in ("light", "heavy"):
            entry = registry.current(tier)
            model = getattr(self._models, tier)
            if entry is not None and (model is None or str(getattr(model, "version", "")) != str(entry.version)):
                fresh[tier] = loader(entry.path)
        if fresh:
            self.swap_models(**fresh)
        self._generation = generation
        return bool(fresh)

    # -- pricing ----------------------------------------------------------------------------
    def price(self, request: PricingRequest, *, deadline_ms: float | None = None) -> PricingDecision:
        """Price one request (see the module docstring for the flow), audit and publish it."""
        decision, trail = self.price_traced(request, deadline_ms=deadline_ms)
        self.record(request, decision, trail)
        return decision

    def price_batch(
        self, requests: Sequence[PricingRequest], *, deadline_ms: float | None = None
    ) -> list[PricingDecision]:
        """Price many requests with one batched feature read; each request gets its own deadline."""
        traced = self.price_batch_traced(requests, deadline_ms=deadline_ms)
        for request, (decision, trail) in zip(requests, traced, strict=True):
            self.record(request, decision, trail)
        return [decision for decision, _ in traced]

    def price_traced(
        self, request: PricingRequest, *, deadline_ms: float | None = None
    ) -> tuple[PricingDecision, Trail]:
        """Price one request without recording it: the decision and its audit :class:`Trail`."""
        deadline = Deadline(self.config.deadline_ms if deadline_ms is None else deadline_ms)
        read, problem = self._read(request)
        return self._decide(request, read, problem, deadline)

    def price_batch_traced(
        self, requests: Sequence[PricingRequest], *, deadline_ms: float | None = None
    ) -> list[tuple[PricingDecision, Trail]]:
        """:meth:`price_traced` for many requests, with one batched feature read."""
        budget = self.config.deadline_ms if deadline_ms is None else deadline_ms
        started = time.perf_counter()
        reads = self._read_many(requests)
        share = (time.perf_counter() - started) / max(1, len(requests))
        traced = []
        for request, (read, problem) in zip(requests, reads, strict=True):
            deadline = Deadline(budget, start=time.perf_counter() - share)
            traced.append(self._decide(request, read, problem, deadline))
        return traced

    def record(self, request: PricingRequest, decision: PricingDecision, trail: Trail) -> None:
        """Audit and publish a decision through this scorer's sinks (never raises)."""
        ok = record_decision(request, decision, trail, audit=self.audit, on_decision=self.on_decision,
                             stats=self.stats)
        if ok is not None:
            self.audit_failing = not ok

    def health(self) -> dict[str, Any]:
        """Models in force, registry generation, audit state and router thresholds."""
        models = self._models
        thresholds = getattr(self.router, "thresholds", None)
        return {
            "status": "degraded" if self.audit_failing or models.light is None else "ok",
            "light": _describe(models.light),
            "heavy": _describe(models.heavy),
            "generation": self._generation,
            "audit_failing": self.audit_failing,
            "thresholds": thresholds.model_dump() if isinstance(thresholds, BaseModel) else None,
        }

    # -- internals ------------------------------------------------------------------------------
    def _read(self, request: PricingRequest) -> tuple[FeatureRead, Degradation | None]:
        return safe_read(self.feature_source, request, observe=self.stats.feature_read.observe)

    def _read_many(self, requests: Sequence[PricingRequest]) -> list[tuple[FeatureRead, Degradation | None]]:
        return safe_read_many(self.feature_source, requests, observe=self.stats.feature_read.observe)

    def _decide(
        self, request: PricingRequest, read: FeatureRead, problem: Degradation | None, deadline: Deadline
    ) -> tuple[PricingDecision, Trail]:
        models = self._models  # one snapshot: a concurrent swap cannot mix old and new pricers
        features = missing_features() if problem else sanitize_features(read.values)
        outcome: RuleOutcome = self.rules.evaluate(request, features)
        features[BASE_RATE] = outcome.base_rate  # the models price relative to it; decisions record it
        result = self._path(request, read, problem, features, outcome, deadline, models)
        decision = decision_of(request, read, result, outcome, features, config=self.config, deadline=deadline)
        code = None if result.degradation is None else result.degradation.code
        self.stats.decision(result.tier, degraded_reason=code, latency_s=decision.latency_ms / 1000.0)
        return decision, trail_of(features, result, self.config.feature_version)

    def _path(
        self,
        request: PricingRequest,
        read: FeatureRead,
        problem: Degradation | None,
        features: dict[str, float | None],
        outcome: RuleOutcome,
        deadline: Deadline,
        models: _Models,
    ) -> PathResult:
        """The rules' decided price, else the rules price for the first reason not to trust a model
        (features unreadable, room type unknown, features stale, input suspect), else the routed path."""
        if outcome.decided_price is not None:
            return PathResult(outcome.decided_price, "rules", degradation=problem)
        reason = problem if problem is not None else dg.unknown_room(request, self.config.room_types)
        if reason is None:
            reason = dg.stale_features(request, read.event_time, self.config.stale_after_s)
        if reason is None:
            reason = self._suspect(request, features, models)  # ML01: no model for it
        if reason is not None:
            return PathResult(outcome.rule_price, "rules", degradation=reason)
        return self._routed(request, features, read, outcome, deadline, models)

    def _suspect(self, request: PricingRequest, features: Mapping[str, float | None],
                 models: _Models) -> Degradation | None:
        """The input guard's verdict against the light model's trained range (None: guard off or clean).

        The range is every value the model was trained on (``trained_range``); a bundle written before it
        was recorded gives its 1st-99th percentile ``envelope`` instead.
        """
        if self._guard is None:
            return None
        meta = getattr(models.light, "meta", None)
        if not isinstance(meta, dict):
            return self._guard.check(request, features, None)
        return self._guard.check(request, features, meta.get("trained_range") or meta.get("envelope"))

    def _routed(
        self,
        request: PricingRequest,
        features: dict[str, float | None],
        read: FeatureRead,
        outcome: RuleOutcome,
        deadline: Deadline,
        models: _Models,
    ) -> PathResult:
        inputs = inputs_from(
            request,
            features,
            feature_time=read.event_time,
            stats=self._training_stats,
            hotel_seen=self._count(request, features),
        )
        if self._training_stats is None and isinstance(models.light, Enveloped):
            inputs = replace(inputs, ood_distance=self._envelope_distance(models.light, request, features))
        score = complexity_score(inputs)
        if self.router.route(score) == "rules":
            self.router.learn_one(score)
            return PathResult(outcome.rule_price, "rules", score)
        light = self._quote(models.light, "light", request, features, outcome, deadline)
        if isinstance(light, Degradation):
            self.router.learn_one(score)
            return PathResult(outcome.rule_price, "rules", score, degradation=light)
        score = complexity_score(replace(inputs, light_uncertainty=dg.unit_or_nan(light.uncertainty)))
        self.router.learn_one(score)
        result = PathResult(light.price, "light", score, light, consulted=[model_id(light)])
        if self.router.route(score) != "heavy" or models.heavy is None:
            return result
        heavy = self._quote(models.heavy, "heavy", request, features, outcome, deadline)
        if isinstance(heavy, Degradation):
            result.degradation = heavy
            return result
        result.consulted.append(model_id(heavy))
        result.price, result.tier, result.quote = heavy.price, "heavy", heavy
        return result

    def _quote(
        self,
        pricer: TierPricer | None,
        tier: str,
        request: PricingRequest,
        features: Mapping[str, float | None],
        outcome: RuleOutcome,
        deadline: Deadline,
    ) -> Quote | Degradation:
        """A quote from ``pricer``, or the :class:`Degradation` that stopped it."""
        if pricer is None:
            return Degradation(dg.NO_LIGHT_MODEL)
        if deadline.remaining_fraction() < self.config.degrade_on_deadline_fraction:
            code = dg.DEADLINE if tier == "light" else dg.HEAVY_DEADLINE
            return Degradation(code, f"{deadline.elapsed_ms():.1f} ms spent before the {tier} model")
        try:
            quote = pricer.quote(
                request, features, floor=outcome.floor, ceiling=outcome.ceiling, rule_price=outcome.rule_price
            )
        except Exception as exc:  # noqa: BLE001 - any model failure falls back, it never reaches the caller
            code = dg.LIGHT_MODEL_ERROR if tier == "light" else dg.HEAVY_MODEL_ERROR
            return Degradation.from_exception(code, exc)
        problem = dg.quote_problem(quote)
        if problem is not None:
            return Degradation(dg.LIGHT_BAD_QUOTE if tier == "light" else dg.HEAVY_BAD_QUOTE, problem)
        return quote

    @staticmethod
    def _envelope_distance(pricer: Enveloped, request: PricingRequest, features: Mapping[str, float | None]) -> float:
        """The pricer's out-of-envelope share ``s`` as a distance whose complexity component is ``s``."""
        try:
            share = float(pricer.ood_distance(request, features))
        except Exception:  # noqa: BLE001 - a signal for routing only; unknown counts as far out
            return math.inf
        return dg.share_to_distance(share, half=OOD_HALF)

    def _count(self, request: PricingRequest, features: Mapping[str, float | None]) -> int:
        """Times the hotel was seen: our own count or the stream's 7-day searches, whichever is larger."""
        seen = self._seen.get(request.hotel_id, 0)
        if seen < SEEN_CAP:
            self._seen[request.hotel_id] = seen + 1
        searches = features.get("searches_7d") or 0.0
        return max(seen, int(min(searches, SEEN_CAP)))


def _describe(model: object) -> dict[str, Any] | None:
    return None if model is None else {"name": getattr(model, "name", None), "version": getattr(model, "version", None)}

