from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from feedback.errors import RegistryError, UnknownVersionError
from feedback.registry import ModelRegistry


def bundle(tmp_path: Path, name: str, payload: bytes, *, meta: dict | None = None) -> Path:
    out = tmp_path / "bundles" / name
    out.mkdir(parents=True)
    (out / "model.onnx").write_bytes(payload)
    (out / "booster_0.txt").write_text("tree")
    if meta is not None:
        (out / "meta.json").write_text(json.dumps(meta))
    return out


def test_register_promote_rollback(tmp_path: Path) -> None:
    reg = ModelRegistry(tmp_path / "reg")
    rng = (datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 2, 1, tzinfo=UTC))
    a = bundle(tmp_path, "a", b"one")
    v1 = reg.register(a, tier="light", snapshot_id="s1", data_range=rng, metrics={"ll": 0.5})
    v2 = reg.register(bundle(tmp_path, "b", b"two"), tier="light", parent=v1, snapshot_id="s2")
    assert (v1, v2) == ("light-r1", "light-r2")
    assert reg.current("light") is None and reg.generation == 0
    reg.promote(v1)
    reg.promote(v2)
    assert reg.current("light").version == v2 and reg.generation == 2
    assert reg.show(v1).status == "retired"
    back = reg.rollback("light")
    assert back.version == v1 and back.status == "promoted"
    assert reg.show(v2).status == "rolled_back"
    assert reg.generation == 3
    entry = reg.current("light")
    assert (entry.path / "model.onnx").read_bytes() == b"one"
    assert entry.onnx_sha256 == {"model.onnx": hashlib.sha256(b"one").hexdigest()}
    assert entry.data_range == (rng[0].isoformat(), rng[1].isoformat()) and entry.metrics == {"ll": 0.5}
    assert reg.show(v2).parent == v1
    with pytest.raises(RegistryError, match="no earlier version"):
        reg.rollback("light")
    # a fresh handle on the same root sees the same state (it lives in manifest.json)
    assert ModelRegistry(tmp_path / "reg").current("light").version == v1


def test_promote_unknown_version_is_refused_clearly(tmp_path: Path) -> None:
    reg = ModelRegistry(tmp_path)
    v1 = reg.register(bundle(tmp_path, "a", b"one"), tier="heavy")
    with pytest.raises(UnknownVersionError, match=r"'heavy-r9' is not registered; known versions: \['heavy-r1'\]"):
        reg.promote("heavy-r9")
    assert reg.generation == 0 and reg.show(v1).status == "registered"


def test_meta_version_is_kept_and_register_is_idempotent(tmp_path: Path) -> None:
    sha = hashlib.sha256(b"bytes").hexdigest()
    meta = {"version": "light-abc", "tier": "light", "onnx_sha256": {"model.onnx": sha}, "metrics": {"auc": 0.8}}
    reg = ModelRegistry(tmp_path / "reg")
    b = bundle(tmp_path, "a", b"bytes", meta=meta)
    assert reg.register(b, tier="light") == "light-abc"
    assert reg.register(b, tier="light") == "light-abc"
    assert [e.version for e in reg.list()] == ["light-abc"] and reg.show("light-abc").metrics == {"auc": 0.8}
    other = bundle(tmp_path, "b", b"different", meta={"version": "light-abc"})
    with pytest.raises(RegistryError, match="already registered"):
        reg.register(other, tier="light")


def test_corrupt_or_mismatched_bundles_are_refused(tmp_path: Path) -> None:
    reg = ModelRegistry(tmp_path / "reg")
    bad_hash = bundle(tmp_path, "a", b"x", meta={"onnx_sha256": {"model.onnx": "0" * 64}})
    with pytest.raises(RegistryError, match="sha256"):
        reg.register(bad_hash, tier="light")
    wrong_tier = bundle(tmp_path, "b", b"y", meta={"tier": "heavy"})
    with pytest.raises(RegistryError, match="tier"):
        reg.register(wrong_tier, tier="light")
    with pytest.raises(RegistryError, match="tier"):
        reg.register(bundle(tmp_path, "c", b"z"), tier="medium")
    assert reg.list() == [] and not (tmp_path / "reg" / "light").exists()


def test_tiers_are_independent_and_manifest_is_whole_json(tmp_path: Path) -> None:
    reg = ModelRegistry(tmp_path)
    light = reg.register(bundle(tmp_path, "a", b"l"), tier="light")
    heavy = reg.register(bundle(tmp_path, "b", b"h"), tier="heavy")
    reg.promote(light)
    reg.promote(heavy)
    reg.promote(heavy)  # already live: no-op, no generation bump
    assert reg.generation == 2
    assert [e.version for e in reg.list("heavy")] == [heavy]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["history"] == {"light": [light], "heavy": [heavy]}
    assert not list(tmp_path.glob(".manifest.*"))
