from __future__ import annotations

import json
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest

from feedback.continued import GuardConfig, bundle_trainer, guarded_update, log_loss, predict
from feedback.errors import TrainingError
from feedback.registry import ModelRegistry
from pricing.models import DemandModelConfig
from pricing.training import train_bundle
from pricing.vectorize import LIGHT_COLUMNS

COLS = ["x1", "x2", "x3"]
PARAMS = {"objective": "binary", "verbose": -1, "num_leaves": 15, "seed": 0, "num_threads": 1}
SNAPSHOT_HOLDOUT = GuardConfig(holdout_from="snapshot")
"""The holdout from the snapshot's newest rows: what a caller without a poisoning guard ahead of the update uses."""


def frame(n: int, *, start: str, seed: int, flip: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    p = 1 / (1 + np.exp(-(2 * x[:, 0] - x[:, 1] + 0.5 * x[:, 2])))
    y = (rng.random(n) < p).astype(int)
    out = pd.DataFrame(x, columns=COLS)
    out["booked"] = 1 - y if flip else y
    out["event_time"] = pd.date_range(start, periods=n, freq="5min", tz="UTC")
    return out


def train(rows: pd.DataFrame, rounds: int = 40) -> lgb.Booster:
    return lgb.train(PARAMS, lgb.Dataset(rows[COLS], rows["booked"]), num_boost_round=rounds)


@pytest.fixture(scope="module")
def setting() -> tuple[lgb.Booster, pd.DataFrame]:
    snapshot = frame(2500, start="2026-01-01", seed=1)
    current = train(snapshot.iloc[:2000])  # the last 500 rows are newer than the current model
    return current, snapshot


def test_label_flipped_batch_is_rejected(setting) -> None:
    current, snapshot = setting
    poisoned = frame(800, start="2026-01-07", seed=2, flip=True)
    res = guarded_update(current, poisoned, snapshot, validation_fraction=0.2, seed=0, config=SNAPSHOT_HOLDOUT)
    assert not res.accepted and res.chosen is None
    assert res.reason.startswith("rejected")
    assert res.metrics["logloss_continued"] > res.metrics["logloss_current"] + 0.05
    assert res.metrics["logloss_retrain"] > res.metrics["logloss_current"]
    assert res.booster is current


def test_clean_batch_is_accepted_when_current_is_undertrained() -> None:
    snapshot = frame(2500, start="2026-01-01", seed=1)
    current = train(snapshot.iloc[:150], rounds=10)
    clean = frame(800, start="2026-01-07", seed=2)
    res = guarded_update(current, clean, snapshot, validation_fraction=0.2, seed=0, config=SNAPSHOT_HOLDOUT)
    assert res.accepted and res.chosen in ("continued", "retrain")
    assert res.metrics[f"logloss_{res.chosen}"] < res.metrics["logloss_current"]
    assert res.metrics["n_validation"] == 500 and res.metrics["n_snapshot_train"] == 2000
    val = snapshot.iloc[2000:]
    assert log_loss(val["booked"].to_numpy(), predict(res.members, val[COLS].to_numpy())) == pytest.approx(
        res.metrics[f"logloss_{res.chosen}"]
    )


def test_weights_are_honoured(setting) -> None:
    current, snapshot = setting
    poisoned = frame(800, start="2026-01-07", seed=2, flip=True).assign(weight=1e-9)
    res = guarded_update(current, poisoned, snapshot, seed=0, config=GuardConfig(tolerance=0.01))
    assert res.metrics["logloss_continued"] == pytest.approx(res.metrics["logloss_current"], abs=1e-6)
    assert res.accepted


def test_bundle_dir_and_hook(setting, tmp_path: Path) -> None:
    current, snapshot = setting
    current.save_model(str(tmp_path / "booster_0.txt"))
    (tmp_path / "meta.json").write_text(json.dumps({"boosters": ["booster_0.txt"], "columns": COLS}))
    seen = []
    clean = frame(400, start="2026-01-07", seed=3)
    res = guarded_update(tmp_path, clean, snapshot, seed=0, config=GuardConfig(tolerance=1.0), on_accept=seen.append)
    assert res.accepted and seen == [res] and res.columns == tuple(COLS)
    # the newest 20% of the new labels (80) are the holdout; the snapshot is all trained on
    assert len(res.train_frame) == (320 if res.chosen == "continued" else 2820)
    assert len(res.validation) == 80 and res.validation["event_time"].min() > clean["event_time"].iloc[319]


def test_bad_inputs(setting) -> None:
    current, snapshot = setting
    with pytest.raises(TrainingError, match=r"missing columns \['x3'\]"):
        guarded_update(current, frame(10, start="2026-01-07", seed=2).drop(columns="x3"), snapshot)
    with pytest.raises(TrainingError, match="validation_fraction"):
        guarded_update(current, frame(10, start="2026-01-07", seed=2), snapshot.iloc[:100], validation_fraction=0.1)
    with pytest.raises(TrainingError, match="meta.json"):
        guarded_update("/nonexistent/bundle", snapshot, snapshot)


def test_bundle_trainer_validates_the_bundle_it_writes(tmp_path: Path) -> None:
    def offers(n: int, seed: int, start: str, shift: float) -> pd.DataFrame:
        rng = np.random.default_rng(seed)
        out = pd.DataFrame(rng.uniform(0, 1, size=(n, len(LIGHT_COLUMNS))), columns=list(LIGHT_COLUMNS))
        out["price"] = rng.uniform(50, 300, n)
        out["booked"] = (rng.random(n) < 1 / (1 + np.exp((out["price"] - 150 - shift) / 30))).astype(int)
        out["event_time"] = pd.date_range(start, periods=n, freq="min", tz="UTC")
        return out

    old = offers(600, 0, "2026-01-01", 0.0)
    current = train_bundle(old, tmp_path / "cur", tier="light", config=DemandModelConfig(num_trees=10)).path
    trainer = bundle_trainer(current, tmp_path / "work", tier="light")
    new, snapshot = offers(600, 1, "2026-01-03", 60.0), offers(800, 2, "2026-01-02", 60.0)
    res = guarded_update(current, new, snapshot, trainer=trainer, seed=0)
    assert res.accepted and res.bundle_dir == tmp_path / "work" / res.chosen
    assert (res.bundle_dir / "model.onnx").exists() and res.columns == LIGHT_COLUMNS
    reg = ModelRegistry(tmp_path / "registry")
    version = reg.register(res.bundle_dir, tier="light", metrics=res.metrics)
    assert reg.promote(version).path.joinpath("model.onnx").read_bytes() == (res.bundle_dir / "model.onnx").read_bytes()
