"""The trainer's guarded update is judged on labels no model has seen, behind the poisoning guard.

:class:`~feedback.services.trainer_update.BatchUpdater` is the trainer service's update (``train_now``
hands it the buffer), here on a registry with a promoted bundle trained on the snapshot, with the
service's default settings. Seeded data, no services.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from feedback.continued import GuardConfig, guarded_update
from feedback.poisoning import PoisonGuard
from feedback.registry import ModelRegistry
from feedback.services.trainer_service import TrainerServiceConfig
from feedback.services.trainer_update import BatchUpdater, Snapshot
from pricing.models import DemandModelConfig
from pricing.training import train_bundle
from pricing.vectorize import LIGHT_COLUMNS

T0 = datetime(2026, 6, 1, tzinfo=UTC)


def _frame(n: int, seed: int, start: datetime, *, shift: float = 0.0) -> pd.DataFrame:
    """Demand falls with price and rises with occupancy; ``shift`` moves its level (a new season)."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.uniform(0, 1, size=(n, len(LIGHT_COLUMNS))), columns=list(LIGHT_COLUMNS))
    frame["price"] = rng.uniform(50, 300, n)
    logit = (150 - frame["price"]) / 25 + 2 * (frame["occupancy"] - 0.5) + shift
    frame["booked"] = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    frame["event_time"] = pd.date_range(start, periods=n, freq="min", tz="UTC")
    frame["hotel_id"] = "h1"
    frame["decision_id"] = [str(uuid.UUID(int=int(i))) for i in rng.integers(0, 2**62, n)]
    frame["weight"] = 1.0
    return frame


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Snapshot]:
    root = tmp_path_factory.mktemp("trainer")
    snapshot = Snapshot("snap-1", _frame(1500, 2, T0 - timedelta(days=5)))
    info = train_bundle(snapshot.frame, root / "live", tier="light", config=DemandModelConfig(num_trees=20))
    registry = ModelRegistry(root / "registry")
    registry.promote(registry.register(info.path, tier="light", snapshot_id=snapshot.snapshot_id))
    return root, snapshot


def _updater(root: Path, snapshot: Snapshot, name: str) -> BatchUpdater:
    defaults = TrainerServiceConfig(state_dir=root / name, registry_root=root / "registry")  # the service's
    (root / name).mkdir()
    return BatchUpdater(ModelRegistry(root / "registry"), snapshot,
                        PoisonGuard(defaults.poison, quarantine_dir=root / name / "quarantine"),
                        guard_config=defaults.guard, bundle=DemandModelConfig(num_trees=10), work_dir=root / name)


def test_the_holdout_is_the_newest_new_labels_and_never_the_live_models_training_rows(
    trained: tuple[Path, Snapshot],
) -> None:
    root, snapshot = trained
    updater = _updater(root, snapshot, "holdout")
    # the batch re-delivers the snapshot's newest 200 rows (the live model trained on them) after 400 new labels
    new = _frame(400, 3, T0)
    replayed = snapshot.frame.iloc[-200:].assign(event_time=lambda f: f["event_time"] + timedelta(days=10))
    outcome = updater.update(pd.concat([new, replayed], ignore_index=True).to_dict("records"))
    assert outcome.stage in ("registered", "guard"), outcome.reason
    held = set(outcome.holdout)
    assert len(held) == 80  # 20% of the 400 unseen labels
    assert not held & set(snapshot.frame["decision_id"])
    assert held == set(new["decision_id"].iloc[-80:])  # the newest, by event time


def test_a_poisoned_batch_is_refused_before_the_holdout(trained: tuple[Path, Snapshot]) -> None:
    root, snapshot = trained
    updater = _updater(root, snapshot, "poison")
    flipped = _frame(400, 4, T0).assign(booked=lambda f: 1 - f["booked"])
    outcome = updater.update(flipped.to_dict("records"))
    assert outcome.stage == "poison" and not outcome.accepted and outcome.quarantine_path is not None
    assert outcome.holdout == ()  # no update was judged: a holdout of flipped labels never decided anything


