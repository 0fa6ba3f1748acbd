"""Active-learning samplers: pick the labelled outcomes worth training on.

Every sampler scores a candidate's *informativeness* in ``[0, 1]`` and selects
it with probability ``q = max(floor, min(1, c * informativeness))``. A selected
example carries the importance weight ``1 / q``, so weighted sums over the
selection are unbiased estimates of sums over all candidates (the ``floor``
keeps every candidate selectable, which unbiasedness needs).

Two ways in, river-style:

* :meth:`Sampler.offer_one` for streams: a Bernoulli draw per candidate, with a
  hard cap of ``budget_per_period`` selections per event-time ``period``. A cap
  that binds drops candidates and so biases the weights; ``stats["budget_dropped"]``
  says how often it happened (raise ``budget_per_period`` or lower ``c``).
* :meth:`Sampler.select` for batches: ``c`` is lowered per period until the
  expected count fits the remaining budget, then systematic sampling draws
  exactly that many with the same inclusion probabilities, so the weights stay
  unbiased even when the budget binds.

Example:
    >>> from datetime import datetime, timezone
    >>> t = datetime(2026, 1, 1, tzinfo=timezone.utc)
    >>> pool = [Candidate(key=str(i), event_time=t, prob=p) for i, p in enumerate([0.5, 0.02, 0.45, 0.99])]
    >>> sampler = UncertaintySampler(SamplerConfig(budget_per_period=2, seed=1))
    >>> sorted(s.candidate.key for s in sampler.select(pool))
    ['0', '2']
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from events.models import OutcomeLabel, TrainingExample
from feedback.errors import FeedbackError, require

_BISECTION_STEPS = 60  # halvings of c: far below float resolution of the budget sum


class SamplerConfig(BaseModel):
    """Selection settings shared by every sampler."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    c: float = Field(default=1.0, gt=0.0, description="q = min(1, c * informativeness)")
    floor: float = Field(default=0.01, gt=0.0, le=1.0, description="lowest selection probability")
    budget_per_period: int | None = Field(default=None, gt=0)
    period: timedelta = timedelta(hours=1)
    seed: int = 0


@dataclass(frozen=True)
class Candidate:
    """An example offered for selection (usually a labelled decision)."""

    key: str
    event_time: datetime
    prob: float | None = None
    revenues: tuple[float, ...] = ()
    committee: tuple[float, ...] = ()
    features: Mapping[str, float | None] = field(default_factory=dict)
    payload: object = None

    @classmethod
    def from_label(
        cls, label: OutcomeLabel, *, committee: Sequence[float] = (), revenues: Sequence[float] = ()
    ) -> Candidate:
        """Wrap an :class:`~events.models.OutcomeLabel`; its predicted probability is the model's p.

        ``features`` are the label's features plus its ``price``.
        """
        return cls(
            key=f"{label.decision_id}:{label.revision}",
            event_time=label.event_time,
            prob=label.predicted_prob,
            revenues=tuple(revenues),
            committee=tuple(committee),
            features={**label.features, "price": label.price},
            payload=label,
        )


@dataclass(frozen=True)
class Selected:
    """A selected candidate with its importance weight ``1 / selection_prob``."""

    candidate: Candidate
    weight: float
    selection_prob: float
    informativeness: float
    strategy: str

    def to_training_example(self) -> TrainingExample:
        """The example for ``training.examples``.

        Raises:
            FeedbackError: if the candidate does not wrap an :class:`OutcomeLabel`.
        """
        label = self.candidate.payload
        if not isinstance(label, OutcomeLabel):
            msg = f"field 'payload': got {type(label).__name__}, expected an OutcomeLabel"
            raise FeedbackError(msg)
        return TrainingExample(
            event_time=label.event_time,
            hotel_id=label.hotel_id,
            room_type=label.room_type,
            stay_date=label.stay_date,
            decision_id=label.decision_id,
            label=label.label,
            price=label.price,
            features=dict(label.features),
            weight=self.weight,
            strategy=self.strategy,
            selection_prob=self.selection_prob,
            model_version=label.model_version,
        )


