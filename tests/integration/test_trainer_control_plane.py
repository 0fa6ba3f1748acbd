"""The trainer's own promotion (``auto_promote``) goes out on the control topic, as ``models promote`` does."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from events.admin import create_topics
from events.config import KafkaConfig
from events.producer import Producer
from events.topics import TOPICS
from feedback.errors import FeedbackError
from feedback.registry import ModelRegistry
from feedback.services.trainer_service import Snapshot, TrainerService, TrainerServiceConfig
from pricestream.control import follow, open_registry
from pricestream.settings import Settings
from pricing.models import DemandModelConfig
from pricing.training import train_bundle
from tests.integration.test_trainer_service import BATCH, T0, _examples, _frame, _until_update

pytestmark = pytest.mark.integration


def test_an_auto_promoted_version_is_live_on_the_control_topic(kafka_config: KafkaConfig, tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path / "state", kafka_bootstrap=kafka_config.bootstrap_servers,
                        topic_prefix=kafka_config.topic_prefix, control_plane="kafka")
    create_topics(kafka_config, [TOPICS["training.examples"], TOPICS["training.examples.dlq"]])
    published: list[int] = []
    registry = open_registry(settings, on_published=published.append)
    parent_info = train_bundle(_frame(400, 1, T0 - timedelta(days=30)), tmp_path / "parent", tier="light",
                               config=DemandModelConfig(num_trees=40))
    parent = registry.register(parent_info.path, tier="light", snapshot_id="snap-0")
    registry.promote(parent)
    snapshot = Snapshot("snap-1", _frame(1500, 2, T0 - timedelta(days=5)))
    config = TrainerServiceConfig(kafka=kafka_config, state_dir=tmp_path / "trainer", registry_root=registry.root,
                                  train_every=BATCH, auto_promote=True, bundle=DemandModelConfig(num_trees=20),
                                  max_batch=100, group_id="trainer-test")
    with pytest.raises(FeedbackError, match="registry_root"):
        TrainerService(config, snapshot=snapshot, models=ModelRegistry(tmp_path / "elsewhere"))
    service = TrainerService(config, snapshot=lambda: snapshot, models=registry)
    producer = Producer(kafka_config, topic="training.examples")
    producer.send_many(_examples(_frame(BATCH, 4, T0 + timedelta(days=1)), flip=False))
    producer.flush()
    accepted = _until_update(service)
    service.close()
    assert accepted.stage == "registered" and accepted.promoted, accepted.reason
    assert accepted.version is not None and accepted.version != parent

    follower = follow(settings)  # a replica that starts now catches up from the topic alone
    view = follower.state.registry
    assert view is not None
    assert view.live["light"].version == accepted.version  # the trainer's promotion, not the parent
    assert view.live["light"].onnx_sha256 == registry.show(accepted.version).onnx_sha256
    assert view.change == f"promoted {accepted.version}"
    assert len(published) == 4  # register + promote of the parent, then of the trained version