def test_recency_lets_a_new_season_move_the_model(tmp_path: Path) -> None:
    """Half a year of old rows against four weeks of a new regime: with decay the update follows the new one."""
    old = _frame(4000, 5, T0 - timedelta(days=180)).assign(
        event_time=lambda f: pd.date_range(T0 - timedelta(days=200), periods=4000, freq="45min", tz="UTC"))
    info = train_bundle(old, tmp_path / "live", tier="light",
                        config=DemandModelConfig(num_trees=20))
    new = _frame(1200, 6, T0, shift=-2.0).assign(
        event_time=lambda f: pd.date_range(T0, periods=1200, freq="30min", tz="UTC"))
    losses = {}
    for name, half_life in (("decay", 14.0), ("flat", None)):
        cfg = GuardConfig(recency_half_life_days=half_life, tolerance=1.0)
        res = guarded_update(str(info.path), new, old, seed=0, config=cfg)
        losses[name] = res.metrics["logloss_retrain"]
    assert losses["decay"] < losses["flat"] - 0.05  # seeded: 0.301 against 0.407


def test_an_update_on_too_few_unseen_labels_is_skipped_and_recorded_with_its_reason(
    trained: tuple[Path, Snapshot],
) -> None:
    import json

    from feedback.services.trainer_update import REJECTIONS, SKIPPED

    root, snapshot = trained
    updater = _updater(root, snapshot, "skip")
    outcome = updater.update(_frame(12, 8, T0).to_dict("records"))
    assert outcome.stage == "skipped" and not outcome.accepted and outcome.holdout == ()
    assert outcome.parent is not None and outcome.n_examples == 12
    lines = (root / "registry" / SKIPPED).read_text(encoding="utf-8").splitlines()
    recorded = json.loads(lines[-1])
    assert recorded["stage"] == "skipped" and recorded["reason"] == outcome.reason and recorded["n_examples"] == 12
    assert recorded["snapshot_id"] == snapshot.snapshot_id and recorded["current_version"] == outcome.parent
    rejected = root / "registry" / REJECTIONS  # a skip judged nothing: it is not a rejection
    assert not rejected.exists() or outcome.reason not in rejected.read_text(encoding="utf-8")
    assert updater.update([]).reason == "no buffered examples"  # nothing buffered: no attempt, nothing written
    assert len((root / "registry" / SKIPPED).read_text(encoding="utf-8").splitlines()) == len(lines)


def test_the_demo_reports_skipped_attempts_with_their_reasons(tmp_path: Path) -> None:
    """What the demo prints when the trainer tried but judged nothing: the count and the distinct reasons."""
    import json
    from datetime import date

    from market.closed_nights import StayNights
    from pricestream.demo import DemoReport
    from pricestream.demo_services import _reasons

    log = tmp_path / "skipped.jsonl"
    log.write_text("".join(json.dumps({"stage": "skipped", "reason": r}) + "\n"
                           for r in ("leaves 2 rows", "leaves 2 rows", "leaves 3 rows")) + '{"stage": "sk',
                   encoding="utf-8")  # a torn last line (SIGKILL mid-append) names no reason
    assert _reasons(log) == ["leaves 2 rows", "leaves 2 rows", "leaves 3 rows"]
    assert _reasons(tmp_path / "absent.jsonl") == []
    report = DemoReport(nights=StayNights(first=date(2026, 3, 10), count=2), hotels=1, skipped=_reasons(log))
    lines = report._loop_lines()
    assert lines[0] == "trainer: 0 updates registered [], 0 rejected, 3 skipped"
    assert lines[1:3] == ["  skipped update: leaves 2 rows", "  skipped update: leaves 3 rows"]
    assert lines[-1] == "promotions: 0 (the trainer registered no update: 3 attempts skipped)"
