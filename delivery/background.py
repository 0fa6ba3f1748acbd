"""Pricing by the arm that does not serve, off the response path, and the rewards awaited per decision.

:class:`BackgroundPricing` is the shadow and paired-price half of :class:`~delivery.rollout.RolloutScorer`:
it queues the other arm's pricing of a served request on a :class:`~delivery.ShadowRunner`, records
the price pair (and the candidate's latency) as gate evidence, and passes each background decision on
with ``arm="<arm>-shadow"``. :class:`PendingRewards` keeps which arm made each canary or blend decision
until its outcome arrives.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from delivery import Arm, ShadowRecord, ShadowRunner, Stage
from delivery.evidence import EvidenceBuffer, RolloutMetrics, ShadowJob
from events.models import PricingDecision, PricingRequest
from pricing.scorer import Scorer
from routing.errors import RolloutStateError

Emit = Callable[[PricingRequest, PricingDecision], None]


class BackgroundPricing:
    """Price requests with the other arm in the background and log what it said.

    Args:
        scorer_of: the scorer of an arm now (the arms change as a rollout moves on).
        evidence: where price pairs and candidate latencies go.
        metrics: the rollout metrics (shadow outcomes).
        emit: called with each background decision (never audited: no caller sees it).
        request_time: stamp a background decision with its request's ``event_time`` (replays).
        latency_budget_ms, workers, max_pending: the runner's deadline, threads and queue bound.
    """

    def __init__(self, scorer_of: Callable[[Arm], Scorer], *, evidence: EvidenceBuffer, metrics: RolloutMetrics,
                 emit: Emit, request_time: bool, latency_budget_ms: float, workers: int,
                 max_pending: int) -> None:
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
