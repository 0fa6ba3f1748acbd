"""Trainer service on real Kafka: a label-flipped batch is quarantined, a clean one becomes a new version."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from events.admin import create_topics
from events.config import KafkaConfig
from events.models import TrainingExample
from events.producer import Producer
from events.topics import TOPICS
from feedback.registry import ModelRegistry
from feedback.services.trainer_service import (
    REJECTIONS,
    Snapshot,
    TrainerService,
    TrainerServiceConfig,
    UpdateOutcome,
)
from pricing.models import DemandModelConfig
from pricing.training import train_bundle
from pricing.vectorize import LIGHT_COLUMNS

pytestmark = pytest.mark.integration

T0 = datetime(2026, 6, 1, tzinfo=UTC)
BATCH = 240


def _frame(n: int, seed: int, start: datetime) -> pd.DataFrame:
    """A market where demand falls steeply with price and rises with occupancy."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.uniform(0, 1, size=(n, len(LIGHT_COLUMNS))), columns=list(LIGHT_COLUMNS))
    frame["price"] = rng.uniform(50, 300, n)
    logit = (150 - frame["price"]) / 25 + 2 * (frame["occupancy"] - 0.5)
    frame["booked"] = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    frame["event_time"] = pd.date_range(start, periods=n, freq="min", tz="UTC")
    frame["hotel_id"] = "h1"
    return frame


def _examples(frame: pd.DataFrame, *, flip: bool) -> list[TrainingExample]:
    out = []
    for row in frame.to_dict("records"):
        label = 1 - int(row["booked"]) if flip else int(row["booked"])
        out.append(TrainingExample(
            hotel_id="h1", room_type="std", stay_date=date(2026, 7, 1), event_time=row["event_time"].to_pydatetime(),
            decision_id=uuid.uuid4(), label=label, price=float(row["price"]),
            features={c: float(row[c]) for c in LIGHT_COLUMNS[1:]}, weight=1.0, strategy="committee",
            selection_prob=1.0,
        ))
    return out


def _until_update(service: TrainerService) -> UpdateOutcome:
    for _ in range(40):
        stats = service.process_batch()
        if stats.update is not None:
            return stats.update
    msg = "no update ran"
    raise AssertionError(msg)


def test_flipped_batch_rejected_clean_batch_registered(kafka_config: KafkaConfig, tmp_path: Path) -> None:
    create_topics(kafka_config, [TOPICS["training.examples"], TOPICS["training.examples.dlq"]])
    registry = ModelRegistry(tmp_path / "registry")
    parent_info = train_bundle(_frame(400, 1, T0 - timedelta(days=30)), tmp_path / "parent", tier="light",
                               config=DemandModelConfig(num_trees=40))
    parent = registry.register(parent_info.path, tier="light", snapshot_id="snap-0")
    registry.promote(parent)
    snapshot = Snapshot("snap-1", _frame(1500, 2, T0 - timedelta(days=5)))
    config = TrainerServiceConfig(kafka=kafka_config, state_dir=tmp_path / "trainer", registry_root=registry.root,
                                  train_every=BATCH, auto_promote=True, bundle=DemandModelConfig(num_trees=20),
                                  max_batch=100, group_id="trainer-test")
    service = TrainerService(config, snapshot=lambda: snapshot)
    producer = Producer(kafka_config, topic="training.examples")

    producer.send_many(_examples(_frame(BATCH, 3, T0), flip=True))
    producer.flush()
    rejected = _until_update(service)
    assert rejected.stage == "poison" and not rejected.accepted
    current = registry.current("light")
    assert current is not None and current.version == parent
    assert len(registry.list("light")) == 1
    lines = (registry.root / REJECTIONS).read_text(encoding="utf-8").splitlines()
    assert [json.loads(x)["stage"] for x in lines] == ["poison"]
    assert service.online.n_seen == BATCH  # the online model learned them as they came (the guard is batch-side)

    producer.send_many(_examples(_frame(BATCH, 4, T0 + timedelta(days=1)), flip=False))
    producer.flush()
    accepted = _until_update(service)
    assert accepted.stage == "registered", accepted.reason
    version = accepted.version
    assert version is not None and version != parent
    current = registry.current("light")
    assert current is not None and current.version == version
    entry = registry.show(version)
    assert entry.parent == parent and entry.snapshot_id == "snap-1"
    assert entry.data_range is not None and entry.data_range[0].startswith("2026-06-02")
    assert entry.metrics["n_examples"] == BATCH
    service.close()

    restarted = TrainerService(config, snapshot=snapshot)  # resumes from its checkpoint: nothing left to read
    assert restarted.online.n_seen == 2 * BATCH
    assert restarted.process_batch().consumed == 0
    restarted.close()
