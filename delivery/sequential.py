"""An always-valid two-sample test of a candidate against the incumbent: the mixture SPRT.

A rollout looks at its evidence after every batch and stops as soon as it is sure. A fixed-sample
test checked that way is wrong far more often than its nominal level (each look is another chance
to cross by luck). The mixture sequential probability ratio test (mSPRT; Robbins 1970; Johari,
Pekelis and Walsh, "Always Valid Inference", 2017) stays valid at every look: with ``theta`` the
difference of the two arms' means per request (candidate minus incumbent), ``V`` the variance of
its estimate and a normal mixture ``N(0, tau^2)`` over the alternatives,

    Lambda = sqrt(V / (V + tau^2)) * exp(tau^2 * theta_hat^2 / (2 V (V + tau^2)))

is (asymptotically) a nonnegative martingale under ``theta = 0``, so by Ville's inequality the
chance that it *ever* reaches ``1 / alpha`` is at most ``alpha``. Inverting it gives a confidence
sequence for ``theta`` (Howard, Ramdas, McAuliffe and Sekhon, 2021): an interval that covers the
truth at all looks at once with probability ``1 - alpha``.

The verdict has three outcomes:

* ``promote``: the interval lies above 0 (strong evidence the candidate earns more per request);
* ``abort``: the interval lies below 0 (evidence it earns less);
* ``wait``: neither yet. With ``max_outcomes`` set, a candidate arm that reached it undecided is
  ``inconclusive``: the incumbent stays (an equal model is kept, at no cost beyond the test's error).

The outcome is what a request earned: revenue net of the rooms' value where the decisions log the
bid price, revenue otherwise. ``tau`` is ``mixture_sd`` outcome standard deviations: the effect
size that the test detects soonest (at a 6% booking rate, 3% of revenue per request is about 0.7%
of its standard deviation, so the default of 1% sits near the effects a new model makes).

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> inc = rng.normal(10.0, 5.0, 20_000)
    >>> cand = rng.normal(10.3, 5.0, 20_000)
    >>> d = compare(inc, cand, config=SequentialConfig())
    >>> d.verdict, d.lower > 0
    ('promote', True)
    >>> compare(inc, inc[::-1], config=SequentialConfig()).verdict
    'wait'
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from pydantic import BaseModel, ConfigDict, Field

from routing.errors import RoutingInputError

Verdict = Literal["promote", "abort", "wait", "inconclusive"]


class SequentialConfig(BaseModel):
    """Settings of the sequential test.

    Attributes:
        alpha: the chance, over all looks together, that an equal candidate is ever promoted or
            aborted (the type I error of the two-sided test).
        mixture_sd: ``tau``, the mixture's spread, in outcome standard deviations.
        min_outcomes: outcomes per arm before the test may decide (the normal approximation of
            a mean of zero-inflated revenues needs some hundreds of bookings to hold).
        max_outcomes: candidate outcomes after which an undecided test ends ``inconclusive``
            (``None``: it waits as long as traffic comes).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    alpha: float = Field(default=0.05, gt=0.0, lt=0.5)
    mixture_sd: float = Field(default=0.01, gt=0.0)
    min_outcomes: int = Field(default=2_000, ge=2)
    max_outcomes: int | None = Field(default=None, ge=2)


@dataclass(frozen=True)
class Moments:
    """Count, mean and variance (``ddof=1``) of one arm's outcomes; mergeable batch by batch.

    Example:
        >>> a = Moments.of([1.0, 2.0]).merge(Moments.of([3.0, 4.0]))
        >>> a.n, a.mean, round(a.var, 4)
        (4, 2.5, 1.6667)
    """

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    @classmethod
    def of(cls, values: ArrayLike) -> Moments:
        """Moments of an array of finite numbers."""
        arr = np.asarray(values, dtype=float).ravel()
        if not np.all(np.isfinite(arr)):
            raise RoutingInputError(field="outcomes", value=arr[~np.isfinite(arr)][:3].tolist(),
                                    expected="finite numbers")
        if arr.size == 0:
            return cls()
        mean = float(arr.mean())
        return cls(int(arr.size), mean, float(((arr - mean) ** 2).sum()))

    @property
    def var(self) -> float:
        """Sample variance (0 below two outcomes)."""
        return self.m2 / (self.n - 1) if self.n > 1 else 0.0

    def merge(self, other: Moments) -> Moments:
        """The moments of both samples together (Chan et al.'s parallel update)."""
        n = self.n + other.n
        if n == 0:
            return self
        delta = other.mean - self.mean
        mean = self.mean + delta * other.n / n
        return Moments(n, mean, self.m2 + other.m2 + delta * delta * self.n * other.n / n)


@dataclass(frozen=True)
class SequentialDecision:
    """One look of the test: the verdict and the evidence behind it.

    Attributes:
        verdict: ``promote``, ``abort``, ``wait`` or ``inconclusive``.
        effect: candidate mean minus incumbent mean, per request.
        lower: lower end of the ``1 - alpha`` confidence sequence for the effect.
        upper: its upper end.
        log_lr: log of the mixture likelihood ratio (the test rejects at ``log(1 / alpha)``).
        p_value: the always-valid p-value at this look, ``min(1, 1 / Lambda)``.
        n_incumbent: incumbent outcomes.
        n_candidate: candidate outcomes.
        incumbent_mean: the incumbent's mean per request (the yardstick of ``relative``).
        reason: one sentence a person can read.
    """

    verdict: Verdict
    effect: float
    lower: float
    upper: float
    log_lr: float
    p_value: float
    n_incumbent: int
    n_candidate: int
    incumbent_mean: float
    reason: str

    @property
    def relative(self) -> float:
        """The effect as a share of the incumbent's mean (NaN when that mean is 0)."""
        return self.effect / abs(self.incumbent_mean) if self.incumbent_mean else math.nan


