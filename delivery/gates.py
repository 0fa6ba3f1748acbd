"""Promotion gates: checks on model quality (not only latency) between rollout stages.

=====================  ===============================================================  ===============
gate                   observed                                                         passes when
=====================  ===============================================================  ===============
``flip_rate``          share of identical inputs priced more than ``flip_threshold``    <= limit
                       apart by candidate and incumbent (paired, e.g. from shadow)
``price_ks``           two-sample Kolmogorov-Smirnov statistic of the two price lists   <= limit
``price_mean_shift``   ``|mean((candidate - incumbent) / incumbent)|`` (paired)         <= limit
``net_value``          per request, candidate minus incumbent: revenue net of the       CS > 0 (waits
                       rooms' value (``*_net``), or revenue where no bid price was      while the CS
                       logged; a mixture SPRT (:mod:`delivery.sequential`) whose        spans 0)
                       confidence sequence (CS) holds at every look, regression
                       adjusted on ``*_covariate`` when the evidence has them
``p99_latency``        candidate p99 latency in ms                                      <= limit
=====================  ===============================================================  ===============

A price or latency gate without enough evidence fails: no evidence is not good evidence. The
``net_value`` gate decides after every batch with an error rate ``alpha`` that holds over all
looks together: it passes on strong evidence that the candidate is better, fails on evidence that
it is worse, and otherwise *waits* (``GateResult.waiting``): the rollout stays where it is and
keeps collecting (below ``min_outcomes`` per arm it always waits).

Example:
    >>> inc = [100.0] * 100
    >>> cand = [100.0] * 80 + [110.0] * 20
    >>> r = flip_rate_gate(inc, cand, limits=GateLimits())
    >>> r.passed, r.observed
    (False, 0.2)
    >>> r.message
    "gate 'flip_rate' failed: observed 0.2 > limit 0.1 (over by 0.1, +100.0%)"
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import BaseModel, ConfigDict, Field
from scipy import stats

from delivery.sequential import SequentialConfig, SequentialDecision, compare
from routing.errors import RoutingInputError


class GateLimits(BaseModel):
    """Limits of the promotion gates (defaults are conservative starting points)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    flip_threshold: float = Field(default=0.01, gt=0.0)
    max_flip_rate: float = Field(default=0.10, ge=0.0, le=1.0)
    max_ks: float = Field(default=0.10, ge=0.0, le=1.0)
    max_mean_shift: float = Field(default=0.03, ge=0.0)
    sequential: SequentialConfig = SequentialConfig()
    max_p99_latency_ms: float = Field(default=50.0, gt=0.0)
    min_samples: int = Field(default=30, ge=1)


class GateResult(BaseModel):
    """Outcome of one gate; ``message`` names the gate and by how much it missed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    passed: bool
    gate: str
    observed: float
    limit: float
    message: str
    waiting: bool = False
    """The gate has not decided yet (the sequential gate while its confidence sequence spans 0)."""


@dataclass(frozen=True)
class Evidence:
    """What a stage collected. Paired arrays (same inputs) come from shadow scoring; outcome
    arrays (one value per request served by that arm, everything the stage collected so far) from
    canary and blend traffic; ``*_net`` is revenue net of the rooms' value (bid price x rooms)."""

    incumbent_prices: ArrayLike | None = None
    candidate_prices: ArrayLike | None = None
    incumbent_booked: ArrayLike | None = None
    candidate_booked: ArrayLike | None = None
    incumbent_revenue: ArrayLike | None = None
    candidate_revenue: ArrayLike | None = None
    incumbent_net: ArrayLike | None = None
    candidate_net: ArrayLike | None = None
    candidate_latency_ms: ArrayLike | None = None
    incumbent_covariate: ArrayLike | None = None
    """Per ``incumbent_net`` outcome, the incumbent's expected net value of that request (its predicted booking
    probability x (price - bid price)), known before the outcome: the sequential gate adjusts for it (CUPED)."""
    candidate_covariate: ArrayLike | None = None
    """Per ``candidate_net`` outcome, the same *incumbent's* expectation (from its shadow pricing of the request)."""


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _result(gate: str, observed: float, limit: float, *, at_most: bool) -> GateResult:
    passed = observed <= limit if at_most else observed >= limit
    if passed:
        sign = "<=" if at_most else ">="
        return GateResult(
            passed=True,
            gate=gate,
            observed=observed,
            limit=limit,
            message=f"gate {gate!r} passed: observed {_fmt(observed)} {sign} limit {_fmt(limit)}",
        )
    gap = abs(observed - limit)
    rel = f", {'+' if at_most else '-'}{100 * gap / abs(limit):.1f}%" if limit else ""
    words = ("over", ">") if at_most else ("short", "<")
    message = (
        f"gate {gate!r} failed: observed {_fmt(observed)} {words[1]} limit {_fmt(limit)} "
        f"({words[0]} by {_fmt(gap)}{rel})"
    )
    return GateResult(passed=False, gate=gate, observed=observed, limit=limit, message=message)


