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
