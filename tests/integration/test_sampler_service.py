"""Sampler service on real Kafka: a crash mid-transaction, restart, and the same selection as a clean run."""

from __future__ import annotations

import multiprocessing
import os
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from events.admin import create_topics
from events.config import KafkaConfig
from events.models import OutcomeLabel, TrainingExample, parse_event
from events.producer import Producer
from events.topics import TOPICS
from feedback.online import OnlineDemandModel
from feedback.registry import ModelRegistry
from feedback.samplers import SamplerConfig
from feedback.services.kafka_io import drain
from feedback.services.sampler_service import SamplerService, SamplerServiceConfig, run
from pricing.models import DemandModelConfig
from pricing.training import train_bundle
from pricing.vectorize import HEAVY_COLUMNS

pytestmark = pytest.mark.integration

T0 = datetime(2026, 4, 1, tzinfo=UTC)
N_LABELS = 160


def _frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.uniform(0, 1, size=(n, len(HEAVY_COLUMNS))), columns=list(HEAVY_COLUMNS))
    frame["price"] = rng.uniform(50, 300, n)
    logit = (150 - frame["price"]) / 40 + 2 * (frame["occupancy"] - 0.5)
    frame["booked"] = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    return frame


def _models(root: Path) -> tuple[Path, Path]:
    """A registry with promoted light and heavy bundles, and a saved online model."""
    reg = ModelRegistry(root / "registry")
    frame = _frame(600, 0)
    small = DemandModelConfig(num_trees=15)
    for tier, cfg in (("light", small), ("heavy", small.model_copy(update={"n_members": 2}))):
        info = train_bundle(frame, root / f"bundle-{tier}", tier=tier, config=cfg)  # type: ignore[arg-type]
        reg.promote(reg.register(info.path, tier=tier, snapshot_id="snap-0"))
    online = OnlineDemandModel()
    for row in frame.head(200).itertuples():
        online.learn_one({"price": row.price, "occupancy": row.occupancy}, int(row.booked))
    return reg.root, online.save(root / "online.pkl")


def _labels() -> list[OutcomeLabel]:
    rng = np.random.default_rng(7)
    out = []
    for i in range(N_LABELS):
        values = rng.uniform(0, 1, len(HEAVY_COLUMNS) - 1)
        features: dict[str, float | None] = {c: float(v) for c, v in zip(HEAVY_COLUMNS[1:], values, strict=True)}
        out.append(OutcomeLabel(
            hotel_id=f"h{i % 5}", room_type="std", stay_date=date(2026, 5, 1), event_time=T0 + timedelta(minutes=i),
            decision_id=uuid.uuid4(), label=int(rng.random() < 0.4), price=float(rng.uniform(60, 280)),
            tier="light", predicted_prob=float(rng.uniform(0.05, 0.95)), features=features,
        ))
    return out


def _config(kafka: KafkaConfig, root: Path, tmp: Path, online: Path) -> SamplerServiceConfig:
    return SamplerServiceConfig(
        kafka=kafka, checkpoint_dir=tmp / "ckpt", registry_root=root, online_model_path=online,
        group_id="sampler-test", transactional_id=f"sampler-{kafka.topic_prefix}", max_batch=40,
        poll_timeout_s=0.5, sampler=SamplerConfig(c=1.5, floor=0.05, seed=3),
    )


def _crash_child(config_json: str, marker: str) -> None:
    """Commit one batch, then die (os._exit) after producing the next batch's examples, before its commit."""
    service = SamplerService(SamplerServiceConfig.model_validate_json(config_json))
    while service.process_batch().consumed == 0:
        continue

    def die(produced: int) -> None:
        Path(marker).write_text(str(produced), encoding="utf-8")
        os._exit(17)

    for _ in range(50):
        service.process_batch(before_commit=die)
    os._exit(3)  # never got a second batch


def _examples(kafka: KafkaConfig) -> list[TrainingExample]:
    out = [parse_event(m.value() or b"") for m in drain(kafka, "training.examples")]
    return [x for x in out if isinstance(x, TrainingExample)]


def test_crash_mid_batch_then_restart_matches_an_uninterrupted_run(stack: object, tmp_path: Path) -> None:
    root, online = _models(tmp_path)
    labels = _labels()
    runs = {}
    for name in ("clean", "crash"):
        kafka = KafkaConfig(topic_prefix=f"t{uuid.uuid4().hex[:10]}-")
        create_topics(kafka, [TOPICS[n] for n in ("feedback.labels", "feedback.labels.dlq", "training.examples")])
        with Producer(kafka, topic="feedback.labels") as producer:
            producer.send_many(labels)
        runs[name] = (kafka, _config(kafka, root, tmp_path / name, online))

    clean_kafka, clean_cfg = runs["clean"]
    stats = run(clean_cfg, max_idle_s=3.0)
    assert stats.consumed == N_LABELS
    models = stats.step["models"]
    assert isinstance(models, dict) and set(models) == {"light", "heavy", "online"}

    crash_kafka, crash_cfg = runs["crash"]
    marker = tmp_path / "crashed"
    child = multiprocessing.get_context("spawn").Process(
        target=_crash_child, args=(crash_cfg.model_dump_json(), str(marker))
    )
    child.start()
    child.join(timeout=180)
    assert child.exitcode == 17
    assert int(marker.read_text(encoding="utf-8")) > 0  # the dead batch had produced examples
    resumed = run(crash_cfg, max_idle_s=3.0)
    assert resumed.step["restored_seq"] == 1
    assert resumed.consumed == N_LABELS - 40

    clean = _examples(clean_kafka)
    crashed = _examples(crash_kafka)
    ids = [str(x.decision_id) for x in crashed]
    assert len(ids) == len(set(ids))
    assert set(ids) == {str(x.decision_id) for x in clean}
    assert 0 < len(clean) < N_LABELS
    assert all(x.weight == pytest.approx(1.0 / x.selection_prob) and x.strategy == "committee" for x in clean)
