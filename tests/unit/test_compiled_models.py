"""The compiled model backend: parity with native LightGBM, the bundle artefact, and the pricers on either backend."""

from __future__ import annotations

import json
import logging
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from events.catalog import ALL_FEATURES
from events.models import PricingRequest
from market.synthetic import training_frame
from pricestream.settings import Settings
from pricestream.wiring import pricer_loader
from pricing.compiled import MANIFEST_FILE, CompiledDemandModel, build_target
from pricing.errors import BundleError
from pricing.models import HEAVY_CONFIG, DemandModelConfig, predict_native
from pricing.onnx_runtime import OnnxDemandModel
from pricing.tiers import load_pricer
from pricing.training import load_boosters, train_bundle
from pricing.vectorize import frame_matrix

# The heavy tier's shape (bagged members, 31 leaves) at a test-sized depth: the compiled code is per tree
# and per member, so 3 members x 40 trees take the same paths as 5 x 120.
SMALL_HEAVY = HEAVY_CONFIG.model_copy(update={"n_members": 3, "num_trees": 40, "learning_rate": 0.1})
TOLERANCE = 1e-6


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    frame = training_frame(4000, seed=0)
    light = train_bundle(frame, tmp_path_factory.mktemp("light"), tier="light",
                         config=DemandModelConfig(num_trees=40), compiled=True)
    heavy = train_bundle(frame, tmp_path_factory.mktemp("heavy"), tier="heavy", config=SMALL_HEAVY, compiled=True)
    return {"light": light.path, "heavy": heavy.path}


@pytest.fixture(scope="module")
def held_out() -> pd.DataFrame:
    return training_frame(1500, seed=77)  # another seed: rows the boosters never saw


@pytest.mark.parametrize(("tier", "members"), [("light", 1), ("heavy", 3)])
def test_compiled_equals_native_lightgbm(bundles: dict[str, Path], held_out: pd.DataFrame, tier: str,
                                         members: int) -> None:
    boosters, meta = load_boosters(bundles[tier])
    x = frame_matrix(held_out, meta["columns"])
    assert np.isnan(x).any()  # missing inputs take LightGBM's default branches too
    model = CompiledDemandModel.from_bundle(bundles[tier], meta["boosters"])
    got = model.predict(x)
    native = predict_native(boosters, x)
    assert got.shape == (len(x), members) and got.dtype == np.float32
    assert model.n_members == members and model.n_features == len(meta["columns"])
    assert float(np.abs(got - native).max()) <= TOLERANCE
    assert float(np.abs(model.predict(x[:1]) - native[:1]).max()) <= TOLERANCE  # one row: another buffer
    assert float(got.std()) > 0.01  # the probabilities vary, so equality says something


def test_trainer_writes_the_artefact_for_this_host(bundles: dict[str, Path]) -> None:
    manifest = json.loads((bundles["heavy"] / MANIFEST_FILE).read_text(encoding="utf-8"))
    assert manifest["target"] == build_target()
    assert [m["booster"] for m in manifest["members"]] == ["booster_0.txt", "booster_1.txt", "booster_2.txt"]
    assert [m["object"] for m in manifest["members"]] == ["compiled_0.o", "compiled_1.o", "compiled_2.o"]
    assert all((bundles["heavy"] / m["object"]).stat().st_size > 0 for m in manifest["members"])


def test_fresh_artefact_loads_without_compiling(bundles: dict[str, Path], caplog: pytest.LogCaptureFixture) -> None:
    _, meta = load_boosters(bundles["light"])
    with caplog.at_level(logging.WARNING, logger="pricing.compiled"):
        CompiledDemandModel.from_bundle(bundles["light"], meta["boosters"])
    assert [r.getMessage() for r in caplog.records] == []


def _copy(bundle: Path, to: Path) -> Path:
    shutil.copytree(bundle, to)
    return to


