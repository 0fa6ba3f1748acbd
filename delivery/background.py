"""Pricing by the arm that does not serve, off the response path, and the rewards awaited per decision.

:class:`BackgroundPricing` is the shadow and paired-price half of :class:`~delivery.rollout.RolloutScorer`:
it queues the other arm's pricing of a served request on a :class:`~delivery.ShadowRunner`, records
the price pair (and the candidate's latency) as gate evidence, and passes each background decision on
with ``arm="<arm>-shadow"``. :class:`RewardLedger` keeps which arm made each canary or blend decision
until its outcome arrives, then credits the outcome to that arm's evidence and the blend's posterior.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from delivery import Arm, RolloutController, ShadowRecord, ShadowRunner, Stage, hash_unit
from delivery.evidence import EvidenceBuffer, RolloutMetrics, ShadowJob
from events.models import PricingDecision, PricingRequest
from pricing.scorer import Scorer
from routing.errors import RolloutStateError, RoutingInputError

Emit = Callable[[PricingRequest, PricingDecision], None]

DEFAULT_PAIR_SHARE = 0.05
"""Share of canary/blend requests on which the arm not served is priced in the background: the
flip and price-distribution gates need paired prices after shadow, and 5% gives the default
``min_samples`` of pairs within a few thousand requests at a small CPU cost."""

DEFAULT_REWEIGHT_EVERY = 200
"""Blend rewards between two Thompson weight updates (each costs a few thousand posterior draws)."""

_PAIR_SALT = "pricestream-pairs"


class BackgroundPricing:
    """Price requests with the other arm in the background and log what it said.

    Args:
        scorer_of: the scorer of an arm now (the arms change as a rollout moves on).
        evidence: where price pairs and candidate latencies go.
        metrics: the rollout metrics (shadow outcomes).
        emit: called with each background decision (never audited: no caller sees it).
        request_time: stamp a background decision with its request's ``event_time`` (replays).
        pair_share: share of canary/blend requests priced by the other arm too (:meth:`maybe_pair`).
        latency_budget_ms, workers, max_pending: the runner's deadline, threads and queue bound.
    """

    def __init__(self, scorer_of: Callable[[Arm], Scorer], *, evidence: EvidenceBuffer, metrics: RolloutMetrics,
                 emit: Emit, request_time: bool, pair_share: float, latency_budget_ms: float, workers: int,
                 max_pending: int) -> None:
        if not 0.0 <= pair_share <= 1.0:
            raise RoutingInputError(field="pair_share", value=pair_share, expected="a number in [0, 1]")
        self.pair_share = pair_share
        self._scorer_of = scorer_of
        self._evidence = evidence
        self._metrics = metrics
        self._emit = emit
        self._request_time = request_time
        self._budget_ms = latency_budget_ms
        self._logged = 0
        self._logged_lock = threading.Lock()
        self._runner: ShadowRunner[ShadowJob, PricingDecision] = ShadowRunner(
            self._price, on_result=self._on_result, latency_budget_ms=latency_budget_ms,
            max_workers=workers, max_pending=max_pending)

    @property
    def dropped(self) -> int:
        """Background pricings dropped because the queue was full."""
        return self._runner.dropped

    def submit(self, request: PricingRequest, served: PricingDecision, other: Arm) -> None:
        """Queue ``other``'s pricing of ``request`` (served as ``served``); a full or closed queue drops it."""
        try:
            accepted = self._runner.submit(ShadowJob(request, other), served)
        except RolloutStateError:  # closed: serving goes on without background pricing
            accepted = False
        if not accepted:
            self._metrics.shadow.labels(outcome="dropped").inc()

    def maybe_pair(self, request: PricingRequest, served: PricingDecision, arm: Arm) -> None:
        """Price a canary or blend request with the arm that did not serve, for ``pair_share`` of requests.

        The draw is a salted hash of the request id: the same requests are paired on every replica.
        """
        if self.pair_share and hash_unit(str(request.request_id), _PAIR_SALT) < self.pair_share:
            self.submit(request, served, "candidate" if arm == "incumbent" else "incumbent")

    def drain(self, timeout_s: float = 30.0) -> bool:
        """Wait until every queued pricing has been logged; ``False`` on timeout."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self._logged >= self._runner.submitted:
                return True
            time.sleep(0.002)
        return False

    def close(self) -> None:
        """Stop (queued work finishes first)."""
        self._runner.close(wait=True)

    def _price(self, job: ShadowJob) -> PricingDecision:
        decision, _ = self._scorer_of(job.arm).price_traced(job.request, deadline_ms=self._budget_ms)
        return decision

    def _on_result(self, record: ShadowRecord[ShadowJob, PricingDecision]) -> None:
        try:
            other = record.candidate
            if other is None:
                self._metrics.shadow.labels(outcome="failed").inc()
                return
            served, arm = record.incumbent, record.request.arm
            if arm == "candidate":
                self._evidence.add_pair(served.price, other.price)
                self._evidence.add_latency(record.latency_ms)
            else:
                self._evidence.add_pair(other.price, served.price)
            self._metrics.shadow.labels(outcome="late" if record.late else "logged").inc()
            # a shadow pricing is not drawn: only its own exploration draw (if any) is random
            update: dict[str, Any] = {"arm": f"{arm}-shadow", "propensity": other.propensity}
            if self._request_time:
                update["event_time"] = record.request.request.event_time
            self._emit(record.request.request, other.model_copy(update=update))
        finally:
            with self._logged_lock:
                self._logged += 1


class PendingRewards:
    """The arm, price and stage of each decision awaiting its outcome, the oldest dropped past a bound.

    Example:
        >>> pending = PendingRewards(max_pending=1)
        >>> pending.remember("a", "incumbent", 100.0, Stage.CANARY)
        >>> pending.remember("b", "candidate", 120.0, Stage.CANARY)
        >>> pending.take("a"), pending.unknown
        (None, 1)
        >>> pending.take("b")
        ('candidate', 120.0, <Stage.CANARY: 'canary'>)
    """

    def __init__(self, max_pending: int) -> None:
        self.max_pending = max_pending
        self.unknown = 0
        self._pending: OrderedDict[str, tuple[Arm, float, Stage]] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, decision_id: str, arm: Arm, price: float, stage: Stage) -> None:
        """Keep a served decision until its reward."""
        with self._lock:
            self._pending[decision_id] = (arm, price, stage)
            while len(self._pending) > self.max_pending:
                self._pending.popitem(last=False)

    def take(self, decision_id: str) -> tuple[Arm, float, Stage] | None:
        """The decision's (arm, price, stage), forgotten; ``None`` (counted) when unknown or already taken."""
        with self._lock:
            found = self._pending.pop(decision_id, None)
            if found is None:
                self.unknown += 1
            return found


