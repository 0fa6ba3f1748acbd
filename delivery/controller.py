"""Rollout controller: one candidate through shadow, canary, blend and full, gated on quality.

The controller owns the :class:`RolloutState` (persisted on every change), decides the
arm of each request (``choose_arm``, with the propensity to log for off-policy
evaluation), moves the rollout forward when the gates pass (``advance``), aborts
it, naming the failed gate and by how much, when one fails, and leaves it where it
is while the sequential ``net_value`` gate of canary and blend is still undecided.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> cfg = DeliveryConfig(state_path=Path(tempfile.mkdtemp()) / "rollout.json")
    >>> ctl = RolloutController(cfg)
    >>> ctl.start("v2", incumbent_version="v1").stage
    <Stage.SHADOW: 'shadow'>
    >>> ctl.choose_arm("guest-1")
    ('incumbent', 1.0)
    >>> same = [100.0] * 50
    >>> ctl.advance(Evidence(incumbent_prices=same, candidate_prices=same, candidate_latency_ms=[3.0] * 50)).stage
    <Stage.CANARY: 'canary'>
    >>> ctl.choose_arm("guest-1")
    ('incumbent', 0.95)
    >>> few = Evidence(incumbent_prices=same, candidate_prices=same, candidate_latency_ms=[3.0] * 50,
    ...                incumbent_net=[0.0, 40.0] * 50, candidate_net=[0.0, 44.0] * 50)
    >>> r = ctl.advance(few)  # 100 outcomes per arm: the sequential gate waits for more
    >>> r.waiting, r.stage
    (True, <Stage.CANARY: 'canary'>)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from delivery.arms import ArmSet
from delivery.bandit import ThompsonBlend
from delivery.canary import Arm, assign_arm
from delivery.gates import Evidence, GateResult, evaluate_gates
from delivery.stages import LIVE_STAGES, DeliveryConfig, Stage, next_stage
from delivery.state import RolloutState, StateStore
from routing.errors import RolloutStateError


class AdvanceResult(BaseModel):
    """What ``advance`` did: moved on, aborted with the failed gates, or waits for more evidence."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    advanced: bool
    from_stage: Stage
    stage: Stage
    results: tuple[GateResult, ...]
    message: str

    @property
    def waiting(self) -> bool:
        """The rollout stays in its stage: the sequential gate has not decided yet."""
        return not self.advanced and self.stage == self.from_stage


def _utc_now() -> datetime:
    return datetime.now(tz=UTC)


