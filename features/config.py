"""Configuration of the feature store side: Feast project, Redis, offline store, writers.

Example:
    >>> cfg = FeaturesConfig(state_dir=Path("/tmp/ps"))
    >>> str(cfg.registry)
    '/tmp/ps/feast/registry.db'
    >>> cfg.feast_connection_string
    '127.0.0.1:6379,db=0'
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from types import MappingProxyType
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from events.config import KafkaConfig

REPO_ROOT = Path(__file__).resolve().parent.parent

# Time to live per view: a windowed count older than its window says nothing about now, so a
# point-in-time join must not reach further back than the window (plus slack for late rows).
DEFAULT_TTLS: MappingProxyType[str, timedelta] = MappingProxyType(
    {
        "stay_1h": timedelta(hours=2),
        "stay_24h": timedelta(days=2),
        "stay_7d": timedelta(days=8),
        "stay_14d": timedelta(days=15),
        "stay_inventory": timedelta(days=30),
        "hotel_stats": timedelta(days=2),
    }
)


class FeaturesConfig(BaseModel):
    """Where the feature store lives and how the writers behave.

    ``project`` isolates tenants and tests: Feast suffixes every Redis key with it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    project: str = Field(default="pricestream", pattern=r"^[A-Za-z0-9][A-Za-z0-9_]*$")
    state_dir: Path = REPO_ROOT / ".state"
    registry_path: Path | None = None
    offline_root: Path | None = None
    snapshot_root: Path | None = None
    redis_url: str = "redis://127.0.0.1:6379/0"
    redis_password: SecretStr | None = None
    redis_username: str | None = None
    """ACL user of a secure Redis (``scorer``, ``writer``); unset: the ``default`` user."""
    redis_timeout_s: float = Field(default=0.5, gt=0)
    redis_wait_replicas: int = Field(default=0, ge=0)
    """Redis Cluster: the online writer acknowledges a batch once this many replicas of each master
    written have it (``WAIT``); 0: on the master's reply (a failover may lose the last ~second)."""
    redis_wait_ms: int = Field(default=100, gt=0)
    """How long ``WAIT`` may block per master before the batch fails and is retried."""
    kafka: KafkaConfig = KafkaConfig()
    topic: str = "features.v1"
    events_topic: str | None = "behaviour.events.accepted"
    """The feature job's accepted events, kept by the offline writer as raw events and history; None: not read."""
    online_group: str = "features-online-writer"
    offline_group: str = "features-offline-writer"
    batch_size: int = Field(default=500, gt=0)
    offline_flush_rows: int = Field(default=50_000, gt=0)
    offline_flush_s: float = Field(default=30.0, gt=0)

    @property
    def registry(self) -> Path:
        return self.registry_path or self.state_dir / "feast" / "registry.db"

    @property
    def offline(self) -> Path:
        return self.offline_root or self.state_dir / "offline"

    @property
    def snapshots(self) -> Path:
        return self.snapshot_root or self.state_dir / "snapshots"

    @property
    def status_file(self) -> Path:
        """Where the online writer publishes its freshness summary (read by ``features status``)."""
        return self.state_dir / "features" / f"online-writer-{self.project}.json"

    @property
    def redis_host_port_db(self) -> tuple[str, int, int]:
        parts = urlsplit(self.redis_url)
        db = int(parts.path.strip("/") or 0)
        return parts.hostname or "127.0.0.1", parts.port or 6379, db

    @property
    def feast_connection_string(self) -> str:
        """Feast's ``host:port,db=N[,password=...]`` form of :attr:`redis_url`."""
        host, port, db = self.redis_host_port_db
        out = f"{host}:{port},db={db}"
        if self.redis_password is not None:
            out += f",password={self.redis_password.get_secret_value()}"
        if self.redis_username is not None:
            out += f",username={self.redis_username}"
        return out
