"""The sequential net-value gate on simulated outcomes: power, error rate over repeated looks, harm.

Outcomes are per-request values as the rollout sees them: a booking (Bernoulli) times the price
net of the room's value. Each trial feeds batches to one :class:`SequentialTest` and looks after
every batch, as ``pricestream rollout advance`` does; all randomness is seeded.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from delivery import DeliveryConfig, Evidence, GateLimits, Stage
from delivery.controller import RolloutController
from delivery.sequential import Moments, SequentialConfig, SequentialTest, compare

ALPHA = 0.05
CONFIG = SequentialConfig(alpha=ALPHA, min_outcomes=500)
BOOKING_RATE = 0.3
LOOKS = 40
BATCH = 500  # outcomes per arm between two looks


def _values(rng: np.random.Generator, n: int, lift: float) -> np.ndarray:
    """Net value per request: booked x (price - room value); ``lift`` scales the booking rate."""
    price = 120.0 * np.exp(rng.normal(0.0, 0.3, n))
    room_value = 0.4 * price * rng.uniform(0.0, 1.0, n)
    return (rng.random(n) < BOOKING_RATE * (1.0 + lift)) * (price - room_value)


def _trial(rng: np.random.Generator, lift: float, *, looks: int = LOOKS) -> tuple[str, int]:
    """(final verdict, looks taken) of one trial that stops at the first decision."""
    test = SequentialTest(CONFIG)
    for look in range(1, looks + 1):
        verdict = test.update(_values(rng, BATCH, 0.0), _values(rng, BATCH, lift)).verdict
        if verdict != "wait":
            return verdict, look
    return "wait", looks


def _verdicts(lift: float, trials: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [_trial(rng, lift)[0] for _ in range(trials)]


def test_a_known_effect_is_detected_early() -> None:
    rng = np.random.default_rng(11)
    outcomes = [_trial(rng, 0.15) for _ in range(30)]
    assert all(verdict == "promote" for verdict, _ in outcomes)
    assert max(look for _, look in outcomes) < LOOKS  # it stops early, not at the horizon


def test_the_confidence_sequence_covers_the_true_effect() -> None:
    rng = np.random.default_rng(12)
    inc, cand = _values(rng, 40_000, 0.0), _values(rng, 40_000, 0.1)
    truth = _values(np.random.default_rng(0), 2_000_000, 0.1).mean() - _values(
        np.random.default_rng(1), 2_000_000, 0.0).mean()
    d = compare(inc, cand, config=CONFIG)
    assert d.lower < truth < d.upper
    assert d.verdict == "promote" and 0.05 < d.relative < 0.15


def test_a_null_effect_rejects_at_most_alpha_over_repeated_looks() -> None:
    verdicts = _verdicts(0.0, trials=300, seed=21)
    wrong = sum(v in ("promote", "abort") for v in verdicts)
    assert wrong / len(verdicts) <= ALPHA
    # a fixed-level z test looked at after every batch would be wrong far more often: the contrast
    # that makes the mixture worth it (same seed, same data)
    rng = np.random.default_rng(21)
    naive = 0
    for _ in range(300):
        inc, cand = Moments(), Moments()
        for _ in range(LOOKS):
            inc = inc.merge(Moments.of(_values(rng, BATCH, 0.0)))
            cand = cand.merge(Moments.of(_values(rng, BATCH, 0.0)))
            z = (cand.mean - inc.mean) / np.sqrt(inc.var / inc.n + cand.var / cand.n)
            if abs(z) > 1.96:
                naive += 1
                break
    assert naive / 300 > 2 * ALPHA


def test_a_three_percent_worse_candidate_is_promoted_in_at_most_one_percent() -> None:
    verdicts = _verdicts(-0.03, trials=250, seed=31)
    assert sum(v == "promote" for v in verdicts) / len(verdicts) <= 0.01
    assert sum(v == "abort" for v in verdicts) > 0  # the test does see it: it is not just never deciding


def test_inconclusive_after_max_outcomes_keeps_the_incumbent() -> None:
    rng = np.random.default_rng(41)
    d = compare(_values(rng, 3_000, 0.0), _values(rng, 3_000, 0.0),
                config=SequentialConfig(min_outcomes=500, max_outcomes=3_000))
    assert d.verdict == "inconclusive" and "the incumbent stays" in d.reason


def test_moments_merge_equals_the_whole_sample() -> None:
    rng = np.random.default_rng(5)
    x = rng.normal(3.0, 2.0, 1_001)
    merged = Moments.of(x[:400]).merge(Moments.of(x[400:]))
    assert merged.n == 1_001
    assert merged.mean == pytest.approx(x.mean()) and merged.var == pytest.approx(x.var(ddof=1))


def _evidence(rng: np.random.Generator, n: int, lift: float) -> Evidence:
    prices = rng.uniform(80, 200, 200)
    return Evidence(incumbent_prices=prices, candidate_prices=prices, candidate_latency_ms=np.full(200, 2.0),
                    incumbent_net=_values(rng, n, 0.0), candidate_net=_values(rng, n, lift))


def test_the_controller_waits_then_promotes_on_cumulative_evidence(tmp_path: Path) -> None:
    limits = GateLimits(sequential=CONFIG)
    ctl = RolloutController(DeliveryConfig(state_path=tmp_path / "rollout.json", limits=limits))
    ctl.start("v2", incumbent_version="v1")
    rng = np.random.default_rng(51)
    assert ctl.advance(_evidence(rng, 100, 0.2)).stage == Stage.CANARY
    waiting = ctl.advance(_evidence(rng, 200, 0.2))
    assert waiting.waiting and ctl.status().stage == Stage.CANARY and "gathering evidence" in waiting.message
    moved = ctl.advance(_evidence(rng, 20_000, 0.2))
    assert moved.advanced and moved.stage == Stage.BLEND and "candidate better" in moved.message


def test_the_controller_aborts_a_worse_candidate(tmp_path: Path) -> None:
    ctl = RolloutController(DeliveryConfig(state_path=tmp_path / "rollout.json",
                                           limits=GateLimits(sequential=CONFIG)))
    ctl.start("v2", incumbent_version="v1")
    rng = np.random.default_rng(52)
    ctl.advance(_evidence(rng, 100, 0.0))
    result = ctl.advance(_evidence(rng, 20_000, -0.2))
    assert result.stage == Stage.ABORTED and "candidate worse" in ctl.status().history[-1].reason
