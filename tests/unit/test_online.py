from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from feedback.errors import FeedbackConfigError, FeedbackError
from feedback.online import OnlineDemandModel, OnlineModelConfig


def toy(n: int, *, seed: int, flipped: bool = False) -> list[tuple[dict[str, float | None], int]]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b = rng.uniform(-1, 1), rng.uniform(-1, 1)
        y = int(2 * a - b > 0)
        rows.append(({"a": a, "b": b, "missing": None}, 1 - y if flipped else y))
    return rows


def accuracy(model: OnlineDemandModel, rows) -> float:
    return sum(model.predict_one(x) == y for x, y in rows) / len(rows)


def log_loss(model: OnlineDemandModel, rows) -> float:
    eps = 1e-6
    total = 0.0
    for x, y in rows:
        p = min(max(model.predict_proba_one(x), eps), 1 - eps)
        total -= math.log(p if y else 1 - p)
    return total / len(rows)


def test_logistic_learns_a_separable_problem() -> None:
    model = OnlineDemandModel()
    test = toy(300, seed=1)
    assert log_loss(model, test) == pytest.approx(math.log(2))
    for x, y in toy(1500, seed=0):
        model.learn_one(x, y)
    assert accuracy(model, test) > 0.93
    assert log_loss(model, test) < 0.35
    assert model.n_seen == 1500 and model.n_drifts == 0


def test_forest_learns_a_separable_problem() -> None:
    model = OnlineDemandModel(OnlineModelConfig(kind="arf", n_models=3, seed=2))
    for x, y in toy(800, seed=0):
        model.learn_one(x, y)
    assert accuracy(model, toy(200, seed=1)) > 0.85


def test_drift_is_detected_and_reset_recovers() -> None:
    model = OnlineDemandModel(OnlineModelConfig(on_drift="reset", replay=300))
    for x, y in toy(1500, seed=0):
        model.learn_one(x, y)
    flags = []
    for x, y in toy(1000, seed=3, flipped=True):
        model.learn_one(x, y)
        flags.append(model.drift_detected)
    assert model.n_drifts >= 1 and any(flags[:400])
    assert accuracy(model, toy(300, seed=4, flipped=True)) > 0.85


def test_flag_policy_keeps_the_learner() -> None:
    reset = OnlineDemandModel(OnlineModelConfig(on_drift="reset"))
    flag = OnlineDemandModel(OnlineModelConfig(on_drift="flag"))
    stream = toy(1500, seed=0) + toy(150, seed=3, flipped=True)
    for x, y in stream:
        reset.learn_one(x, y)
        flag.learn_one(x, y)
    assert flag.n_drifts >= 1
    new = toy(300, seed=4, flipped=True)
    assert accuracy(reset, new) > accuracy(flag, new) + 0.1
    assert log_loss(reset, new) < log_loss(flag, new) - 0.1


def test_weight_scales_the_update() -> None:
    light, heavy = OnlineDemandModel(), OnlineDemandModel()
    light.learn_one({"a": 1.0}, 1, weight=1.0)
    heavy.learn_one({"a": 1.0}, 1, weight=5.0)
    assert heavy.predict_proba_one({"a": 1.0}) > light.predict_proba_one({"a": 1.0}) > 0.5
    with pytest.raises(FeedbackConfigError, match="weight"):
        light.learn_one({"a": 1.0}, 1, weight=-1.0)


def test_save_load_round_trip(tmp_path: Path) -> None:
    model = OnlineDemandModel()
    for x, y in toy(200, seed=0):
        model.learn_one(x, y)
    path = model.save(tmp_path / "m" / "online.pkl")
    again = OnlineDemandModel.load(path)
    probe = {"a": 0.3, "b": -0.2}
    assert again.predict_proba_one(probe) == model.predict_proba_one(probe)
    assert again.n_seen == 200
    (tmp_path / "other.pkl").write_bytes(__import__("pickle").dumps({"not": "a model"}))
    with pytest.raises(FeedbackError, match="expected an OnlineDemandModel"):
        OnlineDemandModel.load(tmp_path / "other.pkl")