class Sampler:
    """Base class: subclasses define :meth:`informativeness`."""

    strategy: ClassVar[str] = "base"

    def __init__(self, config: SamplerConfig | None = None) -> None:
        self.config = config or SamplerConfig()
        self._rng = random.Random(self.config.seed)
        self._used: dict[int, int] = {}
        self._stats: dict[str, float] = {"offered": 0, "selected": 0, "budget_dropped": 0, "sum_weights": 0.0}

    @property
    def stats(self) -> dict[str, float]:
        """``offered``, ``selected``, ``budget_dropped`` and ``sum_weights``."""
        return dict(self._stats)

    def informativeness(self, candidate: Candidate) -> float:
        """How much labelling ``candidate`` should teach the model, in ``[0, 1]``."""
        raise NotImplementedError

    def observe(self, candidates: Sequence[Candidate]) -> None:
        """See candidates before scoring them (labels not needed); a no-op unless a strategy keeps state."""

    def selection_prob(self, candidate: Candidate) -> float:
        """``q = max(floor, min(1, c * informativeness))``."""
        return _q(self.informativeness(candidate), self.config.c, self.config.floor)

    def offer_one(self, candidate: Candidate) -> Selected | None:
        """Decide on one candidate of a stream; ``None`` means not selected."""
        self._stats["offered"] += 1
        self.observe((candidate,))
        bucket = self._bucket(candidate.event_time)
        budget = self.config.budget_per_period
        if budget is not None and self._used.get(bucket, 0) >= budget:
            self._stats["budget_dropped"] += 1
            return None
        info = self.informativeness(candidate)
        q = _q(info, self.config.c, self.config.floor)
        if self._rng.random() >= q:
            return None
        return self._take(bucket, candidate, q, info)

    def select(self, candidates: Iterable[Candidate]) -> list[Selected]:
        """Select from a batch, at most ``budget_per_period`` per period, unbiased weights."""
        pool = list(candidates)
        self._stats["offered"] += len(pool)
        self.observe(pool)
        groups: dict[int, list[int]] = {}
        for i, cand in enumerate(pool):
            groups.setdefault(self._bucket(cand.event_time), []).append(i)
        chosen: list[tuple[int, Selected]] = []
        for bucket in sorted(groups):
            idx = groups[bucket]
            infos = [self.informativeness(pool[i]) for i in idx]
            probs = self._batch_probs(infos, bucket)
            for j in self._systematic(probs):
                chosen.append((idx[j], self._take(bucket, pool[idx[j]], probs[j], infos[j])))
        return [s for _, s in sorted(chosen, key=lambda pair: pair[0])]

    # ------------------------------------------------------------------ internals
    def _bucket(self, at: datetime) -> int:
        return math.floor(at.timestamp() / self.config.period.total_seconds())

    def _take(self, bucket: int, candidate: Candidate, q: float, info: float) -> Selected:
        self._used[bucket] = self._used.get(bucket, 0) + 1
        for old in [b for b in self._used if b < bucket - 1]:
            del self._used[old]  # keep state bounded: only the current and the previous period
        self._stats["selected"] += 1
        self._stats["sum_weights"] += 1.0 / q
        return Selected(candidate, 1.0 / q, q, info, self.strategy)

    def _batch_probs(self, infos: list[float], bucket: int) -> list[float]:
        cfg = self.config
        probs = [_q(i, cfg.c, cfg.floor) for i in infos]
        if cfg.budget_per_period is None:
            return probs
        room = cfg.budget_per_period - self._used.get(bucket, 0)
        if room <= 0:
            self._stats["budget_dropped"] += len(infos)
            return [0.0] * len(infos)
        if sum(probs) <= room:
            return probs
        if cfg.floor * len(infos) >= room:
            return [room / len(infos)] * len(infos)
        arr = np.asarray(infos, dtype=float)
        lo, hi = 0.0, cfg.c
        for _ in range(_BISECTION_STEPS):
            mid = (lo + hi) / 2
            if float(np.clip(mid * arr, cfg.floor, 1.0).sum()) <= room:
                lo = mid
            else:
                hi = mid
        return [_q(i, lo, cfg.floor) for i in infos]

    def _systematic(self, probs: list[float]) -> list[int]:
        """Indices drawn with inclusion probabilities ``probs`` (each <= 1), count = floor/ceil of their sum."""
        order = list(range(len(probs)))
        self._rng.shuffle(order)
        u = self._rng.random()
        picked, cum = [], 0.0
        for j in order:
            nxt = cum + probs[j]
            if math.ceil(nxt - u) > math.ceil(cum - u):
                picked.append(j)
            cum = nxt
        return picked


def _q(info: float, c: float, floor: float) -> float:
    return max(floor, min(1.0, c * info))


def _uncertainty(p: float) -> float:
    return 1.0 - abs(2.0 * p - 1.0)


class RandomSampler(Sampler):
    """Uniform selection with ``q = min(1, c)``: the baseline that the others must beat."""

    strategy = "random"

    def informativeness(self, candidate: Candidate) -> float:
        return 1.0


