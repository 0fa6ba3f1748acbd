"""The control plane's pure core: record parsing, version order, sha256 verification, the registry's hook."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from delivery import RolloutState, Stage
from delivery.control_plane import (
    Artefact,
    ArtefactMismatch,
    ControlPlaneError,
    ControlRecord,
    ControlState,
    RegistryView,
    parse_record,
)
from feedback.registry import ModelRegistry
from pricestream.control import registry_view

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def _bundle(store: Path, version: str, payload: bytes) -> Artefact:
    path = store / "light" / version
    path.mkdir(parents=True)
    (path / "model.onnx").write_bytes(payload)
    return Artefact(version=version, tier="light", path=f"light/{version}",
                    onnx_sha256={"model.onnx": hashlib.sha256(payload).hexdigest()})


def _registry(live: Artefact, generation: int) -> ControlRecord:
    return ControlRecord.registry_change(RegistryView(generation=generation, live={"light": live}), at=T0)


def test_records_apply_in_version_order_and_a_reread_changes_nothing(tmp_path: Path) -> None:
    v1, v2 = _bundle(tmp_path, "v1", b"one"), _bundle(tmp_path, "v2", b"two")
    state = ControlState(tmp_path)
    assert state.apply(3, _registry(v2, 2))
    assert not state.apply(1, _registry(v1, 1))  # older version of the same kind: ignored
    assert not state.apply(3, _registry(v1, 1))  # the same version again: ignored
    assert state.current("light").version == "v2"
    rollout = RolloutState.idle(T0).transition(Stage.SHADOW, at=T0, reason="r", version="v1")
    assert state.apply(2, ControlRecord.rollout_change(rollout, candidate=v1, at=T0))  # kinds are ordered apart
    assert state.show("v1").path == tmp_path / "light" / "v1" and state.generation == 3


def test_a_bundle_that_differs_from_its_sha256_is_refused_and_the_state_keeps_the_previous_one(tmp_path: Path) -> None:
    v1, v2 = _bundle(tmp_path, "v1", b"one"), _bundle(tmp_path, "v2", b"two")
    state = ControlState(tmp_path)
    state.apply(0, _registry(v1, 1))
    (tmp_path / "light" / "v2" / "model.onnx").write_bytes(b"evil")
    with pytest.raises(ArtefactMismatch, match=r"field 'onnx_sha256' of light/v2/model.onnx"):
        state.apply(1, _registry(v2, 2))
    assert state.current("light").version == "v1" and state.versions["registry"] == 1
    missing = v2.model_copy(update={"path": "light/nowhere"})
    with pytest.raises(ArtefactMismatch, match="cannot read it under the model store"):
        state.apply(2, _registry(missing, 3))


@pytest.mark.parametrize("raw", [b"not json", b'{"kind": "registry", "published_at": "2026-12-01T00:00:00Z"}',
                                 b'{"kind": "nope", "published_at": "2026-12-01T00:00:00Z"}'])
def test_bad_records_are_refused_naming_the_field(raw: bytes) -> None:
    with pytest.raises(ControlPlaneError, match="control record"):
        parse_record(raw)


def test_an_artefact_path_must_stay_inside_the_store() -> None:
    with pytest.raises(ValueError, match="field 'path': got '../etc'"):
        Artefact(version="v", tier="light", path="../etc", onnx_sha256={})


def test_the_registry_calls_its_hook_on_every_change_and_the_view_names_live_bundles(tmp_path: Path) -> None:
    changes: list[tuple[str, str]] = []
    registry = ModelRegistry(tmp_path / "reg", on_change=lambda r, c, v: changes.append((c, v)))
    bundles = []
    for n in (1, 2):
        bundle = tmp_path / f"b{n}"
        bundle.mkdir()
        (bundle / "model.onnx").write_bytes(f"m{n}".encode())
        (bundle / "meta.json").write_text(f'{{"version": "v{n}"}}')
        bundles.append(registry.register(bundle, tier="light"))
    registry.register(tmp_path / "b1", tier="light")  # same bytes again: no change, no call
    registry.promote(bundles[0])
    registry.promote(bundles[0])  # already live: no call
    registry.promote(bundles[1])
    registry.rollback("light")
    assert changes == [("registered", "v1"), ("registered", "v2"), ("promoted", "v1"), ("promoted", "v2"),
                       ("rolled_back", "v1")]
    view = registry_view(registry, registry.root)
    assert view.live["light"].path == "light/v1" and view.latest["light"].version == "v2"
    assert view.live["light"].onnx_sha256 == {"model.onnx": hashlib.sha256(b"m1").hexdigest()}
    state = ControlState(registry.root)
    assert state.apply(0, ControlRecord.registry_change(view, at=T0))  # the store's bytes verify
