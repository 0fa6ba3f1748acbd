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
from typing import TYPE_CHECKING, Literal

import yaml
from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from events.config import KafkaConfig
from events.contract import HotelProfile
from features.config import FeaturesConfig
from infra.config import REPO_ROOT, StackConfig
from pipelines.config import FeatureJobConfig

if TYPE_CHECKING:
    from audit.kafka_anchors import TopicAnchorPublisher
    from delivery import DeliveryConfig
    from delivery.sequential import SequentialConfig
    from infra.druid.config import DruidSettings
    from pipelines.config import OnlineSink
    from pricing.input_guard import InputGuardConfig
    from pricing.output_audit import OutputAuditConfig
    from serving.http import ServiceConfig


SECURE_MARKER = "secure"
"""Under ``<state>/kafka``: written when ``up --secure`` formats the broker (:mod:`infra.kafka`)."""


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
    """``redis://host:port/db`` (one server) or ``redis+cluster://host:port,host:port,...`` (a Redis Cluster)."""
    redis_port: int = 6379
    redis_wait_replicas: int = 0
    """Redis Cluster: the online writer acknowledges a batch once this many replicas have it (``WAIT``)."""
    redis_wait_ms: int = 100
    """How long that ``WAIT`` may block per master before the batch is retried."""
    secure: bool = False
    """``pricestream up --secure``: Redis with ACL users per role (``default`` off)."""
    redis_admin_password: SecretStr | None = None
    """Password of the secure stack's Redis ``admin`` user."""
    redis_scorer_password: SecretStr | None = None
    """Password of the secure stack's Redis ``scorer`` user (reads feature hashes only)."""
    redis_writer_password: SecretStr | None = None
    """Password of the secure stack's Redis ``writer`` user (feature hashes and the CAS / tile scripts)."""
    kafka_passwords: dict[str, SecretStr] = Field(default_factory=dict)
    """SCRAM passwords of a secure stack's Kafka principals, JSON: ``{"admin": ..., "scorer": ...}``."""
    kafka_tls_cert: Path | None = None
    """PEM certificate of the secure stack's broker: its listener speaks SASL_SSL (clients verify it)."""
    kafka_tls_key: Path | None = None
    """PEM private key of ``kafka_tls_cert`` (read by ``pricestream up --secure`` only)."""
    kafka_tls_ca: Path | None = None
    """PEM CA that clients trust for the broker (default: ``kafka_tls_cert``, a self-signed certificate)."""
    redis_tls_cert: Path | None = None
    """PEM certificate of the stack's redis-server: it listens with TLS only; clients get ``rediss://``."""
    redis_tls_key: Path | None = None
    """PEM private key of ``redis_tls_cert`` (read by ``pricestream up`` only)."""
    redis_tls_ca: Path | None = None
    """PEM CA that Redis clients trust (default: ``redis_tls_cert``, a self-signed certificate)."""
    kafka_principal: str | None = None
    """The Kafka principal this process acts as on a secure stack; unset: its command's own (``serve``: scorer,
    ``services run NAME``: NAME, ``produce``: producer, ``jobs run``: features), else ``admin``."""
    redis_user: str | None = None
    """The Redis ACL user this process acts as on a secure stack; unset: its command's own (``serve``: scorer,
    the online writer: writer), else ``admin``."""
    flink_rest_port: int = 8081
    topic_prefix: str = ""
    feature_repo: Path = REPO_ROOT / "features" / "repo"
    offline_root: Path | None = None
    snapshot_root: Path | None = None
    registry_root: Path | None = None
    audit_log: Path | None = None
    rules_file: Path = REPO_ROOT / "pricing" / "rules" / "default.yaml"
    hotels_file: Path | None = None
    """YAML of hotel profiles (``hotel_id: {zone: Europe/Lisbon, price_range: [40, 400]}``) for the contract's
    stay-date rule and outlier flag; without it every hotel is checked in UTC-12 with the default range."""
    druid_url: str = "http://127.0.0.1:18888"
    """Where analysts' SQL and ``druid ingest`` go; unset: the local Druid's router (``druid_host``, its port)."""
    druid_host: str = "127.0.0.1"
    """The address every process of the local Druid (``up --with druid``) binds and advertises: loopback."""
    druid_ports: dict[str, int] = Field(default_factory=dict)
    """Ports of the local Druid by process, JSON (``{"router": 28888, "coordinator": 28081}``): zookeeper, derby,
    coordinator, broker, historical, indexer, router; unset ones keep Druid's own number + 10000."""
    http_host: str = "127.0.0.1"
    http_port: int = Field(default=8000, gt=0, lt=65536)
    deadline_ms: float = 50.0
    group_margin: float = Field(default=0.1, ge=0.0, le=10.0)
    """``/v1/quote:group``: the recommended rate above the displacement minimum (``PRICESTREAM_GROUP_MARGIN``)."""
    group_horizon_days: int = Field(default=450, ge=1, le=3650)
    """``/v1/quote:group``: the furthest night a group may ask for, in days (``PRICESTREAM_GROUP_HORIZON_DAYS``)."""
    http_body_timeout_s: float = Field(default=10.0, gt=0, le=3600)
    """A request body not received whole within this many seconds gets a 408 (``PRICESTREAM_HTTP_BODY_TIMEOUT_S``)."""
    price_decimals: int = Field(default=2, ge=0, le=4)
    """Prices leave rounded to this many decimals: the currency's minor unit (``PRICESTREAM_PRICE_DECIMALS``)."""
    http_max_body_bytes: int = Field(default=64_000, gt=0)
    """Largest HTTP request body (413 above it): 64 kB holds a full batch of 256 requests."""
    http_max_batch: int = Field(default=256, ge=1)
    output_audit: bool = True
    """Clamp served model prices that leave the rules' band or move far from the key's recent median."""
    output_audit_max_move: float = Field(default=0.5, gt=0.0, le=10.0)
    """Largest share a model price may move from its stay key's recent median (0.5: +-50%)."""
    output_audit_action: Literal["clamp", "hold"] = "clamp"
    input_guard: bool = True
    """ML01: impossible or out-of-distribution requests are priced by the rules, not a model (reason recorded)."""
    input_guard_margin: float = Field(default=1.0, ge=0.0, le=100.0)
    """How far past the model's training 1st-99th percentile range an input may go, in widths of that range."""
    """What the output audit does to a breach: clamp to the nearest allowed price, or hold at the median."""
    http_security: Literal["auto", "on", "off"] = "auto"
    """API keys and per-client rate limits on ``/v1/``: ``auto`` turns them on unless ``http_host`` is loopback."""
    http_keys_file: Path | None = None
    """API keys, hashed (``pricestream keys add``); default ``<state>/secrets/api-keys.json``."""
    http_rate_limit: str = "200/second;5000/minute"
    """Per-client limits while security is on (``limits`` notation); above them a request gets 429."""
    http_tls_cert: Path | None = None
    """PEM certificate (chain) of ``serve``'s pricing port: with ``http_tls_key`` it speaks HTTPS only."""
    http_tls_key: Path | None = None
    """Unencrypted PEM private key of ``http_tls_cert``."""
    http_ops_port: int | None = Field(default=None, gt=0, lt=65536)
    """Serve ``/healthz`` and ``/metrics`` on this port (at ``ops_host``) instead of the pricing port."""
    feast_project: str = "pricestream"
    rollout_state: Path | None = None
    reports_dir: Path = REPO_ROOT / "reports"
    seed: int = 7
    reload_interval_s: float = Field(default=5.0, gt=0)
    bootstrap_rows: int = Field(default=6000, ge=200)
    audit_flush_interval_s: float = Field(default=1.0, ge=0)
    """An audit entry is on disk at most this long after its decision (also while idle); 0: every decision."""
    audit_key: SecretStr | None = None
    """HMAC-SHA256 key of the audit chain; unset: a published development key (with a warning)."""
    audit_anchors: Path | None = None
    """Anchor file of the audit log's heads (default ``<audit log>.anchors``); keep it off the log's disk."""
    audit_anchor_interval_s: float = Field(default=1.0, ge=0)
    """The audit log's durable head is anchored at most this often (and at close); 0: every fsync."""
    audit_anchor_topic: Literal["auto", "on", "off"] = "auto"
    """Also publish the audit log's anchors to the ``audit.heads`` topic (and check them in ``audit verify``);
    ``auto``: on a secure stack, where the topic has its own ACL (the scorer writes it, only the admin reads)."""
    follow_interval_s: float = Field(default=0.2, gt=0)
    """How often a server re-reads the rollout state, the registry generation and the router thresholds."""
    router_state: Path | None = None
    recalibrate: bool = False
    """Drift alerts of the monitor move the serving router's thresholds (``DriftAwareRecalibration``)."""
    recalibrate_cooldown_s: float = Field(default=3600.0, ge=0)
    trainer_promotion: Literal["swap", "rollout"] = "swap"
    """What the trainer does with a model that passed its gate: promote it now, or start a rollout of it."""
    canary_share: float = Field(default=0.05, gt=0.0, lt=1.0)
    rollout_min_samples: int = Field(default=30, ge=1)
    rollout_flip_threshold: float = Field(default=0.01, gt=0.0)
    """The shadow gate's flip: a candidate's price more than this (relative) from the live one on the same input."""
    rollout_max_flip_rate: float = Field(default=0.10, ge=0.0, le=1.0)
    """Most shadow inputs a candidate may flip (``delivery.gates.flip_rate_gate``)."""
    rollout_max_ks: float = Field(default=0.10, ge=0.0, le=1.0)
    """Largest Kolmogorov-Smirnov distance between the two arms' prices in shadow."""
    rollout_max_mean_shift: float = Field(default=0.03, ge=0.0)
    """Largest mean relative price change of a candidate over the live model on the same inputs."""
    rollout_alpha: float = Field(default=0.05, gt=0.0, lt=0.5)
    """Error rate of the canary and blend gate (``delivery.sequential``): the chance, over every look together,
    that a candidate no better than the live model is promoted or aborted."""
    rollout_mixture_sd: float = Field(default=0.01, gt=0.0)
    """The sequential gate's mixture spread, in outcome standard deviations: the effect it detects soonest (larger
    finds big effects in fewer outcomes, and small ones later)."""
    rollout_min_outcomes: int = Field(default=2_000, ge=2)
    """Outcomes per arm before the sequential gate may decide; it waits below this."""
    rollout_max_outcomes: int | None = Field(default=None, ge=2)
    """Candidate outcomes after which an undecided rollout ends and the live model stays (``None``: no end)."""
    ops_host: str = "127.0.0.1"
    """Bind address of a stream service's ``/healthz`` and ``/metrics`` (``services run``, ``run``)."""
    ops_base_port: int | None = Field(default=None, gt=0, lt=65000)
    """``pricestream run`` gives its services consecutive ops ports from here (the serve HTTP port aside);
    ``None``: a free block, picked at the first ``run`` of the state dir and recorded in ``<state>/run/ops-ports.json``
    (reused while free), so two deployments on one host never share one (``pricestream.supervision.ops_base``)."""
    grace_s: float = Field(default=30.0, gt=0)
    """A stream service asked to stop (SIGTERM, SIGINT) has this long to finish its batch, flush and commit."""
    log_every_s: float = Field(default=10.0, gt=0)
    """Seconds between two JSON progress lines (records, consumer lag) of a stream service."""
    service_instance: str = "0"
    """Instance id of a transactional service (its ``transactional.id`` and checkpoint directory)."""
    rollout_pair_share: float = Field(default=0.05, ge=0.0, le=1.0)
    """Share of canary/blend requests also priced by the other arm (the paired evidence of the price gates)."""
    decision_time: Literal["decided", "request"] = "decided"
    """A served decision's ``event_time``: when it was made, or its request's ``event_time`` (a simulation or a
    replay, whose label join must measure its horizon from the simulated request time)."""
    bid_config: Path | None = None
    overbooking: bool = False
    """Sell each night beyond its rooms up to its overbooking limit (``PRICESTREAM_OVERBOOKING``;
    :mod:`pricing.overbooking`)."""
    overbooking_no_show_share: float = Field(default=0.02, ge=0.0, lt=1.0)
    overbooking_relocation_cost: float = Field(default=100.0, ge=0.0)
    """Walking a guest costs the night's reference price plus this (``PRICESTREAM_OVERBOOKING_RELOCATION_COST``)."""
    overbooking_max_walks_per_1000: float = Field(default=1.0, ge=0.0, le=1000.0)
    """The bid price's forecast parameters (a ``BidPriceConfig`` JSON, written by ``pricestream bid-price measure``
    from the hotel's behaviour history: booking curve, room shares, stays, cancellations); ``None``: the built-in
    defaults (``pricing.tiers.DEFAULT_CAPACITY``: an exponential curve of mean 30 days over 120)."""

    @field_validator("bid_config", mode="before")
    @classmethod
    def _unset_when_empty(cls, value: object) -> object:
        return None if value == "" else value  # PRICESTREAM_BID_CONFIG= means the built-in defaults

    explore_band: float = Field(default=0.0, ge=0.0, lt=1.0)
    """Relative half-width of the shown-price exploration band of the model tiers (0: no exploration)."""
    explore_arms: int = Field(default=5, ge=1, le=101)
    """Prices in the exploration band (their propensity is logged with each decision)."""
    cold_start_transfer_after_days: float = Field(default=1.0, ge=0.0)
    """Cold start: days since a new hotel's first request before the pooled models price it (``pricing.cold_start``)."""
    cold_start_own_after_labels: int = Field(default=300, ge=1)
    """Cold start: labels of its own before a new hotel's models are refitted on them (stage three)."""
    cold_start_own_after_bookings: int = Field(default=10, ge=0)
    """Cold start: bookings among those labels before the refit."""
    cold_start_own_weight: float | None = Field(default=None, gt=0.0)
    """Cold start: weight of one of the hotel's own labels against one pooled row in the refit (``None``: the
    measured default of ``pricing.cold_start.ColdStartConfig``, which ``bench/cold_start.py`` runs too)."""
    cold_start_rules_bid_floor: bool = True
    """Cold start: stage one prices a new hotel no lower than the night's bid price by the pooled light model
    (``pricing.cold_start.bid_floored``; rule id ``cold_start_bid_floor`` when it raises the rules price)."""
    cold_start_serve: bool = True
    """Cold start in ``serve`` / ``serve-stream`` and the label service: each hotel priced in its stage, recorded
    on the decision as ``cold_start:<stage>`` (``delivery.cold_start``; its history in Redis, its label
    counts added by the label service). On by default: a hotel with no views or bookings in the feature store at
    its first request is priced by rules on its first day. ``false``: every hotel priced as before cold start."""
    cold_start_explore_band: float = Field(default=0.10, ge=0.0, lt=1.0)
    """Cold start in ``serve``: half-width of the exploration band of a new hotel's prices in stage ``transfer``
    (logged propensities, so its own labels identify its elasticity; 0: explored as any hotel, ``explore_band``).
    0.10 with 5 arms is what ``bench/cold_start.py`` measured (``--explore-band``)."""
    cold_start_explore_arms: int = Field(default=5, ge=1, le=101)
    """Cold start in ``serve``: prices in that band."""
    cold_start_partial_windows: bool = True
    """Cold start in ``serve``: a new hotel's window counts read at full length while its history is shorter."""
    cold_start_counts_ttl_s: float = Field(default=30.0, ge=0.0)
    """Cold start in ``serve``: seconds a hotel's label counts are cached (they move at the label service's pace)."""
    cold_start_refit: bool = True
    """Cold start, stage three: the trainer service refits a new hotel in stage ``own`` on its own training
    examples and publishes the bundles under it (``<registry>/hotels``, ``feedback.hotel_refit``), and ``serve``
    prices that hotel's ``own``-stage requests with them. ``false``: the pooled models price every hotel."""
    cold_start_refit_min_examples: int = Field(default=50, ge=50)
    """Cold start: training examples of its own a hotel in stage ``own`` needs before its refit (50 at least: the
    fewest rows a bundle is trained on; the sampler selects a share of its labels)."""
    job_idle_timeout_ms: int | None = Field(default=None, gt=0)
    """The feature job's source idleness timeout (``None``: the job's default)."""
    job_writes_online: bool = True
    """The feature job writes the online store (Redis) itself; ``pricestream run`` then starts no online
    writer (``services run online-writer`` still rebuilds Redis from ``features.v1``)."""
    control_plane: Literal["files", "kafka"] = "files"
    """Where servers learn registry and rollout changes: the local files (one machine), or the compacted
    ``control.v1`` topic that every replica follows (``delivery.control_plane``; commands publish to it)."""
    model_store: Path | None = None
    """Model bundles every replica reads (a shared volume), laid out as ``<tier>/<version>/``; default: the
    registry directory. Control records name a bundle relative to it, with its ONNX sha256."""
    control_catch_up_s: float = Field(default=30.0, gt=0)
    """How long a starting server waits to read the control topic to its end before it serves."""
    heavy_tier: Literal["local", "remote"] = "local"
    """The heavy model in the scorer's process, or as its own service (``pricestream heavy serve``) at ``heavy_url``."""
    heavy_url: str | None = None
    """Base URL of the heavy service (default ``http://<http_host>:<heavy_port>``)."""
    heavy_port: int = Field(default=8100, gt=0, lt=65536)
    """Port of ``pricestream heavy serve``."""
    heavy_deadline_ms: float = Field(default=30.0, gt=0, le=10_000)
    """Longest wait for a remote heavy quote; past it the light model's price stands, flagged degraded."""
    model_backend: Literal["onnx", "compiled"] = "onnx"
    """How the light and heavy tiers score their boosters: onnxruntime, or compiled to machine code by lleaves
    (``pricing.compiled``; compiled at load when the bundle's artefact was built for another CPU or compiler)."""

    @model_validator(mode="before")
    @classmethod
    def _secure_state_dir(cls, data: object) -> object:
        """A state dir that ``up --secure`` started is a secure stack's: its commands log in unless told otherwise.

        Example:
            >>> import tempfile
            >>> state = Path(tempfile.mkdtemp())
            >>> (state / "kafka").mkdir(); (state / "kafka" / "secure").touch()
            >>> Settings(state_dir=state).secure, Settings(state_dir=state, secure=False).secure
            (True, False)
        """
        if isinstance(data, dict) and "secure" not in data:
            state = Path(data.get("state_dir") or REPO_ROOT / ".state")
            if (state / "kafka" / SECURE_MARKER).exists():
                return {**data, "secure": True}
        return data

    @model_validator(mode="before")
    @classmethod
    def _druid_url_of_the_local_router(cls, data: object) -> object:
        """``druid_url`` unset: the router of the local Druid at ``druid_host`` and its (set) port.

        Example:
            >>> Settings(druid_ports={"router": 28888}).druid_url
            'http://127.0.0.1:28888'
        """
        if isinstance(data, dict) and "druid_url" not in data:
            ports = data.get("druid_ports") or {}
            if isinstance(ports, str):
                import json

                ports = json.loads(ports)
            if isinstance(ports, dict) and ("router" in ports or "druid_host" in data):
                router = ports.get("router", 18888)
                return {**data, "druid_url": f"http://{data.get('druid_host', '127.0.0.1')}:{router}"}
        return data

    def druid(self) -> DruidSettings:
        """The local Druid of this stack (``up --with druid``): its state, host and ports.

        Raises:
            pydantic.ValidationError: ``druid_ports`` names a process Druid does not have.
        """
        from infra.druid.config import DruidPorts
        from infra.druid_stack import settings_for

        return settings_for(self._stack(), host=self.druid_host, ports=DruidPorts(**self.druid_ports))

    def stack(self) -> StackConfig:
        """The local stack of these settings, with the passwords ``up --secure`` saved under the state dir."""
        from infra.credentials import with_saved

        return with_saved(self._stack())

    def _stack(self) -> StackConfig:
        return StackConfig(
            state_dir=self.state_dir,
            cache_dir=self.cache_dir,
            kafka_port=self.kafka_port,
            kafka_controller_port=self.kafka_controller_port,
            kafka_heap=self.kafka_heap,
            redis_port=self.redis_port,
            flink_rest_port=self.flink_rest_port,
            secure=self.secure,
            feature_project=self.feast_project,
            redis_passwords={role: secret for role, secret in (("admin", self.redis_admin_password),
                             ("scorer", self.redis_scorer_password), ("writer", self.redis_writer_password))
                             if secret is not None},
            kafka_passwords=self.kafka_passwords,
            kafka_tls_cert=self.kafka_tls_cert,
            kafka_tls_key=self.kafka_tls_key,
            kafka_tls_ca=self.kafka_tls_ca,
            redis_tls_cert=self.redis_tls_cert,
            redis_tls_key=self.redis_tls_key,
            redis_tls_ca=self.redis_tls_ca,
        )

    def kafka_client(self, principal: str = "admin") -> dict[str, object]:
        """librdkafka settings of a client acting as ``principal``: bootstrap, and SASL/SCRAM when secure."""
        from infra.kafka_security import client_config

        return client_config(self.stack(), principal) | {"bootstrap.servers": self.kafka().bootstrap_servers}

    def kafka(self) -> KafkaConfig:
        """Kafka of these settings; on a secure stack with the SASL/SCRAM login of :attr:`principal`."""
        bootstrap = self.kafka_bootstrap or self.stack().kafka_bootstrap
        if not self.secure:
            return KafkaConfig(bootstrap_servers=bootstrap, topic_prefix=self.topic_prefix)
        from infra.kafka_security import client_config

        conf = client_config(self.stack(), self.principal)
        return KafkaConfig(bootstrap_servers=bootstrap, topic_prefix=self.topic_prefix,
                           security_protocol=str(conf["security.protocol"]),
                           sasl_mechanism=str(conf["sasl.mechanisms"]),
                           sasl_username=self.principal, sasl_password=SecretStr(str(conf["sasl.password"])),
                           ssl_ca_location=conf.get("ssl.ca.location"))

    @property
    def principal(self) -> str:
        """The Kafka principal of this process (``kafka_principal``, default ``admin``)."""
        return self.kafka_principal or "admin"

    def acting_as(self, principal: str, *, redis_user: str | None = None) -> Settings:
        """These settings with ``principal`` (and ``redis_user``) as defaults: an explicit setting still wins.

        Example:
            >>> Settings().acting_as("scorer", redis_user="scorer").principal
            'scorer'
            >>> Settings(kafka_principal="trainer").acting_as("scorer").principal
            'trainer'
        """
        return self.model_copy(update={"kafka_principal": self.kafka_principal or principal,
                                       "redis_user": self.redis_user or redis_user})

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

    def service_dir(self, name: str) -> Path:
        """State of one stream service instance (checkpoints): ``<data>/services/<name>/<instance>``."""
        return self.data_dir / "services" / name / self.service_instance

    def models_store(self) -> Path:
        """Where replicas read model bundles (``model_store``, default the registry directory)."""
        return self.model_store or self.registry()

    def heavy_endpoint(self) -> str:
        """Where the remote heavy tier answers (``heavy_url``, default this host's ``heavy_port``)."""
        return self.heavy_url or f"http://{self.http_host}:{self.heavy_port}"

    def rollout(self) -> Path:
        """State file of progressive delivery (``pricestream rollout ...``)."""
        return self.rollout_state or self.data_dir / "rollout" / "rollout.json"

    def router_thresholds(self) -> Path:
        """State file of the serving router's thresholds (written by recalibration, followed by servers)."""
        return self.router_state or self.data_dir / "router" / "thresholds.json"

    def keys_file(self) -> Path:
        """The API keys file (``http_keys_file``, default under the state dir)."""
        return self.http_keys_file or self.state_dir / "secrets" / "api-keys.json"

    def http_service(self, host: str | None = None) -> ServiceConfig:
        """The HTTP service's limits and security for a bind at ``host`` (default ``http_host``).

        Raises:
            serving.auth.AuthError: ``http_security=off`` with a bind beyond loopback.
        """
        from serving.auth import auth_required
        from serving.http import ServiceConfig

        secure = auth_required(self.http_security, host or self.http_host)
        return ServiceConfig(max_body_bytes=self.http_max_body_bytes, max_batch=self.http_max_batch,
                             keys_file=self.keys_file() if secure else None,
                             rate_limit=self.http_rate_limit if secure else None,
                             ops_routes=self.http_ops_port is None,
                             tls_cert=self.http_tls_cert, tls_key=self.http_tls_key,
                             body_timeout_s=self.http_body_timeout_s, group_margin=self.group_margin,
                             group_horizon_days=self.group_horizon_days)

    def audit_topic_anchors(self) -> bool:
        """Whether audit anchors go to (and are verified against) the ``audit.heads`` topic."""
        return self.audit_anchor_topic == "on" or (self.audit_anchor_topic == "auto" and self.secure)

    def audit_anchor_publisher(self, log_path: Path) -> TopicAnchorPublisher | None:
        """The ``on_anchor`` hook of a serving audit log at ``log_path`` (None when topic anchors are off)."""
        from audit.kafka_anchors import TopicAnchorPublisher

        return TopicAnchorPublisher(self.kafka(), log_path) if self.audit_topic_anchors() else None

    def input_guard_config(self) -> InputGuardConfig | None:
        """The scorer's input guard (None when ``input_guard`` is off)."""
        from pricing.input_guard import InputGuardConfig

        return InputGuardConfig(margin=self.input_guard_margin) if self.input_guard else None

    def output_audit_config(self) -> OutputAuditConfig | None:
        """The serving path's output audit (None when ``output_audit`` is off)."""
        from pricing.output_audit import OutputAuditConfig

        if not self.output_audit:
            return None
        return OutputAuditConfig(max_move=self.output_audit_max_move, action=self.output_audit_action,
                                 price_decimals=self.price_decimals)

    def delivery(self) -> DeliveryConfig:
        """Progressive delivery settings: the state file, the canary share and the gates' sample floor."""
        from delivery import DeliveryConfig, GateLimits

        return DeliveryConfig(state_path=self.rollout(), canary_share=self.canary_share,
                              limits=GateLimits(min_samples=self.rollout_min_samples,
                                                flip_threshold=self.rollout_flip_threshold,
                                                max_flip_rate=self.rollout_max_flip_rate, max_ks=self.rollout_max_ks,
                                                max_mean_shift=self.rollout_max_mean_shift,
                                                sequential=self._sequential()))

    def _sequential(self) -> SequentialConfig:
        from delivery.sequential import SequentialConfig

        return SequentialConfig(alpha=self.rollout_alpha, mixture_sd=self.rollout_mixture_sd,
                                min_outcomes=self.rollout_min_outcomes,
                                max_outcomes=self.rollout_max_outcomes)

    def features(self) -> FeaturesConfig:
        """Feature-store settings (Feast project, Redis, offline store, snapshots) under the data dir."""
        return FeaturesConfig(
            project=self.feast_project,
            state_dir=self.data_dir,
            offline_root=self.offline(),
            snapshot_root=self.snapshots(),
            redis_url=self.redis(),
            redis_wait_replicas=self.redis_wait_replicas,
            redis_wait_ms=self.redis_wait_ms,
            kafka=self.kafka(),
            **self._redis_login(),
        )

    def _redis_login(self) -> dict[str, object]:
        """``redis_username`` / ``redis_password`` of :attr:`redis_user` on a secure stack (none otherwise)."""
        if not self.secure:
            return {}
        role = self.redis_user or "admin"
        secret = self.stack().redis_passwords.get(role)
        if secret is None:  # a process that never opens Redis (the offline writer) needs no Redis login
            return {"redis_username": role}
        return {"redis_username": role, "redis_password": secret}

    def _job_online_sink(self) -> OnlineSink:
        """The feature job's own Redis sink: this Redis and project, as the ``writer`` user on a secure stack."""
        from pipelines.config import OnlineSink

        login: dict[str, object] = {}
        if self.secure:
            secret = self.stack().redis_passwords.get("writer")
            login = {"username": "writer", "password": secret.get_secret_value() if secret else None}
        return OnlineSink(redis_url=self.redis(), project=self.feast_project, **login)

    def hotel_profiles(self) -> dict[str, HotelProfile]:
        """The profiles of ``hotels_file`` (none without it).

        Raises:
            ValueError: the file is not a mapping of hotel ids to valid profiles (names the hotel and field).
        """
        if self.hotels_file is None:
            return {}
        raw = yaml.safe_load(self.hotels_file.read_text(encoding="utf-8")) or {}
        if not isinstance(raw, dict):
            msg = f"{self.hotels_file}: expected a mapping of hotel_id to profile, got {type(raw).__name__}"
            raise ValueError(msg)
        return {str(hotel): HotelProfile.model_validate(profile) for hotel, profile in raw.items()}

    def feature_job(self, **overrides: object) -> FeatureJobConfig:
        """The Flink feature job's config: this Kafka, the resolved connector jar, checkpoints under state."""
        kafka = self.acting_as("features").kafka()
        fields: dict[str, object] = {
            "bootstrap_servers": kafka.bootstrap_servers,
            "topic_prefix": kafka.topic_prefix,
            "connector_jar": self.stack().flink_kafka_connector_jar,
            "checkpoint_dir": self.state_dir / "flink" / "feature-job-checkpoints",
            "hotels": self.hotel_profiles(),
        }
        if self.secure:  # the job's own principal unless this process was given one
            from infra.kafka_security import java_client_properties

            fields["kafka_properties"] = java_client_properties(self.stack(), self.kafka_principal or "features")
        if self.job_idle_timeout_ms is not None:
            fields["idle_timeout_ms"] = self.job_idle_timeout_ms
        if self.job_writes_online:
            fields["online"] = self._job_online_sink()
        return FeatureJobConfig.model_validate(fields | {k: v for k, v in overrides.items() if v is not None})
