from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from delivery.bandit import ThompsonBlend
from routing.errors import RoutingInputError


def _play(blend: ThompsonBlend, rates: dict[str, float], n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for i in range(n):
        for arm, rate in rates.items():
            decision = f"{arm}-{i}"
            blend.record_decision(decision, arm)  # type: ignore[arg-type]
            blend.reward(decision, float(rng.uniform() < rate))


def test_clearly_better_candidate_gains_weight() -> None:
    blend = ThompsonBlend(seed=3, min_weight=0.05)
    before = blend.weights()["candidate"]
    _play(blend, {"candidate": 0.40, "incumbent": 0.25}, 400, seed=1)
    after = blend.weights(at=datetime(2026, 5, 1, tzinfo=UTC))
    assert before == pytest.approx(0.5, abs=0.05)
    assert after["candidate"] == 0.95 and after["incumbent"] == pytest.approx(0.05)
    change = blend.history[-1]
    assert change.candidate_weight == 0.95 and "P(candidate better)" in change.reason


def test_clearly_worse_candidate_loses_weight() -> None:
    blend = ThompsonBlend(seed=3, min_weight=0.1)
    _play(blend, {"candidate": 0.10, "incumbent": 0.30}, 400, seed=2)
    assert blend.weights(reason="hourly")["candidate"] == 0.1
    assert blend.history[-1].reason.startswith("hourly; thompson")


def test_delayed_rewards_go_to_the_recorded_arm() -> None:
    blend = ThompsonBlend(seed=0)
    blend.record_decision("a", "candidate")
    blend.record_decision("b", "incumbent")
    blend.record_decision("c", "candidate")
    assert blend.pending == 3
    # rewards arrive out of order, long after other decisions
    assert blend.reward("c", 1.0) is True
    assert blend.reward("b", 0.0) is True
    assert blend.reward("a", 0.25) is True
    assert blend.posterior == {"candidate": (2.25, 1.75), "incumbent": (1.0, 2.0)}
    assert blend.pending == 0 and blend.rewarded == 3


def test_unknown_and_repeated_rewards_are_counted_not_raised() -> None:
    blend = ThompsonBlend()
    blend.record_decision("a", "candidate")
    assert blend.reward("a", 1.0) is True
    assert blend.reward("a", 1.0) is False
    assert blend.reward("zzz", 0.0) is False
    assert blend.unknown_rewards == 2
    assert blend.posterior["candidate"] == (2.0, 1.0)


def test_pending_is_bounded_and_evictions_counted() -> None:
    blend = ThompsonBlend(max_pending=2)
    for d in ("a", "b", "c"):
        blend.record_decision(d, "incumbent")
    assert blend.pending == 2 and blend.expired == 1
    assert blend.reward("a", 1.0) is False


def test_weights_are_reproducible_with_a_seed() -> None:
    def run() -> float:
        blend = ThompsonBlend(seed=11, n_samples=500)
        _play(blend, {"candidate": 0.3, "incumbent": 0.28}, 50, seed=4)
        return blend.weights()["candidate"]

    first = run()
    assert first == run()
    assert 0.05 <= first <= 0.95


def test_bad_values_name_the_field() -> None:
    blend = ThompsonBlend()
    with pytest.raises(RoutingInputError, match="value"):
        blend.reward("a", 1.5)
    with pytest.raises(RoutingInputError, match="arm"):
        blend.record_decision("a", "control")  # type: ignore[arg-type]
    with pytest.raises(RoutingInputError, match="min_weight"):
        ThompsonBlend(min_weight=0.6)
