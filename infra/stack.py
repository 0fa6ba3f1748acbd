"""The local stack as a whole: ``up``, ``down`` and ``status``.

``up`` is idempotent: a running service is left alone. ``down`` stops only the
processes recorded in our pid files.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra import kafka, kafka_security, processes, redis_server
from infra.config import StackConfig
from infra.jars import resolve_all

SERVICES: tuple[str, ...] = ("kafka", "redis")


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    pid: int | None
    ready: bool
    endpoint: str


def up(config: StackConfig) -> list[ServiceStatus]:
    """Resolve jars, start Redis and Kafka (each only if not already running)."""
    resolve_all(config)
    redis_server.start(config)
    kafka.start(config)
    return status(config)


def down(config: StackConfig) -> list[str]:
    """Stop what we started; returns the names of the services that were running."""
    stopped = []
    for name, stopper in (("kafka", kafka.stop), ("redis", redis_server.stop)):
        if stopper(config):
            stopped.append(name)
    return stopped


def status(config: StackConfig) -> list[ServiceStatus]:
    kpid = processes.read_pid(config.pid_file("kafka"))
    rpid = processes.read_pid(config.pid_file("redis"))
    return [
        ServiceStatus("kafka", kpid, kpid is not None and kafka.ready(
            config.kafka_bootstrap, client=kafka_security.client_config(config, "admin")), config.kafka_bootstrap),
        ServiceStatus("redis", rpid, rpid is not None and redis_server.ready(redis_server.role_url(config, "admin")),
                      config.redis_url),
    ]
