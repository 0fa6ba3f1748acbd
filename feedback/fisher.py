"""The Fisher sampler: selects labels in proportion to their expected variance reduction.

It plugs into :mod:`feedback.samplers` like the others (same selection rule, budget and
importance weights); only its informativeness differs. Kept apart because it carries its own
linear algebra (the model's Fisher information over the offered stream).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from feedback.errors import require
from feedback.samplers import Candidate, Sampler, SamplerConfig

_SPREAD = 4.0  # informativeness = g / (_SPREAD x mean g): q stays proportional to g up to 4x the mean
Embed = Callable[[Candidate], Sequence[float]]


class FisherSampler(Sampler):
    """Prefers the examples that shrink the model's error most: Fisher information times leverage.

    For a logistic demand model with inputs ``x`` (an intercept added), an importance-weighted
    fit's excess test log-loss is ``E[p (1 - p) x' H^-1 x / q(x)] / 2n`` with ``H = E[p (1 - p) x x']``,
    the model's Fisher information over the stream. At a fixed label budget this is smallest
    for ``q`` proportional to ``g = sqrt(p (1 - p) x' H^-1 x)``: the expected variance reduction
    of a label is its outcome variance times its leverage under the current model. With booking
    probabilities of 5-30% the first factor varies little; the leverage singles out the rare
    inputs (an unusual price for the room, a scarce channel, an empty or a busy night).
    ``H`` needs no labels: every offered candidate adds ``p (1 - p) x x'`` (``observe``), and the
    inverse is refreshed every ``refresh_every`` candidates. The best possible saving over
    random sampling is ``1 - E[g]^2 / E[g^2]``, see :meth:`efficiency`.

    Args:
        config: shared selection settings.
        columns: feature names forming ``x`` (``Candidate.features``, ``price`` included by
            :meth:`Candidate.from_label`); values are ``sign(v) log(1 + |v|)``, missing as 0.
        embed: instead of ``columns``, a function candidate -> ``x`` (the model's own design).
        ridge: added to the diagonal of ``H`` (per-candidate scale) so that it is invertible early.
        refresh_every: candidates between two inversions of ``H``.

    Example:
        >>> from datetime import datetime, timezone
        >>> t = datetime(2026, 1, 1, tzinfo=timezone.utc)
        >>> pool = [Candidate(key=str(i), event_time=t, prob=0.15, features={"price": 100.0 + i % 5})
        ...         for i in range(200)] + [Candidate(key="odd", event_time=t, prob=0.15, features={"price": 400.0})]
        >>> sampler = FisherSampler(SamplerConfig(budget_per_period=5, seed=1), columns=["price"])
        >>> sampler.observe(pool)
        >>> sampler.score(pool[-1]) > 5 * sampler.score(pool[0]), sampler.informativeness(pool[-1])
        (True, 1.0)
    """

    strategy = "fisher"

    def __init__(
        self,
        config: SamplerConfig | None = None,
        *,
        columns: Sequence[str] = (),
        embed: Embed | None = None,
        ridge: float = 1e-4,
        refresh_every: int = 256,
    ) -> None:
        super().__init__(config)
        require(bool(columns) != (embed is not None), "columns/embed", (list(columns), embed), "exactly one of them")
        require(ridge > 0.0, "ridge", ridge, "a positive number")
        require(refresh_every >= 1, "refresh_every", refresh_every, "at least 1")
        self.columns = tuple(columns)
        self._embed = embed or self._log_features
        self.ridge = ridge
        self.refresh_every = refresh_every
        self._info: np.ndarray | None = None  # sum of p (1 - p) x x'
        self._inverse: np.ndarray | None = None
        self._seen = 0
        self._since = 0
        self._g_sum = 0.0
        self._g_n = 0

    def _log_features(self, candidate: Candidate) -> Sequence[float]:
        values = (candidate.features.get(c) for c in self.columns)
        return [0.0 if v is None or not math.isfinite(v) else math.copysign(math.log1p(abs(v)), v) for v in values]

    def _x(self, candidate: Candidate) -> np.ndarray:
        return np.append(np.asarray(self._embed(candidate), dtype=float), 1.0)

    def observe(self, candidates: Sequence[Candidate]) -> None:
        """Add the candidates' ``p (1 - p) x x'`` to ``H``; refresh ``H^-1`` when due (always for a batch)."""
        known = [c for c in candidates if c.prob is not None]
        if not known:
            return
        x = np.stack([self._x(c) for c in known])
        p = np.clip(np.array([c.prob for c in known], dtype=float), 0.0, 1.0)
        step = (x * (p * (1.0 - p))[:, None]).T @ x
        self._info = step if self._info is None else self._info + step
        self._seen += len(known)
        self._since += len(known)
        if self._inverse is None or self._since >= self.refresh_every or len(known) > 1:
            h = self._info / self._seen + self.ridge * np.eye(len(step))
            self._inverse = np.linalg.pinv(h, hermitian=True)
            self._since = 0
        g = np.sqrt(p * (1.0 - p) * np.einsum("ij,jk,ik->i", x, self._inverse, x))
        self._g_sum += float(g.sum())
        self._g_n += len(g)

    def score(self, candidate: Candidate) -> float:
        """``g = sqrt(p (1 - p) x' H^-1 x)`` (unnormalised); ``inf`` before anything was observed."""
        if candidate.prob is None or self._inverse is None:
            return math.inf
        x = self._x(candidate)
        p = min(max(candidate.prob, 0.0), 1.0)
        return math.sqrt(max(p * (1.0 - p) * float(x @ self._inverse @ x), 0.0))

    def informativeness(self, candidate: Candidate) -> float:
        g = self.score(candidate)
        if not math.isfinite(g) or self._g_n == 0:
            return 1.0
        return min(1.0, g / (_SPREAD * max(self._g_sum / self._g_n, 1e-12)))

    def efficiency(self, candidates: Sequence[Candidate]) -> float:
        """``E[g]^2 / E[g^2]`` over ``candidates``: the share of random sampling's labels that
        selection in proportion to ``g`` needs for the same variance (1.0: no gain possible)."""
        g = np.array([self.score(c) for c in candidates], dtype=float)
        g = g[np.isfinite(g)]
        return float(g.mean() ** 2 / np.mean(g**2)) if len(g) and np.any(g > 0) else 1.0
