"""bench/promotion_power.py: the ceiling's formulas against their own simulation, on a small seeded pool."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # the bench's modules import each other bare
import promotion_power as pp  # noqa: E402


def _pool(n: int = 2_000) -> np.ndarray:
    rng = np.random.default_rng(4)
    return np.column_stack([rng.uniform(0.02, 0.3, n), rng.uniform(-20.0, 300.0, n)])


def test_moments_are_those_of_the_simulated_outcomes() -> None:
    pool = _pool()
    m = pp.moments(pool)
    _, y, _ = pp.draw(np.random.default_rng(5), pool, 400_000, 0.0, 0.5)
    assert y.mean() == pytest.approx(m["mu"], rel=0.02)
    assert y.var() == pytest.approx(m["var"], rel=0.02)
    assert 0.0 < m["within"] < m["var"]


def test_the_decisions_needed_give_the_power_goal_and_simulation_agrees() -> None:
    pool = _pool()
    m = pp.moments(pool)
    delta = 0.2 * m["mu"]  # a large effect keeps the simulation small
    needed = pp.oracle_needed(delta, m["var"])
    assert pp.oracle_power(delta, m["var"], needed) == pytest.approx(pp.POWER_GOAL)
    assert pp.oracle_power(delta, m["var"], needed / 4) < 0.5  # a quarter of the traffic: half the z
    simulated = pp.simulated_oracle_power(np.random.default_rng(6), pool, m, int(needed), 300, lift=0.2)
    assert simulated == pytest.approx(pp.POWER_GOAL, abs=0.06)


def test_the_covariate_is_the_value_times_a_noisy_probability() -> None:
    pool = _pool()
    exact = pp.covariate(pool, 0.0, 1)
    assert exact == pytest.approx(pool[:, 0] * pool[:, 1])
    noisy = pp.covariate(pool, 0.5, 1)
    assert np.corrcoef(noisy, exact)[0, 1] > 0.8 and not np.allclose(noisy, exact)
