"""Settings: the one place that reads the environment (``PRICESTREAM_*``).

Every CLI flag has an environment variable: ``PRICESTREAM_KAFKA_BOOTSTRAP``,
``PRICESTREAM_REDIS_URL``, ``PRICESTREAM_STATE_DIR`` and so on. Domain packages
receive the explicit config objects built here.

Example:
    >>> Settings(kafka_bootstrap="k:9092").kafka().bootstrap_servers
    'k:9092'
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from events.config import KafkaConfig
from infra.config import REPO_ROOT, StackConfig


class Settings(BaseSettings):
    """All of pricestream's settings, from ``PRICESTREAM_*`` variables or flags."""

    model_config = SettingsConfigDict(env_prefix="PRICESTREAM_", frozen=True, extra="ignore")

    state_dir: Path = REPO_ROOT / ".state"
    cache_dir: Path = REPO_ROOT / ".cache"
    kafka_bootstrap: str | None = None
    kafka_port: int = 9092
    kafka_controller_port: int = 9093
    kafka_heap: str = "768m"
    redis_url: str | None = None
    redis_port: int = 6379
    flink_rest_port: int = 8081
    topic_prefix: str = ""
    feature_repo: Path = REPO_ROOT / "features" / "repo"
    offline_root: Path | None = None
    snapshot_root: Path | None = None
    registry_root: Path | None = None
    audit_log: Path | None = None
    rules_file: Path = REPO_ROOT / "pricing" / "rules" / "default.yaml"
    druid_url: str = "http://127.0.0.1:18888"
    http_host: str = "127.0.0.1"
    http_port: int = Field(default=8000, gt=0, lt=65536)
    deadline_ms: float = 50.0

    def stack(self) -> StackConfig:
        return StackConfig(
            state_dir=self.state_dir,
            cache_dir=self.cache_dir,
            kafka_port=self.kafka_port,
            kafka_controller_port=self.kafka_controller_port,
            kafka_heap=self.kafka_heap,
            redis_port=self.redis_port,
            flink_rest_port=self.flink_rest_port,
        )

    def kafka(self) -> KafkaConfig:
        return KafkaConfig(
            bootstrap_servers=self.kafka_bootstrap or self.stack().kafka_bootstrap, topic_prefix=self.topic_prefix
        )

    def redis(self) -> str:
        return self.redis_url or self.stack().redis_url

    @property
    def data_dir(self) -> Path:
        return self.state_dir / "data"

    def offline(self) -> Path:
        return self.offline_root or self.data_dir / "offline"

    def snapshots(self) -> Path:
        return self.snapshot_root or self.data_dir / "snapshots"

    def registry(self) -> Path:
        return self.registry_root or self.data_dir / "registry"

    def audit(self) -> Path:
        return self.audit_log or self.data_dir / "audit" / "decisions.jsonl"