def mixture_log_lr(effect: float, variance: float, tau: float) -> float:
    """Log of the normal-mixture likelihood ratio of ``effect`` with estimate variance ``variance``.

    Example:
        >>> round(mixture_log_lr(0.0, 1.0, 1.0), 4)  # no effect: the ratio is below 1
        -0.3466
    """
    t2 = tau * tau
    return 0.5 * math.log(variance / (variance + t2)) + t2 * effect * effect / (2 * variance * (variance + t2))


def half_width(variance: float, tau: float, alpha: float) -> float:
    """Half-width of the mixture confidence sequence: ``|effect|`` at which ``Lambda = 1 / alpha``.

    Example:
        >>> round(half_width(1.0, 1.0, 0.05), 3)
        3.656
    """
    t2 = tau * tau
    return math.sqrt(variance * (variance + t2) / t2 * (2 * math.log(1 / alpha) + math.log((variance + t2) / variance)))


def _waiting(inc: Moments, cand: Moments, why: str) -> SequentialDecision:
    nan = math.nan
    effect = cand.mean - inc.mean if inc.n and cand.n else nan
    return SequentialDecision("wait", effect, -math.inf, math.inf, nan, 1.0, inc.n, cand.n, inc.mean, why)


def decide(inc: Moments, cand: Moments, *, config: SequentialConfig) -> SequentialDecision:
    """The test's verdict on the two arms' moments (see the module docstring)."""
    if min(inc.n, cand.n) < config.min_outcomes:
        need = f"{inc.n} incumbent and {cand.n} candidate outcomes, deciding from {config.min_outcomes} per arm"
        return _waiting(inc, cand, f"gathering evidence: {need}")
    variance = inc.var / inc.n + cand.var / cand.n
    pooled = ((inc.n - 1) * inc.var + (cand.n - 1) * cand.var) / (inc.n + cand.n - 2)
    if variance <= 0.0 or pooled <= 0.0:
        return _waiting(inc, cand, "no variation in the outcomes yet")
    tau = config.mixture_sd * math.sqrt(pooled)
    effect = cand.mean - inc.mean
    log_lr = mixture_log_lr(effect, variance, tau)
    width = half_width(variance, tau, config.alpha)
    lower, upper = effect - width, effect + width
    p_value = min(1.0, math.exp(-log_lr)) if log_lr > 0 else 1.0
    verdict: Verdict = "promote" if lower > 0 else "abort" if upper < 0 else "wait"
    if verdict == "wait" and config.max_outcomes is not None and cand.n >= config.max_outcomes:
        verdict = "inconclusive"
    rel = f" ({100 * effect / abs(inc.mean):+.2f}%)" if inc.mean else ""
    words = {"promote": "candidate better", "abort": "candidate worse", "wait": "undecided",
             "inconclusive": f"undecided after {cand.n} candidate outcomes, the incumbent stays"}
    reason = (f"{words[verdict]}: effect {effect:+.4g} per request{rel}, {100 * (1 - config.alpha):g}% "
              f"confidence sequence [{lower:+.4g}, {upper:+.4g}], always-valid p {p_value:.3g}, "
              f"n {inc.n}/{cand.n}")
    return SequentialDecision(verdict, effect, lower, upper, log_lr, p_value, inc.n, cand.n, inc.mean, reason)


def compare(incumbent: ArrayLike, candidate: ArrayLike, *, config: SequentialConfig) -> SequentialDecision:
    """The test's verdict on all outcomes so far of each arm (one value per request served)."""
    return decide(Moments.of(incumbent), Moments.of(candidate), config=config)


class SequentialTest:
    """The test fed batch by batch (river's verb set): ``update`` each arm, read ``decision``.

    Example:
        >>> import numpy as np
        >>> test = SequentialTest(SequentialConfig(min_outcomes=100))
        >>> rng = np.random.default_rng(1)
        >>> for _ in range(50):
        ...     d = test.update(rng.normal(1.0, 1.0, 200), rng.normal(0.8, 1.0, 200))
        ...     if d.verdict != "wait":
        ...         break
        >>> test.decision.verdict
        'abort'
    """

    def __init__(self, config: SequentialConfig | None = None) -> None:
        self.config = config or SequentialConfig()
        self.incumbent = Moments()
        self.candidate = Moments()
        self.looks = 0

    def update(self, incumbent: ArrayLike, candidate: ArrayLike) -> SequentialDecision:
        """Add one batch of outcomes per arm and look."""
        self.incumbent = self.incumbent.merge(Moments.of(incumbent))
        self.candidate = self.candidate.merge(Moments.of(candidate))
        self.looks += 1
        return self.decision

    @property
    def decision(self) -> SequentialDecision:
        """The verdict on everything seen so far."""
        return decide(self.incumbent, self.candidate, config=self.config)
