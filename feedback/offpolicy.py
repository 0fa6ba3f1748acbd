"""Off-policy evaluation: what a candidate pricing policy would have earned on logged traffic.

Logs hold one row per decision: the context, the ``action`` (price or arm)
that was shown, its ``propensity`` (probability the logging policy chose it,
:attr:`events.models.PricingDecision.propensity`) and the ``reward`` (revenue,
or 0/1 booked). With importance weights ``w = π(a|x) / μ(a|x)``:

* ``ips``: mean of ``w·r`` (unbiased; variance grows with the weights);
* ``snips``: ``Σ w·r / Σ w`` (self-normalised: slightly biased, much steadier);
* ``dr``: mean of ``Σ_a π(a|x)·r̂(x,a) + w·(r − r̂(x,a_logged))`` with a reward model
  ``r̂``; unbiased when either the propensities or the model are right.

Confidence intervals: ``ci="bootstrap"`` (default) resamples rows with a seeded
generator and takes percentiles; it captures the ratio form of SNIPS without
formulas. ``ci="normal"`` is the normal approximation (plain standard error for
IPS and DR, delta method for SNIPS): instant, fine for large ``n``.

Example:
    >>> sim = simulate_logs(4000, seed=1)
    >>> est = evaluate(sim.logs, sim.candidate_prob, reward_model=sim.reward_model)
    >>> est.method, est.ci_low < sim.true_value < est.ci_high
    ('dr', True)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypedDict, Unpack

import numpy as np
import pandas as pd
from scipy import stats

from feedback.monitors.errors import MonitorInputError

Method = Literal["ips", "snips", "dr"]
METHODS: tuple[Method, ...] = ("ips", "snips", "dr")
ProbFn = Callable[[pd.DataFrame], np.ndarray]

MIN_ESS = 200.0
"""Effective sample size below which an estimate is reported with a warning: with fewer effective
decisions the bootstrap interval of a heavy-tailed weighted mean covers the truth well under its
nominal 95% (the weights' few large values are either all in a resample or none)."""
_BOOT_CHUNK = 100
"""Bootstrap resamples drawn per batch: bounds memory at 100 × n indices."""


@dataclass(frozen=True)
class Estimate:
    """A policy value estimate with its confidence interval."""

    value: float
    ci_low: float
    ci_high: float
    n: int
    method: str
    ess: float = float("nan")
    """Effective sample size of the importance weights, ``(sum w)^2 / sum w^2``: the logged decisions the
    estimate rests on. Far below ``n`` when few logged prices match the candidate's or propensities are small."""

    @property
    def trusted(self) -> bool:
        """Whether :attr:`ess` reaches :data:`MIN_ESS` (below it the interval understates the error)."""
        return self.ess >= MIN_ESS

    def covers(self, truth: float) -> bool:
        """Whether ``truth`` lies inside the interval."""
        return self.ci_low <= truth <= self.ci_high


def _column(logs: pd.DataFrame, name: str) -> np.ndarray:
    if name not in logs.columns:
        raise MonitorInputError(field="logs", value=list(logs.columns), expected=f"a column named {name!r}")
    values = logs[name].to_numpy(dtype=np.float64)
    if not np.isfinite(values).all():
        raise MonitorInputError(field=name, value=values[~np.isfinite(values)][:3].tolist(), expected="finite numbers")
    return values


def _probs(values: np.ndarray, name: str, *, positive: bool) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    low_ok = values > 0 if positive else values >= 0
    bad = ~(low_ok & (values <= 1.0))
    if bad.any():
        bound = "(0, 1]" if positive else "[0, 1]"
        raise MonitorInputError(field=name, value=values[bad][:3].tolist(), expected=f"probabilities in {bound}")
    return values


def _with_action(logs: pd.DataFrame, action_col: str, action: object) -> pd.DataFrame:
    frame = logs.copy()
    frame[action_col] = action
    return frame


def _contributions(
    logs: pd.DataFrame,
    candidate_prob: str | ProbFn,
    *,
    method: Method,
    reward_model: ProbFn | None,
    actions: Sequence[object] | None,
    cols: tuple[str, str, str],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row numerators, denominators and importance weights: the estimate is ``sum(num) / sum(den)``."""
    action_col, propensity_col, reward_col = cols
    mu = _probs(_column(logs, propensity_col), propensity_col, positive=True)
    reward = _column(logs, reward_col)
    if isinstance(candidate_prob, str):
        pi = _probs(_column(logs, candidate_prob), candidate_prob, positive=False)
    else:
        pi = _probs(candidate_prob(logs), "candidate_prob(logs)", positive=False)
    w = pi / mu
    if method == "ips":
        return w * reward, np.ones_like(w), w
    if method == "snips":
        return w * reward, w, w
    if reward_model is None or isinstance(candidate_prob, str):
        raise MonitorInputError(
            field="reward_model/candidate_prob",
            value=method,
            expected="a reward model and a callable candidate_prob",
        )
    choices = actions if actions is not None else sorted(logs[action_col].unique())
    direct = np.zeros(len(logs))
    for action in choices:
        frame = _with_action(logs, action_col, action)
        direct += np.asarray(candidate_prob(frame), dtype=np.float64) * np.asarray(reward_model(frame))
    return direct + w * (reward - np.asarray(reward_model(logs), dtype=np.float64)), np.ones_like(w), w


def _interval(
    num: np.ndarray, den: np.ndarray, *, ci: str, confidence: float, n_boot: int, seed: int
) -> tuple[float, float]:
    value = num.sum() / den.sum()
    n = len(num)
    if ci == "normal":
        # Delta method; for den == 1 this is the plain standard error of the mean.
        residual = (num - value * den) / den.mean()
        half = stats.norm.ppf(0.5 + confidence / 2) * residual.std(ddof=1) / np.sqrt(n)
        return float(value - half), float(value + half)
    rng = np.random.default_rng(seed)
    draws: list[np.ndarray] = []
    for start in range(0, n_boot, _BOOT_CHUNK):
        idx = rng.integers(0, n, size=(min(_BOOT_CHUNK, n_boot - start), n))
        draws.append(num[idx].sum(axis=1) / den[idx].sum(axis=1))
    boot = np.concatenate(draws)
    tail = (1 - confidence) / 2
    low, high = np.quantile(boot, [tail, 1 - tail])
    return float(low), float(high)


def evaluate(
    logs: pd.DataFrame,
    candidate_prob: str | ProbFn,
    *,
    reward_model: ProbFn | None = None,
    method: Method | None = None,
    actions: Sequence[object] | None = None,
    ci: Literal["bootstrap", "normal"] = "bootstrap",
    confidence: float = 0.95,
    n_boot: int = 1000,
    seed: int = 0,
    action_col: str = "action",
    propensity_col: str = "propensity",
    reward_col: str = "reward",
) -> Estimate:
    """Estimate a candidate policy's mean reward per decision from logged decisions.

    Args:
        logs: one row per logged decision.
        candidate_prob: column with π(logged action | x), or ``f(frame) -> π(frame[action_col] | x)``
            (a callable is required for ``dr``: it is also asked about actions that were not logged).
        reward_model: ``f(frame) -> r̂(x, frame[action_col])``; enables ``dr``.
        method: ``"ips"``, ``"snips"`` or ``"dr"`` (default: ``dr`` with a reward model, else ``snips``).
        actions: the action set for the ``dr`` direct term (default: the logged actions).
        ci: ``"bootstrap"`` (seeded percentile) or ``"normal"``.
        confidence: interval coverage.
        n_boot: bootstrap resamples.
        seed: bootstrap seed.
        action_col: column of the logged action.
        propensity_col: column of the logging propensity.
        reward_col: column of the reward.
    """
    chosen: Method = method or ("dr" if reward_model is not None else "snips")
    _check_options(chosen, ci, confidence, len(logs))
    num, den, weights = _contributions(
        logs, candidate_prob, method=chosen, reward_model=reward_model, actions=actions,
        cols=(action_col, propensity_col, reward_col),
    )
    if den.sum() <= 0:
        raise MonitorInputError(
            field="candidate_prob",
            value=0.0,
            expected="positive probability on some logged action",
        )
    low, high = _interval(num, den, ci=ci, confidence=confidence, n_boot=n_boot, seed=seed)
    return Estimate(float(num.sum() / den.sum()), low, high, len(logs), chosen, effective_sample_size(weights))


def _check_options(method: str, ci: str, confidence: float, rows: int) -> None:
    """Refuse an unknown method or interval, a confidence outside (0, 1) and fewer than 2 logged rows."""
    if method not in METHODS:
        raise MonitorInputError(field="method", value=method, expected=f"one of {METHODS}")
    if ci not in ("bootstrap", "normal"):
        raise MonitorInputError(field="ci", value=ci, expected="'bootstrap' or 'normal'")
    if not 0.0 < confidence < 1.0:
        raise MonitorInputError(field="confidence", value=confidence, expected="a float in (0, 1)")
    if rows < 2:
        raise MonitorInputError(field="logs", value=rows, expected="at least 2 rows")


def effective_sample_size(weights: np.ndarray) -> float:
    """Kish's effective sample size of importance ``weights``: ``(sum w)^2 / sum w^2`` (0 when all are 0).

    Example:
        >>> effective_sample_size(np.ones(50)), effective_sample_size(np.array([1.0] + [0.0] * 49))
        (50.0, 1.0)
    """
    square = float(np.square(weights).sum())
    return float(weights.sum() ** 2 / square) if square > 0 else 0.0


def evaluate_deterministic_dr(
    logs: pd.DataFrame,
    *,
    matched_col: str,
    direct_col: str,
    logged_hat_col: str,
    propensity_col: str = "propensity",
    reward_col: str = "reward",
    confidence: float = 0.95,
    n_boot: int = 1000,
    seed: int = 0,
) -> Estimate:
    """The doubly robust value of a deterministic candidate (one price per input) from logged decisions.

    Per row: ``r_hat(x, candidate's price) + 1{logged price matched} / mu x (r - r_hat(x, logged price))``,
    with ``direct_col`` the model's reward at the candidate's price and ``logged_hat_col`` at the logged
    one. Unbiased when either the propensities or the reward model are right; where few logged prices
    match, the model's term carries the estimate and :attr:`Estimate.ess` says so.

    Example:
        >>> frame = pd.DataFrame({"matched": [1.0, 0.0, 1.0, 0.0], "direct": [10.0, 12.0, 8.0, 9.0],
        ...                       "logged_hat": [10.0, 5.0, 8.0, 4.0], "propensity": 0.5,
        ...                       "reward": [12.0, 0.0, 8.0, 6.0]})
        >>> est = evaluate_deterministic_dr(frame, matched_col="matched", direct_col="direct",
        ...                                 logged_hat_col="logged_hat", n_boot=50)
        >>> est.value, est.method, est.ess
        (10.75, 'dr', 2.0)
    """
    mu = _probs(_column(logs, propensity_col), propensity_col, positive=True)
    matched = _probs(_column(logs, matched_col), matched_col, positive=False)
    w = matched / mu
    num = _column(logs, direct_col) + w * (_column(logs, reward_col) - _column(logs, logged_hat_col))
    den = np.ones_like(num)
    low, high = _interval(num, den, ci="bootstrap", confidence=confidence, n_boot=n_boot, seed=seed)
    return Estimate(float(num.mean()), low, high, len(logs), "dr", effective_sample_size(w))


class EvaluateOptions(TypedDict, total=False):
    """The keyword arguments of :func:`evaluate` that :func:`evaluate_all` passes on to every method."""

    actions: Sequence[object] | None
    ci: Literal["bootstrap", "normal"]
    confidence: float
    n_boot: int
    seed: int
    action_col: str
    propensity_col: str
    reward_col: str


def evaluate_all(
    logs: pd.DataFrame,
    candidate_prob: str | ProbFn,
    *,
    reward_model: ProbFn | None = None,
    **options: Unpack[EvaluateOptions],
) -> dict[str, Estimate]:
    """IPS, SNIPS and (with a reward model and a callable ``candidate_prob``) DR estimates, by method."""
    methods = [m for m in METHODS if m != "dr" or (reward_model is not None and callable(candidate_prob))]
    return {
        m: evaluate(logs, candidate_prob, reward_model=reward_model, method=m, **options)
        for m in methods
    }


@dataclass(frozen=True)
class SimulatedLogs:
    """Logs from a known world, with the candidate's true value.

    Attributes:
        logs: columns ``x, action, propensity, candidate_prob, booked, reward``.
        candidate_prob: π(frame.action | frame.x) of the candidate policy.
        reward_model: the true expected reward ``action × P(book | x, action)``.
        true_value: the candidate's exact expected reward per decision.
        logging_value: the logging policy's exact expected reward per decision.
    """

    logs: pd.DataFrame
    candidate_prob: ProbFn
    reward_model: ProbFn
    true_value: float
    logging_value: float


def _softmax_prob(x: np.ndarray, action: np.ndarray, prices: np.ndarray, tilt: float, centre: float) -> np.ndarray:
    idx = (prices - prices.mean()) / prices.std()
    logits = np.outer(tilt * x, idx) - centre * idx**2
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    column = np.searchsorted(prices, action)
    return probs[np.arange(len(x)), column]


def simulate_logs(
    n: int,
    *,
    seed: int = 0,
    prices: Sequence[float] = (80.0, 100.0, 120.0, 140.0, 160.0),
    logging_tilt: float = 0.3,
    candidate_tilt: float = 1.0,
) -> SimulatedLogs:
    """Decisions priced by a softmax logging policy; demand ``x ~ N(0, 1)``, logistic booking.

    The candidate is another softmax policy, steeper in ``x`` (raises prices when
    demand is high). True values are exact (Gauss-Hermite quadrature over ``x``).
    """
    grid = np.asarray(sorted(prices), dtype=np.float64)
    logging, candidate = _softmax_policy(grid, logging_tilt, 0.0), _softmax_policy(grid, candidate_tilt, 0.3)
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    all_probs = np.stack([logging(pd.DataFrame({"x": x, "action": p})) for p in grid], axis=1)
    choice = (rng.random(n)[:, None] > np.cumsum(all_probs, axis=1)).sum(axis=1).clip(max=len(grid) - 1)
    logs = pd.DataFrame({"x": x, "action": grid[choice], "propensity": all_probs[np.arange(n), choice]})
    logs["candidate_prob"] = candidate(logs)
    logs["booked"] = (rng.random(n) < _book_prob(x, logs["action"].to_numpy())).astype(np.int64)
    logs["reward"] = logs["booked"] * logs["action"]
    return SimulatedLogs(logs, candidate, _reward_model, _true_value(candidate, grid), _true_value(logging, grid))


def _book_prob(x: np.ndarray, price: np.ndarray) -> np.ndarray:
    """The simulated logs' booking probability: logistic in demand ``x`` and price."""
    return 1.0 / (1.0 + np.exp(-(1.0 + 0.8 * x - 0.03 * (price - 100.0))))


def _softmax_policy(grid: np.ndarray, tilt: float, centre: float) -> ProbFn:
    """A softmax pricing policy over ``grid``, tilted by demand (see :func:`_softmax_prob`)."""

    def prob(frame: pd.DataFrame) -> np.ndarray:
        x = frame["x"].to_numpy(dtype=np.float64)
        return _softmax_prob(x, frame["action"].to_numpy(dtype=np.float64), grid, tilt, centre)

    return prob


def _reward_model(frame: pd.DataFrame) -> np.ndarray:
    """The exact expected reward of each row's price (the simulated logs' true reward model)."""
    price = frame["action"].to_numpy(dtype=np.float64)
    return price * _book_prob(frame["x"].to_numpy(dtype=np.float64), price)


def _true_value(prob: ProbFn, grid: np.ndarray) -> float:
    """A policy's exact mean reward: Gauss-Hermite quadrature over ``x ~ N(0, 1)`` (80 nodes)."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    weights = weights / weights.sum()
    total = np.zeros(len(nodes))
    for price in grid:
        frame = pd.DataFrame({"x": nodes, "action": price})
        total += prob(frame) * _reward_model(frame)
    return float(weights @ total)
