"""Shared fixtures: the real local stack (Kafka, Redis) and per-test isolation."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import prometheus_client.values  # noqa: F401  (before feast: see features/__init__.py)
import pytest

from events.config import KafkaConfig
from infra.config import StackConfig


@pytest.fixture(scope="session")
def stack_config() -> StackConfig:
    """The stack of ``PRICESTREAM_*`` settings (ports, state dir), so two suites can run side by side."""
    from pricestream.settings import Settings

    return Settings().stack()


@pytest.fixture(scope="session")
def stack(stack_config: StackConfig) -> Iterator[StackConfig]:
    """Start Kafka and Redis (no-op when already up) for the whole session."""
    from infra import stack as local_stack

    local_stack.up(stack_config)
    yield stack_config


@pytest.fixture
def kafka_config(stack: StackConfig) -> KafkaConfig:
    """A Kafka config whose topics are private to this test (uuid prefix)."""
    return KafkaConfig(bootstrap_servers=stack.kafka_bootstrap, topic_prefix=f"t{uuid.uuid4().hex[:10]}-")


@pytest.fixture
def key_prefix() -> str:
    """A Redis key prefix private to this test."""
    return f"t{uuid.uuid4().hex[:10]}:"


@pytest.fixture(scope="session")
def secure_stack(stack_config: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackConfig]:
    """A second stack started as ``pricestream up --secure`` does (Kafka SASL/SCRAM + ACLs, Redis ACL users).

    Own state dir and free ports, random passwords; shared by the security tests that need both.
    """
    import secrets

    from pydantic import SecretStr

    from infra import kafka, kafka_security, redis_server
    from tests.integration._http_serve import free_port

    config = stack_config.model_copy(update={
        "state_dir": tmp_path_factory.mktemp("secure-stack"), "kafka_port": free_port(),
        "kafka_controller_port": free_port(), "redis_port": free_port(), "kafka_heap": "384m", "secure": True,
        "kafka_passwords": {p: SecretStr(secrets.token_urlsafe(16)) for p in kafka_security.PRINCIPALS},
        "redis_passwords": {r: SecretStr(secrets.token_urlsafe(16)) for r in redis_server.ROLES}})
    redis_server.start(config)
    kafka.start(config)
    yield config
    kafka.stop(config)
    redis_server.stop(config)
