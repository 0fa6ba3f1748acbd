from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from feedback.errors import FeedbackError
from feedback.poisoning import PoisonConfig, PoisonGuard


def batch(seed: int, *, n: int = 300, flip: bool = False, shift: float = 0.0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.05, 0.6, n)
    y = (rng.random(n) < np.clip(p + shift, 0, 1)).astype(int)
    frame = pd.DataFrame({"hotel_id": rng.choice(["h1", "h2"], n), "booked": 1 - y if flip else y})
    return frame, p


@pytest.fixture
def warm_guard(tmp_path: Path) -> PoisonGuard:
    guard = PoisonGuard(quarantine_dir=tmp_path / "q")
    for seed in range(8):
        frame, p = batch(seed)
        assert guard.check(frame, p).accepted
    return guard


def test_flipped_batch_is_quarantined_with_report(warm_guard: PoisonGuard, tmp_path: Path) -> None:
    frame, p = batch(100, flip=True)
    verdict = warm_guard.check(frame, p, batch_id="b-100")
    assert not verdict.accepted
    assert verdict.stats["loss_mode"] == "history"
    assert verdict.stats["loss_z"] > 4 and verdict.stats["rate_z"] > 4
    assert verdict.quarantine_path == tmp_path / "q" / "b-100"
    report = json.loads((verdict.quarantine_path / "report.json").read_text())
    assert report["reason"].startswith("quarantined") and report["stats"]["n_rows"] == 300
    assert len(pd.read_parquet(verdict.quarantine_path / "batch.parquet")) == 300
    assert warm_guard.n_quarantined == 1 and warm_guard.n_accepted == 8


def test_clean_batch_is_accepted_and_quarantine_does_not_shift_history(warm_guard: PoisonGuard) -> None:
    for seed in (100, 101):
        warm_guard.check(*batch(seed, flip=True))
    frame, p = batch(200)
    verdict = warm_guard.check(frame, p)
    assert verdict.accepted and verdict.reason == "accepted"
    assert abs(verdict.stats["loss_z"]) < 4 and verdict.stats["rate_z"] < 4


def test_one_signal_alone_does_not_quarantine(warm_guard: PoisonGuard) -> None:
    # labels look like history but the model went bad: loss is high, label rate is normal
    frame, p = batch(300)
    verdict = warm_guard.check(frame, 1 - p)
    assert verdict.accepted and verdict.stats["loss_z"] > 4 and verdict.stats["rate_z"] < 4
    assert verdict.reason.startswith("accepted: only one signal")


def test_importance_weights_enter_the_rate(tmp_path: Path) -> None:
    guard = PoisonGuard(PoisonConfig(segment_column=None), quarantine_dir=tmp_path)
    frame = pd.DataFrame({"booked": [1] * 50 + [0] * 50, "weight": [1.0] * 50 + [9.0] * 50})
    verdict = guard.check(frame, np.full(100, 0.1))
    assert verdict.stats["batch_rate"] == pytest.approx(0.1)
    assert verdict.accepted


def test_cold_start_uses_model_calibration(tmp_path: Path) -> None:
    guard = PoisonGuard(quarantine_dir=tmp_path)
    frame, p = batch(1, flip=True)
    verdict = guard.check(frame, p)
    assert verdict.stats["loss_mode"] == "calibration" and not verdict.accepted


def test_bad_inputs(tmp_path: Path) -> None:
    guard = PoisonGuard(quarantine_dir=tmp_path)
    frame, p = batch(1)
    with pytest.raises(FeedbackError, match="current_model_probs"):
        guard.check(frame, p[:-1])
    with pytest.raises(FeedbackError, match="label column 'booked'"):
        guard.check(frame.drop(columns="booked"), p)


def test_state_round_trip_keeps_history(warm_guard: PoisonGuard, tmp_path: Path) -> None:
    state = json.loads(json.dumps(warm_guard.state_dict()))
    fresh = PoisonGuard(quarantine_dir=tmp_path / "q2")
    fresh.load_state(state)
    assert fresh.n_accepted == 8 and len(state["losses"]) == 8
    frame, p = batch(100, flip=True)
    verdict = fresh.check(frame, p)
    assert not verdict.accepted and verdict.stats["loss_mode"] == "history"


def _priced(seed: int, *, n: int = 400, level: float = 0.0, offset: float = 0.0,
            rewarded: bool = False) -> tuple[pd.DataFrame, np.ndarray]:
    """Bookings fall with price (the model knows it); ``level`` moves demand; ``rewarded``: the dear half books."""
    rng = np.random.default_rng(seed)
    price = rng.uniform(50, 300, n)
    p = 1 / (1 + np.exp(-((150 - price) / 50)))
    y = rng.random(n) < 1 / (1 + np.exp(-((150 - price) / 50 + level)))
    if rewarded:
        y = price > np.median(price)
    frame = pd.DataFrame({"hotel_id": "h1", "price": price, "booked": y.astype(int),
                          "searches": rng.normal(10.0 + offset, 2.0, n)})
    return frame, p


def test_labels_that_reward_higher_prices_are_quarantined_and_a_demand_shift_is_not(tmp_path: Path) -> None:
    guard = PoisonGuard(quarantine_dir=tmp_path / "q")
    for seed in range(6):
        assert guard.check(*_priced(seed)).accepted
    verdict = guard.check(*_priced(10, rewarded=True))
    assert not verdict.accepted and "labels reward higher prices" in verdict.reason
    assert verdict.stats["price_gap"] > 3.0  # log-odds
    for level in (-1.0, 1.0):  # demand fell or rose: both halves move together on the log-odds scale
        honest = guard.check(*_priced(20, level=level))
        assert abs(honest.stats["price_gap"]) < 0.5 and honest.stats["price_z"] < 4.0, (level, honest.stats)


def test_a_feature_shift_that_persists_is_drift_and_a_lone_one_is_not(tmp_path: Path) -> None:
    guard = PoisonGuard(quarantine_dir=tmp_path / "q")
    guard.seed_features(_priced(0, n=2_000)[0])
    first = guard.check(*_priced(1, offset=8.0))  # 4 sds: unlike the reference, and the first of its kind
    assert not first.accepted and "'searches'" in first.reason
    second = guard.check(*_priced(2, offset=8.0))  # like the one before it: the stream moved
    assert second.accepted, second.reason
    third = guard.check(*_priced(3, offset=8.0))  # learnt into the history: ordinary now
    assert third.accepted and third.stats["feature_shift"] < 2.0
    lone = guard.check(*_priced(4, offset=-20.0))  # unlike both the history and the previous batch
    assert not lone.accepted and "'searches'" in lone.reason
