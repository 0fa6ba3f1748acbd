"""Weighted blend by Thompson sampling: traffic moves to the arm that books better.

Each arm has a Beta posterior on its reward (booking, or revenue normalised to [0, 1]:
a reward ``r`` adds ``r`` to alpha and ``1 - r`` to beta). Rewards arrive late, so a
decision is first recorded with its arm (``record_decision``) and its reward later
credited to that arm (``reward``); an unknown or repeated decision id is counted,
never raised. The candidate's weight is the posterior probability that it is the
better arm, estimated by Monte-Carlo with a seeded generator and clipped to
``[min_weight, 1 - min_weight]`` so that neither arm ever starves of evidence.

Example:
    >>> blend = ThompsonBlend(seed=1)
    >>> for i in range(200):
    ...     blend.record_decision(f"c{i}", "candidate")
    ...     blend.record_decision(f"i{i}", "incumbent")
    >>> for i in range(200):
    ...     _ = blend.reward(f"c{i}", 1.0 if i % 2 else 0.0)   # candidate books 50%
    ...     _ = blend.reward(f"i{i}", 1.0 if i % 5 == 0 else 0.0)  # incumbent 20%
    >>> blend.weights()["candidate"]
    0.95
    >>> blend.reward("never-seen", 1.0), blend.unknown_rewards
    (False, 1)
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from delivery.canary import Arm
from routing.errors import RoutingInputError

ARMS: tuple[Arm, ...] = ("candidate", "incumbent")

DEFAULT_MAX_PENDING = 1_000_000
"""Decisions waiting for a reward; the oldest are dropped (and counted) beyond this, as
a booking that comes weeks later is rewarded through the label join, not here."""

_WEIGHT_EPSILON = 1e-9


@dataclass(frozen=True)
class WeightChange:
    """One change of the candidate weight, with its reason."""

    at: datetime
    candidate_weight: float
    reason: str


class ThompsonBlend:
    """Beta-Bernoulli Thompson sampling over two arms with delayed rewards.

    Args:
        prior: (alpha, beta) of each arm's prior.
        min_weight: floor of either arm's weight.
        n_samples: posterior draws per weight estimate.
        seed: seed of the generator.
        max_pending: most decisions kept waiting for a reward.
    """

    def __init__(
        self,
        *,
        prior: tuple[float, float] = (1.0, 1.0),
        min_weight: float = 0.05,
        n_samples: int = 4_000,
        seed: int = 0,
        max_pending: int = DEFAULT_MAX_PENDING,
    ) -> None:
        if not 0.0 < min_weight < 0.5:
            raise RoutingInputError(field="min_weight", value=min_weight, expected="a number in (0, 0.5)")
        if min(prior) <= 0:
            raise RoutingInputError(field="prior", value=prior, expected="alpha > 0 and beta > 0")
        self._alpha = dict.fromkeys(ARMS, float(prior[0]))
        self._beta = dict.fromkeys(ARMS, float(prior[1]))
        self._pending: OrderedDict[str, Arm] = OrderedDict()
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()
        self.min_weight = min_weight
        self.n_samples = n_samples
        self.max_pending = max_pending
        self.unknown_rewards = 0
        self.expired = 0
        self.rewarded = 0
        self._weight = 0.5
        self._history: list[WeightChange] = []

    @property
    def posterior(self) -> dict[str, tuple[float, float]]:
        """(alpha, beta) per arm."""
        return {arm: (self._alpha[arm], self._beta[arm]) for arm in ARMS}

    @property
    def pending(self) -> int:
        """Decisions still waiting for their reward."""
        return len(self._pending)

    @property
    def candidate_weight(self) -> float:
        """The candidate weight from the last :meth:`weights` call (0.5 before any)."""
        return self._weight

    @property
    def history(self) -> tuple[WeightChange, ...]:
        """Every change of the candidate weight, oldest first."""
        return tuple(self._history)

    def record_decision(self, decision_id: str, arm: Arm) -> None:
        """Remember which arm made ``decision_id`` until its reward arrives."""
        if arm not in ARMS:
            raise RoutingInputError(field="arm", value=arm, expected=f"one of {list(ARMS)}")
        with self._lock:
            self._pending[decision_id] = arm
            while len(self._pending) > self.max_pending:
                self._pending.popitem(last=False)
                self.expired += 1

    def reward(self, decision_id: str, value: float) -> bool:
        """Credit ``value`` in [0, 1] to the arm that made ``decision_id``.

        Returns:
            ``False`` (and counts it in ``unknown_rewards``) when the id is unknown or was
            already rewarded.
        """
        if not (math.isfinite(value) and 0.0 <= value <= 1.0):
            raise RoutingInputError(field="value", value=value, expected="a reward in [0, 1]")
        with self._lock:
            arm = self._pending.pop(decision_id, None)
            if arm is None:
                self.unknown_rewards += 1
                return False
            self._alpha[arm] += value
            self._beta[arm] += 1.0 - value
            self.rewarded += 1
            return True

    def prob_candidate_better(self) -> float:
        """Monte-Carlo estimate of P(candidate's mean reward > incumbent's)."""
        with self._lock:
            draws = {arm: self._rng.beta(self._alpha[arm], self._beta[arm], self.n_samples) for arm in ARMS}
        return float(np.mean(draws["candidate"] > draws["incumbent"]))

    def weights(self, *, reason: str | None = None, at: datetime | None = None) -> dict[str, float]:
        """Traffic weight per arm; a change from the last call is stored with its reason."""
        p = self.prob_candidate_better()
        w = round(min(1.0 - self.min_weight, max(self.min_weight, p)), 6)
        if abs(w - self._weight) > _WEIGHT_EPSILON:
            (a_c, b_c), (a_i, b_i) = self.posterior["candidate"], self.posterior["incumbent"]
            why = f"thompson: P(candidate better)={p:.3f} from Beta({a_c:.1f},{b_c:.1f}) vs Beta({a_i:.1f},{b_i:.1f})"
            when = datetime.now(tz=UTC) if at is None else at
            self._history.append(WeightChange(when, w, why if reason is None else f"{reason}; {why}"))
            self._weight = w
        return {"candidate": w, "incumbent": round(1.0 - w, 6)}
