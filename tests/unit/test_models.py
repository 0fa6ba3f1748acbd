"""Demand models: ONNX parity with native LightGBM, bundle round trip, continued training, weights."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, date, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from events.models import PricingRequest
from market.synthetic import training_frame
from pricing.errors import BundleError, TrainingError
from pricing.models import HEAVY_CONFIG, LIGHT_CONFIG, DemandModelConfig, predict_native
from pricing.tiers import HeavyPricer, LightPricer, load_pricer
from pricing.training import META_FILE, load_boosters, read_meta, train_bundle
from pricing.vectorize import HEAVY_COLUMNS, LIGHT_COLUMNS, PRICE_RATIOS, Vectorizer, frame_matrix, price_columns

# The heavy tier's shape (5 bagged members) at a test-sized depth: parity and
# ensembling are per tree and per member, so 60 trees exercise the same paths as 300.
SMALL_HEAVY = HEAVY_CONFIG.model_copy(update={"num_trees": 60, "num_leaves": 31, "learning_rate": 0.1})


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return training_frame(5000, seed=0)


@pytest.fixture(scope="module")
def light(frame: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_bundle(frame, tmp_path_factory.mktemp("light"), tier="light").path


@pytest.fixture(scope="module")
def heavy(frame: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_bundle(frame, tmp_path_factory.mktemp("heavy"), tier="heavy", config=SMALL_HEAVY).path


def _parity(bundle: Path) -> tuple[float, float, int]:
    boosters, meta = load_boosters(bundle)
    test = training_frame(4000, seed=11)  # unseen rows, 5% missing per stored feature
    x = frame_matrix(test, meta["columns"])
    onnx_p = load_pricer(bundle).predict(x)
    native_p = predict_native(boosters, x)
    diff = np.abs(onnx_p.astype(np.float64) - native_p.astype(np.float64))
    return float(diff.max()), float((diff > 1e-6).mean()), onnx_p.shape[1]


@pytest.mark.parametrize("tier", ["light", "heavy"])
def test_onnx_matches_native_lightgbm(tier: str, request: pytest.FixtureRequest) -> None:
    """ONNX and native probabilities agree to 1e-4 (max abs) on 4,000 unseen rows with NaNs.

    Why 1e-4 and not 1e-7: LightGBM compares float64 thresholds, while the ONNX
    TreeEnsemble stores them as float32. An input that falls between a threshold
    and its float32 rounding takes the other branch, moving one tree's leaf value
    (a few 1e-3 of log-odds at most here). Accumulating leaf values in float32
    adds ~1e-7. So: max abs diff <= 1e-4 on typical data, and fewer than 1% of
    (row, member) cells differ by more than 1e-6 (in practice none do).
    """
    max_diff, share_above, members = _parity(request.getfixturevalue(tier))
    assert members == (1 if tier == "light" else 5)
    assert max_diff <= 1e-4
    assert share_above < 0.01


def test_bundle_round_trip(light: Path, heavy: Path) -> None:
    meta = read_meta(light)
    assert meta["tier"] == "light" and tuple(meta["columns"]) == LIGHT_COLUMNS
    assert meta["n_trees"] == LIGHT_CONFIG.num_trees and meta["version"].startswith("light-")
    assert sorted(p.name for p in light.iterdir()) == ["booster_0.txt", "meta.json", "model.onnx"]
    assert 0.5 < meta["metrics"]["holdout_auc"] < 1.0
    pricer = load_pricer(light)
    assert isinstance(pricer, LightPricer) and pricer.version == meta["version"]
    heavy_pricer = load_pricer(heavy)
    assert isinstance(heavy_pricer, HeavyPricer) and heavy_pricer.meta["n_members"] == 5
    assert tuple(heavy_pricer.meta["columns"]) == HEAVY_COLUMNS
    assert heavy_pricer.meta["n_trees"] == 5 * SMALL_HEAVY.num_trees


def test_same_data_and_seed_give_the_same_version(frame: pd.DataFrame, light: Path, tmp_path: Path) -> None:
    again = train_bundle(frame, tmp_path / "again", tier="light")
    assert again.version == read_meta(light)["version"]
    other = train_bundle(
        frame,
        tmp_path / "other",
        tier="light",
        seed=3,
        config=LIGHT_CONFIG.model_copy(update={"feature_fraction": 0.7}),
    )
    assert other.version != again.version


def test_continued_training_adds_trees_and_records_parent(frame: pd.DataFrame, light: Path, tmp_path: Path) -> None:
    more = training_frame(1500, seed=5)
    child = train_bundle(
        more, tmp_path / "child", tier="light", init_model=light, config=DemandModelConfig(num_trees=20)
    )
    assert child.n_trees == LIGHT_CONFIG.num_trees + 20
    assert child.parent == read_meta(light)["version"]
    x = frame_matrix(more, LIGHT_COLUMNS)
    parent_p = predict_native(load_boosters(light)[0], x)
    child_p = predict_native(load_boosters(child.path)[0], x)
    assert not np.allclose(parent_p, child_p)


def test_continued_training_refuses_another_tier(frame: pd.DataFrame, heavy: Path, tmp_path: Path) -> None:
    with pytest.raises(BundleError):
        train_bundle(frame, tmp_path / "x", tier="light", init_model=heavy)


def test_continuing_a_bundle_of_another_column_set_is_refused_naming_the_missing_columns(
    frame: pd.DataFrame, light: Path, tmp_path: Path
) -> None:
    old = tmp_path / "old"
    shutil.copytree(light, old)
    meta = json.loads((old / META_FILE).read_text(encoding="utf-8"))
    meta["columns"] = [c for c in meta["columns"] if c != "stay_dow"]  # as if trained before a column was added
    (old / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(BundleError, match=r"missing \['stay_dow'\]"):
        train_bundle(frame, tmp_path / "x", tier="light", init_model=old)


def test_importance_weights_change_the_model(frame: pd.DataFrame, tmp_path: Path) -> None:
    weighted = frame.copy()
    weighted["weight"] = np.where(weighted["price"] > 150, 5.0, 0.2)
    plain = train_bundle(frame, tmp_path / "plain", tier="light", config=DemandModelConfig(num_trees=20))
    heavy_w = train_bundle(weighted, tmp_path / "w", tier="light", config=DemandModelConfig(num_trees=20))
    assert plain.version != heavy_w.version
    bad = frame.assign(weight=-1.0)
    with pytest.raises(TrainingError) as info:
        train_bundle(bad, tmp_path / "bad", tier="light")
    assert info.value.field == "weight"


def test_frame_errors_name_the_column(frame: pd.DataFrame, tmp_path: Path) -> None:
    with pytest.raises(TrainingError) as missing:
        train_bundle(frame.drop(columns=["occupancy"]), tmp_path / "m", tier="light")
    assert missing.value.field == "frame.columns" and missing.value.value == ["occupancy"]
    with pytest.raises(TrainingError) as one_class:
        train_bundle(frame.assign(booked=0), tmp_path / "c", tier="light")
    assert one_class.value.field == "booked"


def test_price_monotonicity_holds_in_the_exported_model(light: Path) -> None:
    pricer = load_pricer(light)
    x = frame_matrix(training_frame(50, seed=2), LIGHT_COLUMNS)
    grid = np.geomspace(40, 600, 30)
    rows = np.repeat(x, len(grid), axis=0)
    rows[:, 0] = np.tile(grid, len(x))
    p = pricer.predict(rows.astype(np.float32))[:, 0].reshape(len(x), len(grid))
    assert np.all(np.diff(p, axis=1) <= 1e-6)
    assert np.all(p[:, 0] > p[:, -1])


def test_tampered_onnx_is_refused(light: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    for item in light.iterdir():
        (copy / item.name).write_bytes(item.read_bytes())
    meta = json.loads((copy / "meta.json").read_text())
    meta["onnx_sha256"]["model.onnx"] = "0" * 64
    (copy / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(BundleError, match="sha256"):
        load_pricer(copy)
    with pytest.raises(BundleError):
        load_pricer(tmp_path / "nowhere")


def test_relative_prices_agree_between_serving_and_training_rows() -> None:
    """The Vectorizer (serving) and frame_matrix (training) derive the same price ratios; a missing
    or non-positive reference gives NaN, never a ratio to 0 or a division error."""
    req = PricingRequest(hotel_id="h", room_type="r", stay_date=date(2026, 7, 2),
                         event_time=datetime(2026, 7, 1, tzinfo=UTC))
    prices = np.array([80.0, 100.0, 130.0])
    vec = Vectorizer(LIGHT_COLUMNS, grid_size=2)  # grows past the pre-allocated rows
    served = vec.fill(req, {"base_rate": 100.0, "comp_rate_median_24h": 125.0, "occupancy": 0.4}, prices).copy()
    rows = pd.DataFrame({c: [served[0, j]] * 3 for j, c in enumerate(LIGHT_COLUMNS) if c not in PRICE_RATIOS})
    rows = rows.assign(price=prices, base_rate=100.0, comp_rate_median_24h=125.0)
    trained = frame_matrix(rows, LIGHT_COLUMNS)
    ratio = [LIGHT_COLUMNS.index(c) for c in ("price_to_base_rate", "price_to_comp_rate")]
    np.testing.assert_allclose(served[:, ratio], [[0.8, 0.64], [1.0, 0.8], [1.3, 1.04]], rtol=1e-6)
    np.testing.assert_allclose(trained, served, rtol=1e-6)
    assert price_columns(LIGHT_COLUMNS) == (0, *ratio)
    missing = vec.fill(req, {"base_rate": 0.0}, prices)
    assert np.isnan(missing[:, ratio]).all() and np.isnan(vec.row[ratio]).all()
    with pytest.raises(KeyError, match="base_rate"):
        frame_matrix(pd.DataFrame({"price": [1.0]}), ["price", "price_to_base_rate"])


def test_demand_is_non_increasing_in_the_relative_price(light: Path) -> None:
    """Monotone in every price column: quotes along a grid never gain bookings as the price rises."""
    boosters, meta = load_boosters(light)
    x = frame_matrix(training_frame(200, seed=5), meta["columns"])
    grid = np.repeat(x, 9, axis=0)
    factors = np.tile(np.linspace(0.7, 1.5, 9), len(x))
    grid[:, 0] *= factors
    for j in range(1, len(meta["columns"])):
        if meta["columns"][j].startswith("price_to_"):
            grid[:, j] *= factors
    p = predict_native(boosters, grid)[:, 0].reshape(len(x), 9)
    assert (np.diff(p, axis=1) <= 1e-12).all()
    assert (p[:, 0] - p[:, -1]).mean() > 0.02  # and price does matter
