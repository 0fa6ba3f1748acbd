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
