"""The regression-adjusted (CUPED) and non-inferiority forms of the sequential gate, by simulation.

Requests differ in their expected value (a covariate the rollout logs: the incumbent's expected net value);
the booking draw adds the noise. Each trial looks after every batch; all randomness is seeded.
"""

from __future__ import annotations

import numpy as np
import pytest

from delivery.gates import Evidence, GateLimits, evaluate_gates, net_value_gate
from delivery.live import live_evidence
from delivery.sequential import CoMoments, Moments, SequentialConfig, decide

ALPHA = 0.05
CONFIG = SequentialConfig(alpha=ALPHA, min_outcomes=300, mixture_sd=0.05)
LOOKS, BATCH = 30, 300


def _requests(rng: np.random.Generator, n: int, lift: float) -> tuple[np.ndarray, np.ndarray]:
    """(net value, the request's expected value under the incumbent): the requests differ a lot (a booking
    probability from 0.05 to 0.95), so the covariate explains a good share of the variance."""
    p = rng.uniform(0.05, 0.95, n)
    worth = rng.uniform(50.0, 150.0, n)
    booked = rng.random(n) < np.minimum(p * (1.0 + lift), 1.0)
    return booked * worth, p * worth


def _trial(rng: np.random.Generator, lift: float, *, adjusted: bool,
           config: SequentialConfig = CONFIG) -> tuple[str, int]:
    inc: Moments | CoMoments = CoMoments() if adjusted else Moments()
    cand = inc
    for look in range(1, LOOKS + 1):
        (yi, xi), (yc, xc) = _requests(rng, BATCH, 0.0), _requests(rng, BATCH, lift)
        if adjusted:
            inc, cand = inc.merge(CoMoments.of(yi, xi)), cand.merge(CoMoments.of(yc, xc))  # type: ignore[arg-type]
        else:
            inc, cand = inc.merge(Moments.of(yi)), cand.merge(Moments.of(yc))  # type: ignore[arg-type]
        verdict = decide(inc, cand, config=config).verdict
        if verdict != "wait":
            return verdict, look
    return "wait", LOOKS


def test_comoments_merge_equals_the_whole_sample() -> None:
    rng = np.random.default_rng(3)
    y, x = _requests(rng, 1_001, 0.0)
    whole, merged = CoMoments.of(y, x), CoMoments.of(y[:377], x[:377]).merge(CoMoments.of(y[377:], x[377:]))
    for name in ("n", "mean", "x_mean", "m2", "sxx", "sxy"):
        assert getattr(merged, name) == pytest.approx(getattr(whole, name))
    assert whole.sxy / whole.sxx == pytest.approx(np.polyfit(x, y, 1)[0])


def test_adjusted_null_rejects_at_most_alpha_over_repeated_looks() -> None:
    rng = np.random.default_rng(61)
    verdicts = [_trial(rng, 0.0, adjusted=True)[0] for _ in range(300)]
    assert sum(v != "wait" for v in verdicts) / len(verdicts) <= ALPHA


def test_adjustment_decides_a_real_effect_sooner_on_the_same_kind_of_data() -> None:
    plain = [_trial(np.random.default_rng([62, i]), 0.06, adjusted=False) for i in range(60)]
    adjusted = [_trial(np.random.default_rng([62, i]), 0.06, adjusted=True) for i in range(60)]
    assert all(v != "abort" for v, _ in plain + adjusted)
    looks_plain, looks_adjusted = np.mean([n for _, n in plain]), np.mean([n for _, n in adjusted])
    assert looks_adjusted < 0.8 * looks_plain  # R^2 of the covariate is about 0.25 here
    assert sum(v == "promote" for v, _ in adjusted) >= sum(v == "promote" for v, _ in plain)


def test_non_inferiority_promotes_an_equal_candidate_and_rarely_a_worse_one() -> None:
    config = SequentialConfig(alpha=ALPHA, min_outcomes=300, mixture_sd=0.05, margin=0.1)
    equal = [_trial(np.random.default_rng([63, i]), 0.0, adjusted=True, config=config)[0] for i in range(100)]
    worse = [_trial(np.random.default_rng([64, i]), -0.1, adjusted=True, config=config)[0] for i in range(200)]
    assert sum(v == "promote" for v in equal) >= 50
    assert sum(v == "promote" for v in worse) / len(worse) <= ALPHA / 2


def test_the_gate_adjusts_when_the_evidence_has_covariates() -> None:
    rng = np.random.default_rng(65)
    (yi, xi), (yc, xc) = _requests(rng, 20_000, 0.0), _requests(rng, 20_000, 0.04)
    limits = GateLimits(sequential=CONFIG)
    plain = net_value_gate(yi, yc, limits=limits)
    adjusted = net_value_gate(yi, yc, limits=limits, covariates=(xi, xc))
    assert "adjusted for the covariate" in adjusted.message and "adjusted" not in plain.message
    plain_width = float(plain.message.split("[")[1].split(",")[1].rstrip("]")) - plain.observed
    adjusted_width = float(adjusted.message.split("[")[1].split(",")[1].split("]")[0]) - adjusted.observed
    assert adjusted_width < 0.9 * plain_width
    prices = np.full(100, 100.0)
    evidence = Evidence(incumbent_prices=prices, candidate_prices=prices, candidate_latency_ms=np.full(100, 2.0),
                        incumbent_net=yi, candidate_net=yc, incumbent_covariate=xi, candidate_covariate=xc)
    by_gate = {r.gate: r for r in evaluate_gates(evidence, limits=limits, outcomes=True)}
    assert by_gate["net_value"].message == adjusted.message


def test_a_covariate_per_outcome_is_required() -> None:
    with pytest.raises(ValueError, match="covariate"):
        CoMoments.of([1.0, 2.0], [1.0])


def _decision(request: str, decision: str, arm: str, price: float, prob: float | None) -> dict[str, object]:
    return {"request_id": request, "decision_id": decision, "arm": arm, "price": price, "latency_ms": 1.0,
            "bid_price": 60.0, "expected_booking_prob": prob}


def test_live_evidence_takes_the_incumbents_expectation_for_both_arms() -> None:
    decisions = [_decision("r1", "d1", "incumbent", 100.0, 0.2), _decision("r1", "s1", "candidate-shadow", 110.0, 0.1),
                 _decision("r2", "d2", "candidate", 120.0, 0.5), _decision("r2", "s2", "incumbent-shadow", 90.0, 0.3)]
    labels = [{"decision_id": "d1", "label": 1, "price": 100.0}, {"decision_id": "d2", "label": 0, "price": 120.0}]
    e = live_evidence(decisions, labels)
    assert np.asarray(e.incumbent_net).tolist() == [40.0] and np.asarray(e.candidate_net).tolist() == [0.0]
    # both from the incumbent's pricing: 0.2 x (100 - 60) served, 0.3 x (90 - 60) from its shadow of r2
    assert np.asarray(e.incumbent_covariate) == pytest.approx([8.0])
    assert np.asarray(e.candidate_covariate) == pytest.approx([9.0])
    missing = live_evidence(decisions[:3], labels)  # r2's incumbent shadow was dropped
    assert missing.incumbent_covariate is None and missing.candidate_covariate is None
    assert np.asarray(missing.candidate_net).tolist() == [0.0]
