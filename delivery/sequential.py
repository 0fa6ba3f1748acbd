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

With a covariate per outcome known before the request was served (:class:`CoMoments`: the
incumbent's expected net value of the request), the effect is regression adjusted (CUPED): same
mean, the variance of the residuals. The gain is bounded by the share of the outcome's variance that
lies *between* requests: at a 15% booking rate the booking draw itself holds about 90% of it, so the
adjustment saves at most about a tenth of the outcomes (``bench/promotion_power.py`` measures it).

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
        margin: non-inferiority margin, a share of the incumbent's mean: promote once the confidence
            sequence rules out a loss larger than it (0: only a candidate shown better). A candidate
            ``margin`` worse is promoted at most at the test's error rate, an equal one with high
            probability; separating +3% from -3% (margin 0.03) takes about a quarter of the outcomes
            that separating +3% from 0 takes. Evidence that the candidate is worse at all still aborts.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    alpha: float = Field(default=0.05, gt=0.0, lt=0.5)
    mixture_sd: float = Field(default=0.01, gt=0.0)
    min_outcomes: int = Field(default=2_000, ge=2)
    max_outcomes: int | None = Field(default=None, ge=2)
    margin: float = Field(default=0.0, ge=0.0, lt=1.0)


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
class CoMoments:
    """Moments of one arm's outcomes ``y`` and a covariate ``x`` known before the request was served.

    Regression adjustment (CUPED; Deng, Xu, Kohavi and Walker, 2013): with ``beta`` the pooled
    within-arm slope of ``y`` on ``x``, the effect ``(y_c - y_i) - beta (x_c - x_i)`` has the same mean as
    the difference of means (the arms were assigned at random, so ``x`` has one mean in both) and the
    variance of the residuals ``y - beta x``; the mixture SPRT on it stays always valid (Lindon, Ham,
    Tingley and Bojinov, "Anytime-valid linear models and regression adjusted causal inference in
    randomized experiments", 2022). ``x`` must not depend on the arm that served the request: the
    rollout uses the *incumbent's* expected net value of every request (its predicted booking
    probability x (price - bid price) at its own price, from its served or shadow decision).

    Example:
        >>> m = CoMoments.of([1.0, 2.0, 4.0], [1.0, 2.0, 3.0]).merge(CoMoments.of([5.0], [4.0]))
        >>> m.n, m.mean, m.x_mean, round(m.sxy / m.sxx, 3)
        (4, 3.0, 2.5, 1.4)
    """

    n: int = 0
    mean: float = 0.0
    x_mean: float = 0.0
    m2: float = 0.0
    sxx: float = 0.0
    sxy: float = 0.0

    @classmethod
    def of(cls, values: ArrayLike, covariate: ArrayLike) -> CoMoments:
        """Moments of outcomes and their covariates (finite numbers, one covariate per outcome)."""
        y, x = Moments.of(values), Moments.of(covariate)
        if y.n != x.n:
            raise RoutingInputError(field="covariate", value=f"{x.n} values", expected=f"{y.n}: one per outcome")
        if y.n == 0:
            return cls()
        yy, xx = np.asarray(values, dtype=float).ravel(), np.asarray(covariate, dtype=float).ravel()
        return cls(y.n, y.mean, x.mean, y.m2, x.m2, float(((yy - y.mean) * (xx - x.mean)).sum()))

    @property
    def var(self) -> float:
        """Sample variance of the outcomes (0 below two)."""
        return self.m2 / (self.n - 1) if self.n > 1 else 0.0

    def residual_var(self, beta: float) -> float:
        """Sample variance of ``y - beta x`` (0 below three outcomes)."""
        ss = self.m2 - 2.0 * beta * self.sxy + beta * beta * self.sxx
        return max(ss, 0.0) / (self.n - 2) if self.n > 2 else 0.0

    def merge(self, other: CoMoments) -> CoMoments:
        """The moments of both samples together."""
        n = self.n + other.n
        if n == 0:
            return self
        dy, dx = other.mean - self.mean, other.x_mean - self.x_mean
        w = self.n * other.n / n
        return CoMoments(n, self.mean + dy * other.n / n, self.x_mean + dx * other.n / n,
                         self.m2 + other.m2 + dy * dy * w, self.sxx + other.sxx + dx * dx * w,
                         self.sxy + other.sxy + dx * dy * w)


ArmMoments = Moments | CoMoments
"""One arm's sufficient statistics: plain, or with a covariate for regression adjustment."""


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


def _waiting(inc: ArmMoments, cand: ArmMoments, why: str) -> SequentialDecision:
    nan = math.nan
    effect = cand.mean - inc.mean if inc.n and cand.n else nan
    return SequentialDecision("wait", effect, -math.inf, math.inf, nan, 1.0, inc.n, cand.n, inc.mean, why)


def _estimate(inc: ArmMoments, cand: ArmMoments) -> tuple[float, float, float, str]:
    """(effect, its variance, pooled outcome variance, how it was estimated) of the two arms."""
    pooled = ((inc.n - 1) * inc.var + (cand.n - 1) * cand.var) / (inc.n + cand.n - 2)
    if isinstance(inc, CoMoments) and isinstance(cand, CoMoments):
        sxx = inc.sxx + cand.sxx
        if sxx > 0.0:
            beta = (inc.sxy + cand.sxy) / sxx
            effect = (cand.mean - inc.mean) - beta * (cand.x_mean - inc.x_mean)
            variance = inc.residual_var(beta) / inc.n + cand.residual_var(beta) / cand.n
            raw = inc.var / inc.n + cand.var / cand.n
            share = 1.0 - variance / raw if raw > 0 else 0.0
            return effect, variance, pooled, f", adjusted for the covariate (variance -{100 * share:.1f}%)"
    return cand.mean - inc.mean, inc.var / inc.n + cand.var / cand.n, pooled, ""


def decide(inc: ArmMoments, cand: ArmMoments, *, config: SequentialConfig) -> SequentialDecision:
    """The test's verdict on the two arms' moments (see the module docstring).

    With :class:`CoMoments` for both arms the effect is regression adjusted (see :class:`CoMoments`).
    """
    if min(inc.n, cand.n) < config.min_outcomes:
        need = f"{inc.n} incumbent and {cand.n} candidate outcomes, deciding from {config.min_outcomes} per arm"
        return _waiting(inc, cand, f"gathering evidence: {need}")
    effect, variance, pooled, how = _estimate(inc, cand)
    if variance <= 0.0 or pooled <= 0.0:
        return _waiting(inc, cand, "no variation in the outcomes yet")
    tau = config.mixture_sd * math.sqrt(pooled)
    log_lr = mixture_log_lr(effect, variance, tau)
    width = half_width(variance, tau, config.alpha)
    lower, upper = effect - width, effect + width
    p_value = min(1.0, math.exp(-log_lr)) if log_lr > 0 else 1.0
    floor = -config.margin * abs(inc.mean)  # the margin in outcome units (plug-in incumbent mean)
    verdict: Verdict = "abort" if upper < 0 else "promote" if lower > floor else "wait"
    if verdict == "wait" and config.max_outcomes is not None and cand.n >= config.max_outcomes:
        verdict = "inconclusive"
    rel = f" ({100 * effect / abs(inc.mean):+.2f}%)" if inc.mean else ""
    reason = (f"{_words(verdict, cand.n, config)}: effect {effect:+.4g} per request{rel}, "
              f"{100 * (1 - config.alpha):g}% confidence sequence [{lower:+.4g}, {upper:+.4g}], "
              f"always-valid p {p_value:.3g}, n {inc.n}/{cand.n}{how}")
    return SequentialDecision(verdict, effect, lower, upper, log_lr, p_value, inc.n, cand.n, inc.mean, reason)


def _words(verdict: Verdict, n_candidate: int, config: SequentialConfig) -> str:
    better = f"candidate not worse by {100 * config.margin:g}%" if config.margin else "candidate better"
    return {"promote": better, "abort": "candidate worse", "wait": "undecided",
            "inconclusive": f"undecided after {n_candidate} candidate outcomes, the incumbent stays"}[verdict]


def compare(incumbent: ArrayLike, candidate: ArrayLike, *, config: SequentialConfig,
            covariates: tuple[ArrayLike, ArrayLike] | None = None) -> SequentialDecision:
    """The test's verdict on all outcomes so far of each arm (one value per request served).

    ``covariates`` (incumbent's, candidate's; one per outcome) adjust the effect for a value known before
    the request was served (see :class:`CoMoments`).
    """
    if covariates is None:
        return decide(Moments.of(incumbent), Moments.of(candidate), config=config)
    return decide(CoMoments.of(incumbent, covariates[0]), CoMoments.of(candidate, covariates[1]), config=config)


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