def _no_evidence(gate: str, limit: float, need: str) -> GateResult:
    return GateResult(
        passed=False, gate=gate, observed=math.nan, limit=limit, message=f"gate {gate!r} failed: no evidence ({need})"
    )


def _array(name: str, values: ArrayLike) -> NDArray[Any]:
    arr = np.asarray(values, dtype=float).ravel()
    if not np.all(np.isfinite(arr)):
        raise RoutingInputError(field=name, value=arr[~np.isfinite(arr)][:3].tolist(), expected="finite numbers")
    return arr


def _paired(incumbent: ArrayLike, candidate: ArrayLike) -> tuple[NDArray[Any], NDArray[Any]]:
    inc, cand = _array("incumbent_prices", incumbent), _array("candidate_prices", candidate)
    if inc.size != cand.size or np.any(inc <= 0):
        raise RoutingInputError(
            field="incumbent_prices", value=f"{inc.size} values", expected=f"{cand.size} prices > 0 (paired)"
        )
    return inc, cand


def flip_rate_gate(incumbent: ArrayLike, candidate: ArrayLike, *, limits: GateLimits) -> GateResult:
    """Share of paired inputs whose prices differ by more than ``flip_threshold`` (relative)."""
    inc, cand = _paired(incumbent, candidate)
    if inc.size < limits.min_samples:
        return _no_evidence("flip_rate", limits.max_flip_rate, f"{inc.size} < {limits.min_samples} paired prices")
    rate = float(np.mean(np.abs(cand - inc) / inc > limits.flip_threshold))
    return _result("flip_rate", rate, limits.max_flip_rate, at_most=True)


def price_ks_gate(incumbent: ArrayLike, candidate: ArrayLike, *, limits: GateLimits) -> GateResult:
    """Kolmogorov-Smirnov distance between the two price distributions."""
    inc, cand = _array("incumbent_prices", incumbent), _array("candidate_prices", candidate)
    if min(inc.size, cand.size) < limits.min_samples:
        return _no_evidence("price_ks", limits.max_ks, f"fewer than {limits.min_samples} prices per arm")
    statistic = float(stats.ks_2samp(inc, cand, method="asymp").statistic)
    return _result("price_ks", statistic, limits.max_ks, at_most=True)


def price_mean_shift_gate(incumbent: ArrayLike, candidate: ArrayLike, *, limits: GateLimits) -> GateResult:
    """Absolute mean relative price difference on paired inputs."""
    inc, cand = _paired(incumbent, candidate)
    if inc.size < limits.min_samples:
        return _no_evidence("price_mean_shift", limits.max_mean_shift, f"{inc.size} paired prices")
    shift = float(abs(np.mean((cand - inc) / inc)))
    return _result("price_mean_shift", shift, limits.max_mean_shift, at_most=True)


