"""Scripted poisoning of the feedback loop (OWASP ML02) against the trainer service on real Kafka.

Three attacks, each a batch of ``training.examples`` an attacker could get into the loop
(fake bookings, a compromised label join, injected rows): flipped labels, labels shifted to
reward high prices, and rows from another feature distribution with honest-looking labels.
Each is refused by the trainer, no new version: flipped labels and injected rows by the poison
guard (stage ``poison``, quarantined); shifted labels, which look plausible to the guard's two
label signals together (only the loss is unusual), by the guarded update (stage ``guard``: the
model trained on them is worse on the snapshot). Then a clean batch is accepted and registered.
"""

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
from feedback.services.trainer_service import REJECTIONS, Snapshot, TrainerService, TrainerServiceConfig, UpdateOutcome
from pricing.models import DemandModelConfig
from pricing.training import train_bundle
from pricing.vectorize import LIGHT_COLUMNS

pytestmark = pytest.mark.integration

T0 = datetime(2026, 6, 1, tzinfo=UTC)
BATCH = 240


def _market(n: int, seed: int, start: datetime, *, spread: float = 1.0, offset: float = 0.0) -> pd.DataFrame:
    """Demand falls with price and rises with occupancy; features uniform on [offset, offset + spread]."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.uniform(offset, offset + spread, size=(n, len(LIGHT_COLUMNS))),
                         columns=list(LIGHT_COLUMNS))
    frame["price"] = rng.uniform(50, 300, n)
    logit = (150 - frame["price"]) / 25 + 2 * (frame["occupancy"] - 0.5)
    frame["booked"] = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    frame["event_time"] = pd.date_range(start, periods=n, freq="min", tz="UTC")
    return frame


def _examples(frame: pd.DataFrame) -> list[TrainingExample]:
    return [TrainingExample(
        hotel_id="h1", room_type="std", stay_date=date(2026, 7, 1), event_time=row["event_time"].to_pydatetime(),
        decision_id=uuid.uuid4(), label=int(row["booked"]), price=float(row["price"]),
        features={c: float(row[c]) for c in LIGHT_COLUMNS[1:]}, weight=1.0, strategy="committee", selection_prob=1.0,
    ) for row in frame.to_dict("records")]


def _flipped(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(booked=1 - frame["booked"])


def _shifted(frame: pd.DataFrame) -> pd.DataFrame:
    """Bookings moved onto the expensive half: a model trained on it would learn to raise prices."""
    return frame.assign(booked=(frame["price"] > frame["price"].median()).astype(int))


def _injected(seed: int, start: datetime) -> pd.DataFrame:
    """Rows from another distribution (features 3x their range away), labelled by the true demand."""
    return _market(BATCH, seed, start, offset=3.0)


def _update(service: TrainerService) -> UpdateOutcome:
    for _ in range(40):
        stats = service.process_batch()
        if stats.update is not None:
            return stats.update
    msg = "no update ran"
    raise AssertionError(msg)


def test_scripted_poisoning_is_refused_and_a_clean_batch_accepted(kafka_config: KafkaConfig, tmp_path: Path) -> None:
    create_topics(kafka_config, [TOPICS["training.examples"], TOPICS["training.examples.dlq"]])
    registry = ModelRegistry(tmp_path / "registry")
    parent_info = train_bundle(_market(400, 1, T0 - timedelta(days=30)), tmp_path / "parent", tier="light",
                               config=DemandModelConfig(num_trees=40))
    parent = registry.register(parent_info.path, tier="light", snapshot_id="snap-0")
    registry.promote(parent)
    snapshot = Snapshot("snap-1", _market(1500, 2, T0 - timedelta(days=5)))
    config = TrainerServiceConfig(kafka=kafka_config, state_dir=tmp_path / "trainer", registry_root=registry.root,
                                  train_every=BATCH, auto_promote=True, bundle=DemandModelConfig(num_trees=20),
                                  max_batch=100, group_id="trainer-poison")
    service = TrainerService(config, snapshot=snapshot)
    producer = Producer(kafka_config, topic="training.examples")

    attacks = {
        "flipped": _flipped(_market(BATCH, 3, T0)),
        "shifted": _shifted(_market(BATCH, 4, T0 + timedelta(hours=6))),
        "injected": _injected(5, T0 + timedelta(hours=12)),
    }
    # the update is judged on the batch's own newest labels, so a batch that rewards higher prices must stop at the
    # poisoning guard's price-response signal (it used to pass it and be refused by a holdout of snapshot rows)
    expected = {"flipped": "poison", "shifted": "poison", "injected": "poison"}
    reasons = {}
    for name, frame in attacks.items():
        producer.send_many(_examples(frame))
        producer.flush()
        outcome = _update(service)
        assert (outcome.stage, outcome.accepted) == (expected[name], False), (name, outcome.reason)
        if outcome.stage == "poison":
            assert outcome.quarantine_path is not None and Path(outcome.quarantine_path, "batch.parquet").exists()
        reasons[name] = outcome.reason
    assert "feature" in reasons["injected"] and "sds" in reasons["injected"]
    assert "label rate" in reasons["flipped"]
    assert "labels reward higher prices" in reasons["shifted"]
    assert [e.version for e in registry.list("light")] == [parent]  # nothing poisoned was registered
    stages = [json.loads(x)["stage"] for x in (registry.root / REJECTIONS).read_text().splitlines()]
    assert stages == ["poison", "poison", "poison"]

    producer.send_many(_examples(_market(BATCH, 6, T0 + timedelta(days=1))))
    producer.flush()
    clean = _update(service)
    assert clean.stage == "registered", clean.reason
    assert clean.metrics["n_examples"] == BATCH
    current = registry.current("light")
    assert current is not None and current.version == clean.version != parent
    assert service.guard.n_quarantined == 3 and service.guard.n_accepted == 1
    service.close()
