from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from feedback.monitors.errors import MonitorInputError
from feedback.offpolicy import Estimate, evaluate, evaluate_all, simulate_logs

SIM = simulate_logs(4000, seed=3)


def test_truth_differs_from_logging_value_so_the_check_has_teeth() -> None:
    assert SIM.true_value - SIM.logging_value > 1.5
    assert set(SIM.logs["action"].unique()) == {80.0, 100.0, 120.0, 140.0, 160.0}


@pytest.mark.parametrize("method", ["ips", "snips", "dr"])
def test_known_policy_lands_within_its_bootstrap_interval(method: str) -> None:
    est = evaluate(SIM.logs, SIM.candidate_prob, reward_model=SIM.reward_model, method=method, n_boot=400)  # type: ignore[arg-type]
    assert isinstance(est, Estimate) and est.method == method and est.n == 4000
    assert est.ci_low < est.value < est.ci_high
    assert est.covers(SIM.true_value)
    assert est.ci_high - est.ci_low < 8.0  # informative: the reward scale is 0..160


def test_truth_within_interval_in_most_of_twenty_seeded_repetitions() -> None:
    covered = {"ips": 0, "snips": 0, "dr": 0}
    for seed in range(20):
        sim = simulate_logs(2000, seed=100 + seed)

        def biased(frame: pd.DataFrame, sim=sim) -> np.ndarray:  # DR must survive a wrong model
            return 0.8 * sim.reward_model(frame) + 5.0

        for method, est in evaluate_all(sim.logs, sim.candidate_prob, reward_model=biased, ci="normal").items():
            covered[method] += est.covers(sim.true_value)
    assert min(covered.values()) >= 16, covered


def test_logging_policy_evaluated_on_its_own_logs_is_the_mean_reward() -> None:
    est = evaluate(SIM.logs, "propensity", method="ips", ci="normal")
    assert est.value == pytest.approx(SIM.logs["reward"].mean())
    snips = evaluate(SIM.logs, "propensity", ci="normal")
    assert snips.method == "snips" and snips.value == pytest.approx(SIM.logs["reward"].mean())


def test_good_reward_model_narrows_the_interval_and_bootstrap_is_seeded() -> None:
    ips = evaluate(SIM.logs, "candidate_prob", method="ips", n_boot=300, seed=7)
    dr = evaluate(SIM.logs, SIM.candidate_prob, reward_model=SIM.reward_model, n_boot=300, seed=7)
    # booking noise (revenue is price × 0/1) dominates, so the gain is real but modest
    assert dr.ci_high - dr.ci_low < 0.95 * (ips.ci_high - ips.ci_low)
    again = evaluate(SIM.logs, "candidate_prob", method="ips", n_boot=300, seed=7)
    assert (again.ci_low, again.ci_high) == (ips.ci_low, ips.ci_high)


def test_bad_inputs_are_named() -> None:
    logs = SIM.logs.head(50).copy()
    logs.loc[3, "propensity"] = 0.0
    with pytest.raises(MonitorInputError, match="propensity"):
        evaluate(logs, "candidate_prob")
    with pytest.raises(MonitorInputError, match="reward_model"):
        evaluate(SIM.logs, "candidate_prob", method="dr")
    with pytest.raises(MonitorInputError, match="'revenue'"):
        evaluate(SIM.logs, "candidate_prob", reward_col="revenue")


def _priced_logs(n: int, seed: int) -> tuple[pd.DataFrame, float]:
    """Logged prices drawn among 5 arms (propensity 0.2), a deterministic candidate, the truth's value."""
    rng = np.random.default_rng(seed)
    arms = np.array([80.0, 100.0, 120.0, 140.0, 160.0])
    x = rng.uniform(0, 1, n)

    def prob(price: np.ndarray, ctx: np.ndarray) -> np.ndarray:
        return 1 / (1 + np.exp(-(2.0 + ctx - price / 50.0)))

    logged = arms[rng.integers(0, 5, n)]
    candidate = np.where(x > 0.5, 140.0, 100.0)
    booked = rng.random(n) < prob(logged, x)
    frame = pd.DataFrame({"propensity": 0.2, "reward": booked * logged,
                          "matched": (logged == candidate).astype(float),
                          "direct": candidate * prob(candidate, x) * 1.1,  # a reward model 10% off
                          "logged_hat": logged * prob(logged, x) * 1.1})
    return frame, float(np.mean(candidate * prob(candidate, x)))


def test_the_deterministic_doubly_robust_estimate_corrects_a_biased_model_and_covers_the_truth() -> None:
    from feedback.offpolicy import evaluate_deterministic_dr

    covered = 0
    for seed in range(20):
        frame, truth = _priced_logs(4000, seed)
        est = evaluate_deterministic_dr(frame, matched_col="matched", direct_col="direct",
                                        logged_hat_col="logged_hat", n_boot=300, seed=seed)
        covered += est.covers(truth)
        assert abs(est.value - truth) < abs(frame["direct"].mean() - truth)  # better than the model alone
        assert 700 < est.ess < 900 and est.trusted  # about a fifth of the decisions match
    assert covered >= 17  # nominal 95% of 20


def test_an_estimate_from_few_matched_decisions_is_flagged_untrusted() -> None:
    from feedback.offpolicy import MIN_ESS, evaluate_deterministic_dr

    frame, _ = _priced_logs(400, 0)
    frame["matched"] = 0.0
    frame.loc[:9, "matched"] = 1.0
    est = evaluate_deterministic_dr(frame, matched_col="matched", direct_col="direct", logged_hat_col="logged_hat",
                                    n_boot=100)
    assert est.ess == 10.0 < MIN_ESS and not est.trusted