def net_value_gate(incumbent: ArrayLike, candidate: ArrayLike, *, limits: GateLimits,
                   measure: str = "net value",
                   covariates: tuple[ArrayLike, ArrayLike] | None = None) -> GateResult:
    """The sequential test of the candidate's value per request against the incumbent's.

    Passes on ``promote``, fails on ``abort`` and ``inconclusive``, waits otherwise. ``observed`` is
    the lower end of the confidence sequence for the effect (candidate minus incumbent), ``limit`` 0.
    ``covariates`` (one per outcome of each arm, not depending on the arm that served: see
    :class:`delivery.sequential.CoMoments`) make it a regression-adjusted test.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(3)
        >>> inc, cand = rng.normal(10.0, 4.0, 30_000), rng.normal(9.7, 4.0, 30_000)
        >>> r = net_value_gate(inc, cand, limits=GateLimits())
        >>> r.passed, r.waiting, r.message.split(":")[0]
        (False, False, "gate 'net_value' failed on net value per request")
    """
    pair = None if covariates is None else (_array("incumbent_covariate", covariates[0]),
                                            _array("candidate_covariate", covariates[1]))
    decision = compare(_array(f"incumbent {measure}", incumbent), _array(f"candidate {measure}", candidate),
                       config=limits.sequential, covariates=pair)
    return sequential_result(decision, measure=measure)


def sequential_result(decision: SequentialDecision, *, measure: str = "net value") -> GateResult:
    """A :class:`GateResult` of one look of the sequential test."""
    passed, waiting = decision.verdict == "promote", decision.verdict == "wait"
    state = "passed" if passed else "waiting" if waiting else "failed"
    return GateResult(passed=passed, gate="net_value", observed=decision.lower, limit=0.0, waiting=waiting,
                      message=f"gate 'net_value' {state} on {measure} per request: {decision.reason}")


def latency_gate(latencies_ms: ArrayLike, *, limits: GateLimits) -> GateResult:
    """Candidate p99 latency against ``max_p99_latency_ms``."""
    lat = _array("candidate_latency_ms", latencies_ms)
    if lat.size < limits.min_samples:
        return _no_evidence("p99_latency", limits.max_p99_latency_ms, f"{lat.size} latencies")
    return _result("p99_latency", float(np.percentile(lat, 99)), limits.max_p99_latency_ms, at_most=True)


def evaluate_gates(evidence: Evidence, *, limits: GateLimits, outcomes: bool) -> list[GateResult]:
    """Run the price and latency gates, and with ``outcomes`` also the sequential ``net_value`` gate.

    Shadow has no outcomes (the candidate's prices were never shown), so leaving shadow runs
    ``outcomes=False``; leaving canary or blend runs all five.
    """
    e = evidence
    results: list[GateResult] = []
    if e.incumbent_prices is None or e.candidate_prices is None:
        need = "incumbent_prices and candidate_prices"
        results += [
            _no_evidence("flip_rate", limits.max_flip_rate, need),
            _no_evidence("price_ks", limits.max_ks, need),
            _no_evidence("price_mean_shift", limits.max_mean_shift, need),
        ]
    else:
        for gate in (flip_rate_gate, price_ks_gate, price_mean_shift_gate):
            results.append(gate(e.incumbent_prices, e.candidate_prices, limits=limits))
    if outcomes:
        results.append(_outcome_gate(e, limits))
    if e.candidate_latency_ms is None:
        results.append(_no_evidence("p99_latency", limits.max_p99_latency_ms, "candidate_latency_ms"))
    else:
        results.append(latency_gate(e.candidate_latency_ms, limits=limits))
    return results


def _outcome_gate(e: Evidence, limits: GateLimits) -> GateResult:
    """``net_value`` on net value where both arms have it, else on revenue per request."""
    if e.incumbent_net is not None and e.candidate_net is not None:
        covariates = None
        if e.incumbent_covariate is not None and e.candidate_covariate is not None:
            covariates = (e.incumbent_covariate, e.candidate_covariate)
        return net_value_gate(e.incumbent_net, e.candidate_net, limits=limits, measure="net value",
                              covariates=covariates)
    if e.incumbent_revenue is not None and e.candidate_revenue is not None:
        return net_value_gate(e.incumbent_revenue, e.candidate_revenue, limits=limits, measure="revenue")
    return _no_evidence("net_value", 0.0, "incumbent and candidate outcomes (net value or revenue per request)")
