"""Settings of the local stack: ports, heap sizes and paths (data, not literals)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

REPO_ROOT = Path(__file__).resolve().parent.parent


class StackConfig(BaseModel):
    """Where the local stack keeps its state and which ports it binds.

    Example:
        >>> cfg = StackConfig(state_dir=Path("/tmp/ps"))
        >>> cfg.kafka_bootstrap
        '127.0.0.1:9092'
        >>> cfg.pid_file("redis").name
        'redis.pid'
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    state_dir: Path = REPO_ROOT / ".state"
    cache_dir: Path = REPO_ROOT / ".cache"
    host: str = "127.0.0.1"
    kafka_port: int = Field(default=9092, gt=0, lt=65536)
    kafka_controller_port: int = Field(default=9093, gt=0, lt=65536)
    kafka_heap: str = "768m"
    kafka_transaction_max_timeout_ms: int = 900_000
    redis_port: int = Field(default=6379, gt=0, lt=65536)
    flink_rest_port: int = Field(default=8081, gt=0, lt=65536)
    flink_taskmanager_slots: int = Field(default=2, ge=1)
    flink_taskmanagers: int = Field(default=1, ge=1)
    """TaskManager processes of the standalone cluster (``pricestream flink up --taskmanagers N``)."""
    flink_process_memory: str = "1600m"
    java_home: Path | None = None
    mvn: str = "mvn"
    ready_timeout_s: float = Field(default=90.0, gt=0)
    secure: bool = False
    """Start Redis with ACL users per role (``default`` off) instead of an open server."""
    feature_project: str = "pricestream"
    """Feast project: feature keys end with it, and the Redis roles' key pattern is ``*<project>``."""
    redis_passwords: dict[str, SecretStr] = Field(default_factory=dict)
    """Passwords of the Redis roles (``admin``, ``scorer``, ``writer``) for a secure stack."""
    kafka_passwords: dict[str, SecretStr] = Field(default_factory=dict)
    """SCRAM passwords of the Kafka principals (``admin``, ``producer``, ``scorer``, ``trainer``), secure stack."""
    kafka_tls_cert: Path | None = None
    """PEM certificate (chain) of the broker: a secure stack then listens with SASL_SSL instead of SASL_PLAINTEXT."""
    kafka_tls_key: Path | None = None
    """PEM private key of ``kafka_tls_cert`` (unencrypted; keep it mode 0600)."""
    kafka_tls_ca: Path | None = None
    """PEM CA that clients trust for the broker (default: ``kafka_tls_cert`` itself, a self-signed certificate)."""
    redis_tls_cert: Path | None = None
    """PEM certificate of redis-server: it then listens with TLS only (``tls-port``; the plain port is off)."""
    redis_tls_key: Path | None = None
    """PEM private key of ``redis_tls_cert`` (unencrypted; keep it mode 0600)."""
    redis_tls_ca: Path | None = None
    """PEM CA that Redis clients trust (default: ``redis_tls_cert`` itself, a self-signed certificate)."""

    @model_validator(mode="after")
    def _secure_beyond_loopback(self) -> StackConfig:
        """A stack bound beyond loopback is a secure one: no open broker or Redis on a network.

        Example:
            >>> try:
            ...     StackConfig(host="0.0.0.0")
            ... except ValueError as e:
            ...     print("expected a loopback address, or secure=True" in str(e))
            True
            >>> StackConfig(host="0.0.0.0", secure=True).secure
            True
        """
        import ipaddress

        try:
            loopback = ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            loopback = self.host == "localhost"
        if not loopback and not self.secure:
            msg = (f"host: got {self.host!r} with secure=False, expected a loopback address, or secure=True "
                   "(pricestream up --secure) for a stack bound beyond loopback")
            raise ValueError(msg)
        return self

    @property
    def kafka_tls(self) -> bool:
        """The broker listener speaks TLS (a secure stack with a certificate)."""
        return self.secure and self.kafka_tls_cert is not None

    @property
    def kafka_ca(self) -> Path | None:
        """What clients trust for the broker's certificate (None without TLS)."""
        return (self.kafka_tls_ca or self.kafka_tls_cert) if self.kafka_tls else None

    @property
    def kafka_bootstrap(self) -> str:
        return f"{self.host}:{self.kafka_port}"

    @property
    def redis_tls(self) -> bool:
        """redis-server speaks TLS only (a certificate is configured)."""
        return self.redis_tls_cert is not None

    @property
    def redis_ca(self) -> Path | None:
        """What Redis clients trust for the server's certificate (None without TLS)."""
        return (self.redis_tls_ca or self.redis_tls_cert) if self.redis_tls else None

    @property
    def redis_url(self) -> str:
        """``redis://host:port/0``; with TLS ``rediss://...?ssl_ca_certs=<CA>`` (redis-py reads both from the URL).

        Example:
            >>> StackConfig(redis_port=6390, redis_tls_cert=Path("/c/r.pem")).redis_url
            'rediss://127.0.0.1:6390/0?ssl_ca_certs=%2Fc%2Fr.pem'
        """
        if self.redis_ca is None:
            return f"redis://{self.host}:{self.redis_port}/0"
        return f"rediss://{self.host}:{self.redis_port}/0?ssl_ca_certs={quote(str(self.redis_ca), safe='')}"

    def pid_file(self, service: str) -> Path:
        return self.state_dir / "pids" / f"{service}.pid"

    def log_file(self, service: str) -> Path:
        return self.state_dir / "logs" / f"{service}.log"

    def jar_dir(self, bundle: str) -> Path:
        return self.cache_dir / "jars" / bundle

    @property
    def flink_kafka_connector_jar(self) -> Path:
        """The Flink Kafka SQL connector jar, as resolved by ``infra/maven/flink/pom.xml``."""
        jars = sorted(self.jar_dir("flink").glob("flink-sql-connector-kafka-*.jar"))
        if jars:
            return jars[-1]
        return self.jar_dir("flink") / "flink-sql-connector-kafka.jar"