class UncertaintySampler(Sampler):
    """Prefers predictions close to 0.5 (unknown ``p`` counts as fully uncertain).

    Measures, each 1 at ``p = 0.5`` and 0 at ``p`` in {0, 1}:

    * ``"std"`` (default): ``2 * sqrt(p (1 - p))``, the label's standard deviation.
      The log-loss gradient of an example scales with ``|y - p|``, whose expected
      size is this, so selecting in proportion to it is the variance-minimising
      importance sampling; it also decays slowly enough that the weights of the
      rare confident examples that do get picked stay moderate;
    * ``"linear"``: ``1 - |2p - 1|``, the classic closeness to 0.5;
    * ``"entropy"``: the binary entropy of ``p`` in bits.

    Args:
        config: shared selection settings.
        measure: one of the above.
    """

    strategy = "uncertainty"

    def __init__(
        self, config: SamplerConfig | None = None, *, measure: Literal["std", "linear", "entropy"] = "std"
    ) -> None:
        super().__init__(config)
        require(measure in ("std", "linear", "entropy"), "measure", measure, "'std', 'linear' or 'entropy'")
        self.measure = measure

    def informativeness(self, candidate: Candidate) -> float:
        p = candidate.prob
        if p is None:
            return 1.0
        if self.measure == "linear":
            return _uncertainty(p)
        if self.measure == "std":
            return 2.0 * math.sqrt(max(p * (1.0 - p), 0.0))
        if p <= 0.0 or p >= 1.0:
            return 0.0
        return -(p * math.log2(p) + (1.0 - p) * math.log2(1.0 - p))


class MarginSampler(Sampler):
    """Prefers a close call: a small gap between the two best candidate revenues.

    Without candidate revenues, the gap is ``|p - threshold|``, scaled to ``[0, 1]``.

    Args:
        config: shared selection settings.
        threshold: decision threshold on ``p`` used when no revenues are given.
        margin_scale: relative revenue gap at (and beyond) which the call counts as easy.
    """

    strategy = "margin"

    def __init__(self, config: SamplerConfig | None = None, *, threshold: float = 0.5, margin_scale: float = 0.2):
        super().__init__(config)
        require(0.0 < threshold < 1.0, "threshold", threshold, "a probability strictly inside (0, 1)")
        require(margin_scale > 0.0, "margin_scale", margin_scale, "a positive fraction")
        self.threshold = threshold
        self.margin_scale = margin_scale

    def informativeness(self, candidate: Candidate) -> float:
        if len(candidate.revenues) >= 2:
            best, second = sorted(candidate.revenues, reverse=True)[:2]
            gap = (best - second) / max(abs(best), 1e-9)
            return max(0.0, 1.0 - gap / self.margin_scale)
        if candidate.prob is None:
            return 1.0
        half_width = max(self.threshold, 1.0 - self.threshold)
        return max(0.0, 1.0 - abs(candidate.prob - self.threshold) / half_width)


class CommitteeSampler(Sampler):
    """Prefers disagreement among committee members (light, heavy, online model...).

    Member opinions come from ``candidate.committee`` or, when that is empty, from
    calling each of ``members`` on the candidate's features. Fewer than two
    opinions count as full disagreement (nothing is known).

    Args:
        config: shared selection settings.
        members: callables ``features -> p``.
        method: ``"std"`` (twice the standard deviation of the probabilities) or
            ``"vote_entropy"`` (entropy, in bits, of the hard votes ``p > 0.5``).
    """

    strategy = "committee"

    def __init__(
        self,
        config: SamplerConfig | None = None,
        *,
        members: Sequence[Callable[[Mapping[str, float | None]], float]] = (),
        method: Literal["std", "vote_entropy"] = "std",
    ) -> None:
        super().__init__(config)
        require(method in ("std", "vote_entropy"), "method", method, "'std' or 'vote_entropy'")
        self.members = tuple(members)
        self.method = method

    def informativeness(self, candidate: Candidate) -> float:
        probs = candidate.committee or tuple(m(candidate.features) for m in self.members)
        if len(probs) < 2:
            return 1.0
        if self.method == "std":
            mean = sum(probs) / len(probs)
            std = math.sqrt(sum((p - mean) ** 2 for p in probs) / len(probs))
            return min(1.0, 2.0 * std)
        share = sum(p > 0.5 for p in probs) / len(probs)
        if share in (0.0, 1.0):
            return 0.0
        return -(share * math.log2(share) + (1 - share) * math.log2(1 - share))