class RewardLedger:
    """Credit late outcomes to the arm that made each decision, and reweight the blend now and then.

    Args:
        controller: the rollout's controller (its stage, and the blend's posterior).
        evidence: where outcomes of the current stage go.
        max_pending: decisions kept awaiting a reward.
        reweight_every: blend rewards between two weight updates (0: never).
        reweight: updates the blend weight, given a reason (a stage that moved on raises
            :class:`~routing.errors.RolloutStateError`, which is ignored).
    """

    def __init__(self, controller: RolloutController, evidence: EvidenceBuffer, *, max_pending: int,
                 reweight_every: int, reweight: Callable[[str], object]) -> None:
        self.pending = PendingRewards(max_pending)
        self.reweight_every = reweight_every
        self.blend_rewards = 0
        self._controller = controller
        self._evidence = evidence
        self._reweight = reweight

    def remember(self, decision: PricingDecision, arm: Arm, stage: Stage) -> None:
        """Keep a canary or blend decision until its reward (the blend's posterior learns its arm too)."""
        key = str(decision.decision_id)
        if stage == Stage.BLEND:
            self._controller.record_decision(key, arm)
        self.pending.remember(key, arm, decision.price, stage)

    def credit(self, decision_id: str, booked: bool | int | float, revenue: float | None) -> bool:
        """Credit one outcome (revenue default: the price if booked); ``False`` for an unknown decision."""
        found = self.pending.take(decision_id)
        if found is None:
            return False
        arm, price, stage = found
        value = 1.0 if booked else 0.0
        if stage == self._controller.status().stage:
            self._evidence.add_outcome(arm, value, price * value if revenue is None else float(revenue))
        if stage == Stage.BLEND and self._controller.reward(decision_id, value):
            self.blend_rewards += 1
            if self.reweight_every and self.blend_rewards % self.reweight_every == 0:
                try:
                    self._reweight(f"{self.blend_rewards} blend rewards")
                except RolloutStateError:  # the stage moved on between the reward and the update
                    pass
        return True
