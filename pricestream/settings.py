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
from typing import TYPE_CHECKING

import yaml
from pydantic import SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from events.config import KafkaConfig
from events.contract import HotelProfile
from features.config import FeaturesConfig
from infra.config import REPO_ROOT, StackConfig
from pipelines.config import FeatureJobConfig
from pricestream.setting_groups import (
    AuditSettings,
    ColdStartSettings,
    DeliverySettings,
    JobSettings,
    ServiceSettings,
    ServingSettings,
    StackSettings,
    StoreSettings,
)

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


class Settings(BaseSettings, StackSettings, StoreSettings, ServingSettings, AuditSettings, DeliverySettings,
               ServiceSettings, ColdStartSettings, JobSettings):
    """All of pricestream's settings, from ``PRICESTREAM_*`` variables or flags.

    The fields are declared by component in :mod:`pricestream.setting_groups`; this class reads them in one place
    and builds each component's typed config from them (:meth:`kafka`, :meth:`features`, :meth:`delivery`, ...).
    """

    model_config = SettingsConfigDict(env_prefix="PRICESTREAM_", frozen=True, extra="ignore")

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
                                max_outcomes=self.rollout_max_outcomes, margin=self.rollout_margin)

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
