"""Shared helpers for the feature-store integration tests (rows, configs, Redis cleanup)."""

from __future__ import annotations

from pathlib import Path

import redis

from events.catalog import VIEWS
from events.config import KafkaConfig
from features.config import FeaturesConfig
from features.rows import FeatureRow
from infra.config import StackConfig

T0_MS = 1_764_460_800_000  # 2025-11-30T00:00:00Z


def features_config(
    stack: StackConfig, key_prefix: str, tmp_path: Path, kafka: KafkaConfig | None = None
) -> FeaturesConfig:
    return FeaturesConfig(
        project=key_prefix.rstrip(":"),
        state_dir=tmp_path,
        redis_url=stack.redis_url,
        kafka=kafka or KafkaConfig(bootstrap_servers=stack.kafka_bootstrap),
    )


def make_row(view: str, hotel: str, *, room: str = "std", stay: str = "2026-12-24", version: int,
             offset_ms: int = 0, base: float = 1.0) -> FeatureRow:
    """A row whose feature values encode the version (so a stale write is visible in the values)."""
    keys, names = VIEWS[view]
    stay_key = "room_type" in keys
    values = {name: base * version + i / 8 for i, name in enumerate(names)}
    if "occupancy" in values:
        values["occupancy"] = (version % 100) / 100
    return FeatureRow(hotel_id=hotel, view=view, room_type=room if stay_key else None,
                      stay_date=stay if stay_key else None, feature_time=T0_MS + offset_ms + version % 1_000_000,
                      version=version, publish_time=T0_MS + offset_ms + version % 1_000_000, features=values)


def drop_project_keys(config: FeaturesConfig) -> int:
    """Delete this test's hashes (every Feast key ends with the project name)."""
    host, port, db = config.redis_host_port_db
    client = redis.Redis(host=host, port=port, db=db)
    keys = list(client.scan_iter(match=b"*" + config.project.encode(), count=1000))
    if keys:
        client.delete(*keys)
    client.close()
    return len(keys)
