"""A drift alarm's update request reaches the trainer service on real Kafka: it updates before ``train_every``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from events.admin import create_topics
from events.config import KafkaConfig
from events.producer import Producer
from events.topics import TOPICS
from feedback.monitors.alarms import UPDATE_REQUESTS, UpdateRequests
from feedback.monitors.drift import DriftReport, FeatureDrift
from feedback.registry import ModelRegistry
from feedback.services.trainer_service import Snapshot, TrainerService, TrainerServiceConfig
from pricing.models import DemandModelConfig
from pricing.training import train_bundle
from tests.integration.test_trainer_service import _examples, _frame

pytestmark = pytest.mark.integration

T0 = datetime(2026, 6, 1, tzinfo=UTC)


def _drain(service: TrainerService, batches: int = 12) -> list[int]:
    """Requests answered per batch, over ``batches`` polls."""
    return [service.process_batch().requested for _ in range(batches)]


def test_a_drift_request_runs_the_update_without_waiting_for_train_every(kafka_config: KafkaConfig,
                                                                        tmp_path: Path) -> None:
    create_topics(kafka_config, [TOPICS["training.examples"], TOPICS["training.examples.dlq"]])
    registry = ModelRegistry(tmp_path / "registry")
    parent = train_bundle(_frame(400, 1, T0 - timedelta(days=30)), tmp_path / "parent", tier="light",
                          config=DemandModelConfig(num_trees=40))
    registry.promote(registry.register(parent.path, tier="light", snapshot_id="snap-0"))
    snapshot = Snapshot("snap-1", _frame(1500, 2, T0 - timedelta(days=5)))
    config = TrainerServiceConfig(kafka=kafka_config, state_dir=tmp_path / "trainer", registry_root=registry.root,
                                  train_every=5_000, request_min_examples=200, bundle=DemandModelConfig(num_trees=20),
                                  max_batch=100, group_id="trainer-drift-test")
    assert config.requests_path == registry.root / UPDATE_REQUESTS
    service = TrainerService(config, snapshot=lambda: snapshot)
    producer = Producer(kafka_config, topic="training.examples")
    producer.send_many(_examples(_frame(300, 3, T0), flip=False))
    producer.flush()
    assert sum(_drain(service)) == 0 and len(service.buffer) == 300  # 300 < train_every: no update, no request
    assert service.totals.updates == []

    report = DriftReport(T0, 600, (FeatureDrift("comp_rate_min_24h", 600, 0.9, 0.8, 0.25, True),))
    assert UpdateRequests(config.requests_path).request(report) == f"request 1 written to {UPDATE_REQUESTS}"
    producer.send_many(_examples(_frame(20, 4, T0 + timedelta(hours=1)), flip=False))
    producer.flush()
    answered = _drain(service)
    assert sum(answered) == 1 and len(service.totals.updates) == 1  # one update, for the one request
    update = service.totals.updates[0]
    assert update.n_examples == 320 and update.stage in ("registered", "guard"), update.reason
    assert service.requests_seen == 1 and service.buffer == []
    service.close()

    restarted = TrainerService(config, snapshot=lambda: snapshot)  # the handled request is in the checkpoint
    assert restarted.requests_seen == 1
    restarted.close()