class RolloutController:
    """Drive one rollout at a time.

    Args:
        config: delivery settings (state path, canary share, gate limits...).
        arms: when given, ``full`` switches it to the candidate and ``abort`` rolls it back;
            a controller that resumes a ``full`` rollout from its state file switches it too.
        store: state persistence (``StateStore(config.state_path)`` when ``None``).
        clock: aware "now" (for tests and replays).
    """

    def __init__(
        self,
        config: DeliveryConfig,
        *,
        arms: ArmSet[Any] | None = None,
        store: StateStore | None = None,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self.config = config
        self.arms = arms
        self._store = StateStore(config.state_path) if store is None else store
        self._clock = clock
        self._lock = threading.Lock()
        self._state = self._store.load() or RolloutState.idle(clock())
        self._salt = f"{config.salt}:{self._state.version}"
        self._blend = self._new_blend()
        if arms is not None and arms.candidate is not None and self._state.stage == Stage.FULL:
            arms.switch()  # resuming a finished rollout: the candidate serves

    def _new_blend(self) -> ThompsonBlend:
        c = self.config
        return ThompsonBlend(min_weight=c.min_weight, n_samples=c.posterior_samples, seed=c.seed)

    @property
    def bandit(self) -> ThompsonBlend:
        """The Thompson blend that learns from rewards during the blend stage."""
        return self._blend

    def status(self) -> RolloutState:
        """The current state (immutable snapshot)."""
        return self._state

    def adopt(self, state: RolloutState) -> None:
        """Follow a state that another process saved (the CLI drives, a server follows); nothing is written.

        A new version starts a fresh Thompson blend. ``arms`` are left alone: the caller switches them.
        """
        with self._lock:
            if state.version != self._state.version:
                self._blend = self._new_blend()
            self._salt = f"{self.config.salt}:{state.version}"
            self._state = state

    def reload(self) -> RolloutState | None:
        """The state file as saved now (``None`` if there is none), without adopting it."""
        return self._store.load()

    def _commit(self, state: RolloutState) -> RolloutState:
        self._store.save(state)  # disk first: memory never runs ahead of what a restart would see
        self._salt = f"{self.config.salt}:{state.version}"
        self._state = state
        return state

    def start(self, version: str, *, incumbent_version: str | None = None, reason: str = "") -> RolloutState:
        """Begin shadowing ``version``.

        Raises:
            RolloutStateError: another rollout is still live.
        """
        with self._lock:
            state = self._state
            if state.stage in LIVE_STAGES:
                msg = f"rollout of {state.version!r} is live in stage {state.stage.value!r}; abort it first"
                raise RolloutStateError(msg)
            self._blend = self._new_blend()
            why = f"start {version}" + (f": {reason}" if reason else "")
            new = state.transition(
                Stage.SHADOW,
                at=self._clock(),
                reason=why,
                weight=0.0,
                version=version,
                incumbent_version=incumbent_version,
            )
            return self._commit(new)

    def advance(self, evidence: Evidence, *, reason: str = "") -> AdvanceResult:
        """Run the gates for leaving the current stage: move on if all pass, abort if one fails, else wait.

        In canary and blend, ``evidence`` holds every outcome the stage collected so far: the
        sequential ``net_value`` gate looks at it after every batch at no cost to its error rate.
        While that gate waits and no other gate failed, the rollout stays in its stage
        (``AdvanceResult.waiting``) and nothing is written.

        Raises:
            RolloutStateError: the rollout is not in a live stage.
        """
        with self._lock:
            stage = self._state.stage
            target = next_stage(stage)
            results = tuple(evaluate_gates(evidence, limits=self.config.limits, outcomes=stage != Stage.SHADOW))
            failed = [r for r in results if not r.passed and not r.waiting]
            if failed:
                message = "; ".join(r.message for r in failed)
                self._abort_locked(f"{stage.value} -> {target.value} blocked: {message}")
                return AdvanceResult(
                    advanced=False, from_stage=stage, stage=Stage.ABORTED, results=results, message=message
                )
            waiting = [r for r in results if r.waiting]
            if waiting:
                message = f"{stage.value}: waiting for evidence; " + "; ".join(r.message for r in waiting)
                return AdvanceResult(advanced=False, from_stage=stage, stage=stage, results=results, message=message)
            weights = {Stage.CANARY: self.config.canary_share, Stage.BLEND: self.config.blend_initial_weight}
            why = f"{stage.value} -> {target.value}: all {len(results)} gates passed"
            why += "".join(f"; {r.message}" for r in results if r.gate == "net_value")
            why += f"; {reason}" if reason else ""
            self._commit(self._state.transition(target, at=self._clock(), reason=why, weight=weights.get(target, 1.0)))
            if target == Stage.FULL and self.arms is not None:
                self.arms.switch()
            return AdvanceResult(advanced=True, from_stage=stage, stage=target, results=results, message=why)

    def abort(self, reason: str) -> RolloutState:
        """Stop the rollout (live or full) and send all traffic back to the incumbent.

        Raises:
            RolloutStateError: nothing to abort.
        """
        with self._lock:
            return self._abort_locked(reason)

    def _abort_locked(self, reason: str) -> RolloutState:
        if self._state.stage not in LIVE_STAGES | {Stage.FULL}:
            msg = f"no rollout to abort: stage is {self._state.stage.value!r}"
            raise RolloutStateError(msg)
        if self.arms is not None:
            self.arms.rollback()
        return self._commit(self._state.transition(Stage.ABORTED, at=self._clock(), reason=reason, weight=0.0))

    def update_weights(self, *, reason: str | None = None) -> float:
        """In the blend stage, set the candidate weight from the Thompson posterior.

        Raises:
            RolloutStateError: not in the blend stage.
        """
        with self._lock:
            if self._state.stage != Stage.BLEND:
                msg = f"update_weights() works in stage 'blend', not {self._state.stage.value!r}"
                raise RolloutStateError(msg)
            now = self._clock()
            weight = self._blend.weights(reason=reason, at=now)["candidate"]
            if weight != self._state.candidate_weight:
                why = self._blend.history[-1].reason if self._blend.history else (reason or "thompson")
                self._commit(self._state.reweight(weight, at=now, reason=why))
            return weight

    def choose_arm(self, request_key: str) -> tuple[Arm, float]:
        """Arm for this request and its propensity (canary share, blend weight, or 1.0)."""
        state = self._state  # one read: a consistent (stage, weight) pair
        if state.stage in (Stage.CANARY, Stage.BLEND):
            return assign_arm(request_key, state.candidate_weight, self._salt)
        if state.stage == Stage.FULL:
            return "candidate", 1.0
        return "incumbent", 1.0

    def record_decision(self, decision_id: str, arm: Arm) -> None:
        """Remember a decision's arm for its late reward (see :class:`ThompsonBlend`)."""
        self._blend.record_decision(decision_id, arm)

    def reward(self, decision_id: str, value: float) -> bool:
        """Credit a late reward to the arm that made ``decision_id``."""
        return self._blend.reward(decision_id, value)
