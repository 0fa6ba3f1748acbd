"""The composition root: one path for every command, and what a trainer's promotion does."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from audit.verify import verify
from delivery import StateStore
from events.models import PricingRequest
from feedback.registry import ModelRegistry
from pricestream.app import build_serving_path, promote_trained
from pricestream.settings import Settings
from pricestream.wiring import BootstrapModels
from pricing.feature_source import MemoryFeatureSource

TINY = BootstrapModels(light_trees=3, heavy_members=2, heavy_trees=3)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, str, str]:
    s = Settings(state_dir=tmp_path_factory.mktemp("app"), bootstrap_rows=300)
    path = build_serving_path(s, publish="none", feature_source=MemoryFeatureSource(), models=TINY)
    path.close()
    registry = ModelRegistry(s.registry())
    live = registry.current("light")
    assert live is not None
    bundle = s.state_dir / "candidate"
    shutil.copytree(live.path, bundle)
    meta = json.loads((bundle / "meta.json").read_text())
    meta["version"] = "light-trained"
    (bundle / "meta.json").write_text(json.dumps(meta))
    return s, live.version, registry.register(bundle, tier="light")


def test_trainer_promotion_rollout_starts_a_rollout_instead_of_a_swap(trained: tuple[Settings, str, str]) -> None:
    s, live, version = trained
    s = s.model_copy(update={"trainer_promotion": "rollout", "rollout_state": s.state_dir / "r1.json"})
    assert promote_trained(s, version) == "rollout"
    state = StateStore(s.rollout()).load()
    assert state is not None and (state.stage.value, state.version, state.incumbent_version) == (
        "shadow", version, live)
    current = ModelRegistry(s.registry()).current("light")
    assert current is not None and current.version == live  # nothing swapped


def test_a_closed_path_audits_every_served_decision_and_a_late_request_never_raises(
    trained: tuple[Settings, str, str], tmp_path: Path
) -> None:
    s, _, _ = trained
    s = s.model_copy(update={"audit_log": tmp_path / "audit.jsonl", "rollout_state": tmp_path / "r.json"})
    path = build_serving_path(s, publish="none", feature_source=MemoryFeatureSource())
    request = PricingRequest(hotel_id="h1", room_type="std", stay_date=date(2026, 12, 24),
                             event_time=datetime(2026, 12, 1, tzinfo=UTC))
    decisions = [path.scorer.price(request) for _ in range(5)]
    path.close()
    assert verify(s.audit()).entries == 5
    late = path.scorer.price(request)  # the audit log is closed: counted as failing, the price still comes back
    assert late.price > 0 and path.scorer.health()["audit_failing"] is True
    assert {d.arm for d in decisions} == {"incumbent"}


@pytest.mark.parametrize("serve", [True, False])
def test_cold_start_is_on_by_default_and_its_setting_turns_it_off(
    trained: tuple[Settings, str, str], tmp_path: Path, serve: bool
) -> None:
    from delivery.cold_start import StagedScorer

    s, _, _ = trained
    update = {"rollout_state": tmp_path / "r.json"} | ({} if serve else {"cold_start_serve": False})
    assert Settings.model_fields["cold_start_serve"].default is True
    path = build_serving_path(s.model_copy(update=update), audit=False, publish="none",
                              feature_source=MemoryFeatureSource())
    path.close()
    assert isinstance(path.scorer.arms.incumbent, StagedScorer) is serve


def test_trainer_promotion_swap_promotes_now(trained: tuple[Settings, str, str]) -> None:
    s, _, version = trained
    assert promote_trained(s, version) == "promoted"
    current = ModelRegistry(s.registry()).current("light")
    assert current is not None and current.version == version