def test_bundle_without_artefact_compiles_on_load(bundles: dict[str, Path], held_out: pd.DataFrame,
                                                  tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    bare = _copy(bundles["heavy"], tmp_path / "bare")
    for path in [bare / MANIFEST_FILE, *bare.glob("compiled_*.o")]:
        path.unlink()
    boosters, meta = load_boosters(bare)
    x = frame_matrix(held_out, meta["columns"])
    with caplog.at_level(logging.WARNING, logger="pricing.compiled"):
        pricer = load_pricer(bare, backend="compiled")
    assert "compiling 3 member(s) at load" in caplog.text and "compiled.json unreadable" in caplog.text
    assert float(np.abs(pricer.predict(x) - predict_native(boosters, x)).max()) <= TOLERANCE
    assert not (bare / MANIFEST_FILE).exists() and not list(bare.glob("compiled_*"))  # readers never write


def test_artefact_for_another_cpu_is_compiled_again(bundles: dict[str, Path], tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    other = _copy(bundles["light"], tmp_path / "other")
    path = other / MANIFEST_FILE
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["target"]["cpu"] = "some-other-cpu"
    path.write_text(json.dumps(manifest), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="pricing.compiled"):
        model = CompiledDemandModel.from_bundle(other, ["booster_0.txt"])
    assert "some-other-cpu" in caplog.text and model.n_members == 1


def _request(days: int) -> PricingRequest:
    now = datetime(2026, 6, 1, 12, tzinfo=UTC)
    return PricingRequest(hotel_id="h1", room_type="std", stay_date=(now + timedelta(days=days)).date(),
                          event_time=now)


@pytest.mark.parametrize("tier", ["light", "heavy"])
def test_load_pricer_gives_the_same_quotes_on_each_backend(bundles: dict[str, Path], held_out: pd.DataFrame,
                                                           tier: str) -> None:
    onnx = load_pricer(bundles[tier], backend="onnx")
    compiled = load_pricer(bundles[tier], backend="compiled")
    prices = []
    for i in range(8):
        row = held_out.iloc[i * 97]
        feats = {name: (None if pd.isna(row[name]) else float(row[name])) for name in ALL_FEATURES}
        request = _request(5 + 9 * i)
        a = onnx.quote(request, feats, floor=50.0, ceiling=500.0)
        b = compiled.quote(request, feats, floor=50.0, ceiling=500.0)
        assert b.price == a.price
        assert b.booking_prob == pytest.approx(a.booking_prob, abs=1e-4)
        assert b.model_version == a.model_version
        prices.append(a.price)
    assert len(set(prices)) > 1  # the requests differ, so agreeing on each of them is not agreeing on a constant


def test_settings_choose_the_backend(bundles: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().model_backend == "onnx"
    monkeypatch.setenv("PRICESTREAM_MODEL_BACKEND", "compiled")
    settings = Settings()
    assert settings.model_backend == "compiled"
    pricer = pricer_loader(settings)(bundles["light"])
    assert isinstance(pricer._model, CompiledDemandModel)
    assert isinstance(pricer_loader(Settings(model_backend="onnx"))(bundles["light"])._model, OnnxDemandModel)


def test_refusals_name_the_field(bundles: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="backend: 'tvm', expected 'onnx' or 'compiled'"):
        load_pricer(bundles["light"], backend="tvm")  # type: ignore[arg-type]
    model = CompiledDemandModel.from_bundle(bundles["light"], ["booster_0.txt"])
    with pytest.raises(BundleError, match=r"x: shape \(2, 3\), expected \(n_rows, 14\)"):
        model.predict(np.zeros((2, 3), dtype=np.float32))
    regression = _copy(bundles["light"], tmp_path / "regression")
    text = (regression / "booster_0.txt").read_text(encoding="utf-8")
    (regression / "booster_0.txt").write_text(text.replace("objective=binary", "objective=regression"),
                                              encoding="utf-8")
    with pytest.raises(BundleError, match="'objective=regression.*expected 'objective=binary"):
        CompiledDemandModel.from_bundle(regression, ["booster_0.txt"])
