"""Progressive delivery on the serving path: a :class:`RolloutScorer` in front of two :class:`Scorer` s.

The incumbent and the candidate are complete scorers (rules, router, light and heavy
models). The :class:`~delivery.RolloutController` owns the stage; this class
turns it into serving decisions, per request:

* ``shadow``: the incumbent answers; the candidate is priced off the response path
  (:class:`~delivery.ShadowRunner`, its deadline is ``latency_budget_ms``) and its
  decision goes to ``on_decision`` with ``arm="candidate-shadow"``, never to the caller;
* ``canary`` / ``blend``: the arm comes from a salted hash of ``guest_key`` (else the
  request id), so a guest stays on one arm; the share is the canary share, or in the blend
  the Thompson weight, moved by late rewards (:meth:`RolloutScorer.reward`);
* ``full``: the candidate serves, the incumbent stays loaded; :meth:`RolloutScorer.rollback`
  is one reference swap.

Every served decision carries ``arm`` and ``propensity`` (the probability that its arm, and
so its price, was chosen), for off-policy evaluation. Evidence for the gates (paired prices
of both arms on the same request, candidate latencies, bookings and revenue per arm) is
collected per stage; :meth:`RolloutScorer.advance` runs ``delivery.gates`` on it and
aborts, naming the failed gate and by how much. The class has the scorer's ``price`` /
``price_batch`` / ``health`` / ``config`` / ``stats`` surface, so
:func:`serving.http.create_app` serves through it.

Served decisions (not the shadow ones, which no caller sees) go to the ``audit`` sink after
their arm is stamped. A server follows a rollout driven by another process (``pricestream
rollout start / advance / abort`` write the state file, or publish it on the control topic:
:mod:`delivery.control_kafka`) with :meth:`RolloutScorer.follow`.

Example:
    >>> import tempfile
    >>> from datetime import date, datetime, timezone
    >>> from pathlib import Path
    >>> from pricing.rules import RuleSet
    >>> from pricing.scorer import MemoryFeatureSource, Scorer, ScorerConfig
    >>> from delivery import DeliveryConfig
    >>> from routing.router import TieredRouter
    >>> def scorer(base):
    ...     rules = RuleSet.from_yaml(f"min_price: 50\\nmax_price: 500\\ndefault_base_rate: {base}\\n")
    ...     return Scorer(ScorerConfig(), rules=rules, feature_source=MemoryFeatureSource(),
    ...                   light=None, heavy=None, router=TieredRouter())
    >>> logged = []
    >>> cfg = DeliveryConfig(state_path=Path(tempfile.mkdtemp()) / "rollout.json")
    >>> rollout = RolloutScorer(scorer(100), config=cfg, on_decision=lambda r, d: logged.append(d))
    >>> _ = rollout.start(scorer(120), version="v2")
    >>> req = PricingRequest(hotel_id="h1", room_type="std", stay_date=date(2026, 12, 24),
    ...                      event_time=datetime(2026, 12, 1, tzinfo=timezone.utc))
    >>> served = rollout.price(req)
    >>> rollout.drain()
    True
    >>> served.price, served.arm, sorted((d.arm, d.price) for d in logged)
    (100.0, 'incumbent', [('candidate-shadow', 120.0), ('incumbent', 100.0)])
    >>> rollout.close()
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

from prometheus_client import CollectorRegistry

from delivery import (
    AdvanceResult,
    Arm,
    ArmSet,
    DeliveryConfig,
    Evidence,
    RolloutController,
    RolloutState,
    Stage,
)
from delivery.background import DEFAULT_PAIR_SHARE, DEFAULT_REWEIGHT_EVERY, BackgroundPricing, RewardLedger
from delivery.bandit import DEFAULT_MAX_PENDING
from delivery.evidence import DEFAULT_MAX_EVIDENCE, EvidenceBuffer, RolloutMetrics
from delivery.stages import LIVE_STAGES
from events.models import OutcomeLabel, PricingDecision, PricingRequest
from pricing.metrics import ScorerMetrics
from pricing.output_audit import OutputAudit
from pricing.scorer import DecisionCallback, DecisionSink, Scorer, ScorerConfig, Trail, record_decision
from routing.errors import RolloutStateError, RoutingInputError

CandidateLoader = Callable[[str], Scorer]
"""``load(version)``: a complete candidate scorer serving that registered model version."""

DecisionTime = Literal["decided", "request"]
"""What a served decision's ``event_time`` is: when it was made, or its request's time."""

class RolloutScorer:
    """Serve through an incumbent and a candidate :class:`Scorer` as the rollout stage says.

    Give the two scorers no ``on_decision`` of their own: this class stamps ``arm`` and
    ``propensity`` first and then calls its ``on_decision`` (publish to ``pricing.decisions``).

    Args:
        incumbent: the scorer in force.
        config: delivery settings (state file, canary share, shadow budget and workers, gate limits).
        candidate: the candidate scorer, if already loaded (else pass it to :meth:`start`).
        on_decision: called with every served decision and every shadow decision.
        audit: where served decisions are audited (a :class:`~pricing.scorer.DecisionSink`).
        pair_share: share of canary/blend requests priced by the other arm too (paired evidence).
        max_evidence: samples kept per evidence series.
        max_pending: decisions kept awaiting a reward.
        reweight_every: blend rewards between automatic Thompson weight updates (0: never).
        registry: where the rollout metrics go (default: the incumbent's metrics registry).
        decision_time: ``"decided"`` stamps a decision with the time it was made; ``"request"`` with its
            request's ``event_time`` (a replay or a simulation: the label join's horizon runs from there).
    """

    def __init__(
        self,
        incumbent: Scorer,
        *,
        config: DeliveryConfig,
        candidate: Scorer | None = None,
        on_decision: DecisionCallback | None = None,
        audit: DecisionSink | None = None,
        pair_share: float = DEFAULT_PAIR_SHARE,
        max_evidence: int = DEFAULT_MAX_EVIDENCE,
        max_pending: int = DEFAULT_MAX_PENDING,
        reweight_every: int = DEFAULT_REWEIGHT_EVERY,
        registry: CollectorRegistry | None = None,
        decision_time: DecisionTime = "decided",
    ) -> None:
        if decision_time not in ("decided", "request"):
            raise RoutingInputError(field="decision_time", value=decision_time, expected="'decided' or 'request'")
        self.decision_time = decision_time
        self.delivery = config
        self.arms: ArmSet[Scorer] = ArmSet(incumbent, candidate=candidate)
        self.controller = RolloutController(config, arms=self.arms)
        self.on_decision = on_decision
        self.audit = audit
        self.audit_failing = False
        self.output_audit: OutputAudit | None = None
        """Checks every served price before it is audited and published (set by the composition root)."""
        self.control_health: Callable[[], dict[str, Any]] | None = None
        """The control plane follower's state for ``/healthz`` (set when serving follows ``control.v1``)."""
        self.candidate_version: str | None = None if candidate is None else self.controller.status().version
        self.metrics = RolloutMetrics(incumbent.stats.registry if registry is None else registry)
        self._served_count = {arm: self.metrics.decisions.labels(arm=arm) for arm in ("incumbent", "candidate")}
        self.callback_errors = 0
        self.last_rollback_ms: float | None = None
        self._evidence = EvidenceBuffer(max_evidence)
        self._rewards = RewardLedger(self.controller, self._evidence, max_pending=max_pending,
                                     reweight_every=reweight_every,
                                     reweight=lambda reason: self.update_weights(reason=reason))
        self._halted = False  # set by rollback() before the abort is persisted: serving flips first
        self._background = BackgroundPricing(
            lambda arm: self.arms.get(arm), evidence=self._evidence, metrics=self.metrics, emit=self._emit,
            request_time=decision_time == "request", pair_share=pair_share, latency_budget_ms=config.latency_budget_ms,
            workers=config.shadow_workers, max_pending=config.shadow_max_pending)
        self.metrics.weight.set(self.controller.status().candidate_weight)

    # -- the scorer surface (serving.http.create_app) ------------------------------------------
    @property
    def config(self) -> ScorerConfig:
        """The serving scorer's :class:`~pricing.scorer.ScorerConfig` (deadline for the HTTP service)."""
        return self.arms.incumbent.config

    @property
    def stats(self) -> ScorerMetrics:
        """The incumbent's :class:`~pricing.metrics.ScorerMetrics` (rollout metrics share its registry)."""
        return self.arms.incumbent.stats

    def price(self, request: PricingRequest, *, deadline_ms: float | None = None) -> PricingDecision:
        """Price one request as the rollout stage says (see the module docstring)."""
        state = self.controller.status()
        arm, propensity = self._arm(request, state.stage)
        decision, trail = self.arms.get(arm).price_traced(request, deadline_ms=deadline_ms)
        return self._served(request, decision, trail, arm, propensity, state.stage)

    def price_batch(
        self, requests: Sequence[PricingRequest], *, deadline_ms: float | None = None
    ) -> list[PricingDecision]:
        """Price many requests: each arm prices its share in one batch; answers keep the input order."""
        state = self.controller.status()
        chosen = [self._arm(r, state.stage) for r in requests]
        out: list[PricingDecision | None] = [None] * len(requests)
        for arm in ("incumbent", "candidate"):
            idx = [i for i, (a, _) in enumerate(chosen) if a == arm]
            if not idx:
                continue
            traced = self.arms.get(arm).price_batch_traced([requests[i] for i in idx], deadline_ms=deadline_ms)
            for i, (decision, trail) in zip(idx, traced, strict=True):
                out[i] = self._served(requests[i], decision, trail, arm, chosen[i][1], state.stage)
        return [d for d in out if d is not None]

    def health(self) -> dict[str, Any]:
        """The serving scorer's health, with the rollout stage, versions, weight and active arm."""
        state = self.controller.status()
        serving = self.arms.current()
        health = dict(serving.health())
        if self.audit_failing:
            health["audit_failing"], health["status"] = True, "degraded"
        candidate = self.arms.candidate
        health["rollout"] = {
            "stage": state.stage.value,
            "version": state.version,
            "incumbent_version": state.incumbent_version,
            "candidate_weight": state.candidate_weight,
            "active_arm": self.arms.active_arm,
            "standby_loaded": candidate is not None,
            "shadow_dropped": self._background.dropped,
            "last_rollback_ms": self.last_rollback_ms,
        }
        if self.control_health is not None:
            health["control_plane"] = self.control_health()
        return health

    # -- rollout operations -------------------------------------------------------------------
    def start(self, candidate: Scorer, *, version: str, incumbent_version: str | None = None,
              reason: str = "") -> RolloutState:
        """Load ``candidate`` and begin shadowing it.

        After a finished (``full``) rollout, the candidate that serves becomes the incumbent first.

        Raises:
            RolloutStateError: another rollout is live.
        """
        state = self.controller.status()
        if state.stage == Stage.FULL and self.arms.active_arm == "candidate" and self.arms.candidate is not None:
            self.arms = ArmSet(self.arms.candidate)
            self.controller.arms = self.arms
        new = self.controller.start(version, incumbent_version=incumbent_version, reason=reason)
        self.arms.load_candidate(candidate)
        self.candidate_version = version
        self._halted = False
        self._reset()
        return new

    def advance(self, *, reason: str = "") -> AdvanceResult:
        """Run the gates on this stage's evidence; move on when all pass, abort on a failed gate (the
        incumbent serves), or wait: then the evidence is kept and grows until the next look.

        The result's ``message`` names each failed gate and by how much it missed.
        """
        result = self.controller.advance(self.evidence(), reason=reason)
        if result.waiting:  # the sequential gate looks again at the same stage's growing evidence
            return result
        self._reset()
        if not result.advanced:
            self.metrics.rollbacks.inc()
        return result

    def rollback(self, reason: str = "operator rollback") -> RolloutState:
        """Send all traffic back to the incumbent now (live or full rollout); no restart, no reload.

        The serving swap is one reference assignment; the state file is written after it.

        Raises:
            RolloutStateError: there is no rollout to roll back.
        """
        stage = self.controller.status().stage
        if stage not in (Stage.SHADOW, Stage.CANARY, Stage.BLEND, Stage.FULL):
            msg = f"no rollout to roll back: stage is {stage.value!r}, expected shadow, canary, blend or full"
            raise RolloutStateError(msg)
        started = time.perf_counter()
        self._halted = True  # canary/blend requests go to the incumbent from here on
        self.arms.rollback()  # full: the incumbent serves from here on
        self.last_rollback_ms = (time.perf_counter() - started) * 1000.0
        state = self.controller.abort(reason)  # records and persists (fsync) after serving flipped
        self.metrics.rollbacks.inc()
        self.metrics.rollback_seconds.set(self.last_rollback_ms / 1000.0)
        self.metrics.weight.set(0.0)
        return state

    def follow(self, state: RolloutState, *, load: CandidateLoader) -> bool:
        """Serve as ``state`` says, when another process (``pricestream rollout ...``) wrote it.

        A live or full rollout of a version not loaded yet loads its candidate with ``load`` first
        (a failure leaves serving as it was and raises); ``full`` makes the candidate serve;
        ``aborted`` and ``idle`` send all traffic to the incumbent. Nothing is written.

        Returns:
            whether serving changed (stage, weight or candidate).
        """
        current = self.controller.status()
        wanted = state.version if state.stage in LIVE_STAGES | {Stage.FULL} else None
        fresh = wanted is not None and (wanted != self.candidate_version or self.arms.candidate is None)
        if state == current and not fresh:
            return False
        if fresh and wanted is not None:
            self.arms.load_candidate(load(wanted))
            self.candidate_version = wanted
        if state.stage == Stage.FULL and self.arms.candidate is not None:
            self.arms.switch()
        else:
            self.arms.rollback()
        self._halted = state.stage not in LIVE_STAGES | {Stage.FULL}
        self.controller.adopt(state)
        if state.stage != current.stage or state.version != current.version:
            self._reset()
        self.metrics.weight.set(state.candidate_weight if not self._halted else 0.0)
        return True

    def update_weights(self, *, reason: str | None = None) -> float:
        """In the blend, set the candidate weight from the Thompson posterior; returns it."""
        weight = self.controller.update_weights(reason=reason)
        self.metrics.weight.set(weight)
        return weight

    def evidence(self) -> Evidence:
        """What the current stage collected so far, as gate input."""
        return self._evidence.snapshot()

    # -- rewards --------------------------------------------------------------------------------
    def reward(self, decision_id: str, booked: bool | int | float, *, revenue: float | None = None) -> bool:
        """Credit a late outcome to the arm that made ``decision_id``.

        Args:
            decision_id: the served decision's id.
            booked: whether it booked (0/1).
            revenue: what it earned (default: the decision's price if booked, else 0).

        Returns:
            ``False`` (counted in ``unknown_rewards``) for an unknown or already rewarded decision.
        """
        return self._rewards.credit(decision_id, booked, revenue)

    def reward_label(self, label: OutcomeLabel) -> bool:
        """:meth:`reward` from a ``feedback.labels`` record (revenue: label price when booked)."""
        return self.reward(str(label.decision_id), label.label, revenue=label.price * label.label)

    # -- shadow plumbing ----------------------------------------------------------------------
    @property
    def unknown_rewards(self) -> int:
        """Rewards for a decision unknown here or already rewarded."""
        return self._rewards.pending.unknown

    def drain(self, timeout_s: float = 30.0) -> bool:
        """Wait until every queued background pricing has been logged; ``False`` on timeout."""
        return self._background.drain(timeout_s)

    def close(self) -> None:
        """Stop the background pricing (queued work finishes first)."""
        self._background.close()

    def __enter__(self) -> RolloutScorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals --------------------------------------------------------------------------------
    def _reset(self) -> None:
        self._evidence.clear()
        self.metrics.weight.set(self.controller.status().candidate_weight)

    def _arm(self, request: PricingRequest, stage: Stage) -> tuple[Arm, float]:
        if self._halted:
            return "incumbent", 1.0
        if stage in (Stage.CANARY, Stage.BLEND) and self.arms.candidate is not None:
            return self.controller.choose_arm(request.guest_key or str(request.request_id))
        if stage == Stage.FULL:
            return self.arms.active_arm, 1.0
        return "incumbent", 1.0

    def _served(
        self,
        request: PricingRequest,
        decision: PricingDecision,
        trail: Trail,
        arm: Arm,
        propensity: float,
        stage: Stage,
    ) -> PricingDecision:
        # the logged propensity is P(arm) x P(shown price | arm): the pricer's exploration draw is
        # independent of the arm's, so off-policy estimators need the product, not the arm's share alone
        update: dict[str, Any] = {"arm": arm, "propensity": propensity * decision.propensity}
        if self.decision_time == "request":
            update["event_time"] = request.event_time
        decision = decision.model_copy(update=update)
        if self.output_audit is not None:
            decision = self.output_audit.check(decision, request)
        self._served_count[arm].inc()
        if stage in (Stage.CANARY, Stage.BLEND):
            self._rewards.remember(decision, arm, stage)
            if arm == "candidate":
                self._evidence.add_latency(decision.latency_ms)
            self._background.maybe_pair(request, decision, arm)
        elif stage == Stage.SHADOW and self.arms.candidate is not None:
            self._background.submit(request, decision, "candidate")
        ok = record_decision(request, decision, trail, audit=self.audit, on_decision=None, stats=self.stats)
        if ok is not None:
            self.audit_failing = not ok
        self._emit(request, decision)
        return decision

    def _emit(self, request: PricingRequest, decision: PricingDecision) -> None:
        if self.on_decision is None:
            return
        try:
            self.on_decision(request, decision)
        except Exception:  # noqa: BLE001 - a failing publisher must not take a price back
            self.callback_errors += 1
