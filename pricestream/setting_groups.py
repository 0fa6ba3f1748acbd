"""The settings of each component: the fields of :class:`pricestream.settings.Settings`, grouped.

Each class holds one component's fields (their environment variables are ``PRICESTREAM_`` + the field name in
capitals, read by :class:`~pricestream.settings.Settings`, which inherits them all): a reader finds what
configures ``serve`` in :class:`ServingSettings`, what the rollout gates read in :class:`DeliverySettings`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator

from infra.config import REPO_ROOT


class StackSettings(BaseModel):
    """Where the stack runs and how to reach it: Kafka, Redis, Flink, Druid, and the secure stack's logins."""

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
    druid_url: str = "http://127.0.0.1:18888"
    """Where analysts' SQL and ``druid ingest`` go; unset: the local Druid's router (``druid_host``, its port)."""
    druid_host: str = "127.0.0.1"
    """The address every process of the local Druid (``up --with druid``) binds and advertises: loopback."""
    druid_ports: dict[str, int] = Field(default_factory=dict)
    """Ports of the local Druid by process, JSON (``{"router": 28888, "coordinator": 28081}``): zookeeper, derby,
    coordinator, broker, historical, indexer, router; unset ones keep Druid's own number + 10000."""


class StoreSettings(BaseModel):
    """Where the data lives: the feature repo, the offline store, snapshots, models, rules, reports."""

    feature_repo: Path = REPO_ROOT / "features" / "repo"
    offline_root: Path | None = None
    snapshot_root: Path | None = None
    registry_root: Path | None = None
    audit_log: Path | None = None
    rules_file: Path = REPO_ROOT / "pricing" / "rules" / "default.yaml"
    hotels_file: Path | None = None
    """YAML of hotel profiles (``hotel_id: {zone: Europe/Lisbon, price_range: [40, 400]}``) for the contract's
    stay-date rule and outlier flag; without it every hotel is checked in UTC-12 with the default range."""
    feast_project: str = "pricestream"
    rollout_state: Path | None = None
    reports_dir: Path = REPO_ROOT / "reports"
    router_state: Path | None = None
    bid_config: Path | None = None
    """The bid price's forecast parameters (a ``BidPriceConfig`` JSON, written by ``pricestream bid-price measure``
    from the hotel's behaviour history: booking curve, room shares, stays, cancellations); ``None``: the built-in
    defaults (``pricing.tiers.DEFAULT_CAPACITY``: an exponential curve of mean 30 days over 120)."""

    @field_validator("bid_config", mode="before")
    @classmethod
    def _unset_when_empty(cls, value: object) -> object:
        return None if value == "" else value  # PRICESTREAM_BID_CONFIG= means the built-in defaults

    model_store: Path | None = None
    """Model bundles every replica reads (a shared volume), laid out as ``<tier>/<version>/``; default: the
    registry directory. Control records name a bundle relative to it, with its ONNX sha256."""


class ServingSettings(BaseModel):
    """``serve``: the HTTP API, its limits and security, the pricer's models and what it may do to a price."""

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
    seed: int = 7
    reload_interval_s: float = Field(default=5.0, gt=0)
    bootstrap_rows: int = Field(default=6000, ge=200)
    decision_time: Literal["decided", "request"] = "decided"
    """A served decision's ``event_time``: when it was made, or its request's ``event_time`` (a simulation or a
    replay, whose label join must measure its horizon from the simulated request time)."""
    overbooking: bool = False
    """Sell each night beyond its rooms up to its overbooking limit (``PRICESTREAM_OVERBOOKING``;
    :mod:`pricing.overbooking`)."""
    overbooking_no_show_share: float = Field(default=0.02, ge=0.0, lt=1.0)
    overbooking_relocation_cost: float = Field(default=100.0, ge=0.0)
    """Walking a guest costs the night's reference price plus this (``PRICESTREAM_OVERBOOKING_RELOCATION_COST``)."""
    overbooking_max_walks_per_1000: float = Field(default=1.0, ge=0.0, le=1000.0)
    """Most guests walked per 1,000 room-nights sold that the overbooking limit allows."""
    explore_band: float = Field(default=0.0, ge=0.0, lt=1.0)
    """Relative half-width of the shown-price exploration band of the model tiers (0: no exploration)."""
    explore_arms: int = Field(default=5, ge=1, le=101)
    """Prices in the exploration band (their propensity is logged with each decision)."""
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


class AuditSettings(BaseModel):
    """The audit log of served decisions: its flushes, key and anchors."""

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


class DeliverySettings(BaseModel):
    """Progressive delivery: the router's recalibration, the trainer's promotion, rollout gates, control plane."""

    follow_interval_s: float = Field(default=0.2, gt=0)
    """How often a server re-reads the rollout state, the registry generation and the router thresholds."""
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
    rollout_margin: float = Field(default=0.0, ge=0.0, lt=1.0)
    """The sequential gate's non-inferiority margin, a share of the incumbent's net value per request: promote
    once a loss beyond it is ruled out (0: only a candidate shown better; ``delivery.sequential``)."""
    rollout_pair_share: float = Field(default=0.05, ge=0.0, le=1.0)
    """Share of canary/blend requests also priced by the other arm (the paired evidence of the price gates)."""
    control_plane: Literal["files", "kafka"] = "files"
    """Where servers learn registry and rollout changes: the local files (one machine), or the compacted
    ``control.v1`` topic that every replica follows (``delivery.control_plane``; commands publish to it)."""
    control_catch_up_s: float = Field(default=30.0, gt=0)
    """How long a starting server waits to read the control topic to its end before it serves."""


class ServiceSettings(BaseModel):
    """The stream services of ``services run`` and ``pricestream run``: ops ports, stops, logs."""

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


class ColdStartSettings(BaseModel):
    """Cold start of a new hotel: its stages, exploration and refit (``pricing.cold_start``)."""

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


class JobSettings(BaseModel):
    """The Flink feature job."""

    job_idle_timeout_ms: int | None = Field(default=None, gt=0)
    """The feature job's source idleness timeout (``None``: the job's default)."""
    job_writes_online: bool = True
    """The feature job writes the online store (Redis) itself; ``pricestream run`` then starts no online
    writer (``services run online-writer`` still rebuilds Redis from ``features.v1``)."""
