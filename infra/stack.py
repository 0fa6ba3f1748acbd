"""The local stack as a whole: ``up``, ``down`` and ``status``.

``up`` is idempotent: a running service is left alone. ``down`` stops only the
processes recorded in our pid files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from infra import kafka, kafka_cluster, kafka_security, processes, redis_cluster, redis_server
from infra.config import StackConfig
from infra.jars import resolve_all

if TYPE_CHECKING:
    from infra.druid.config import DruidSettings

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


def status(config: StackConfig, *, druid: DruidSettings | None = None) -> list[ServiceStatus]:
    """Every process this state dir started, each with its own readiness.

    The single Kafka node, or each node of ``up --kafka-brokers N`` (ready when the cluster's metadata
    lists it); Redis, and each node of ``up --redis-cluster N`` (ready while it answers with
    ``cluster_state:ok``); and each process of the local Druid when ``up --with druid`` started it.
    """
    nodes = _kafka_nodes(config)
    kpid = processes.read_pid(config.pid_file("kafka"))
    rows: list[ServiceStatus] = []
    if kpid is not None or not nodes:
        rows.append(ServiceStatus("kafka", kpid, kpid is not None and kafka.ready(
            config.kafka_bootstrap, client=kafka_security.client_config(config, "admin")), config.kafka_bootstrap))
    rows += _kafka_cluster_rows(config, nodes)
    rpid = processes.read_pid(config.pid_file("redis"))
    rows.append(ServiceStatus("redis", rpid, rpid is not None and redis_server.ready(
        redis_server.role_url(config, "admin")), config.redis_url))
    rows += _redis_cluster_rows(config)
    if druid is not None and any((druid.state_dir / "pids").glob("*.pid")):
        from infra import druid_stack

        rows += [ServiceStatus(f"druid-{d.name}", d.pid, d.ready, d.endpoint) for d in druid_stack.status(druid)]
    return rows


def _kafka_nodes(config: StackConfig) -> list[int]:
    """Indexes of the ``up --kafka-brokers N`` nodes whose process runs."""
    root = config.state_dir / kafka_cluster.SERVICE
    indexes = sorted(int(n.name.split("-")[1]) for n in root.glob("node-*") if n.name.split("-")[1].isdigit())
    return [i for i in indexes if processes.read_pid(config.pid_file(kafka_cluster.node_service(i))) is not None]


def _kafka_cluster_rows(config: StackConfig, nodes: list[int]) -> list[ServiceStatus]:
    if not nodes:
        return []
    brokers = max(nodes) + 1
    listed = kafka_cluster.live_broker_ids(config, brokers)
    return [ServiceStatus(kafka_cluster.node_service(i), processes.read_pid(config.pid_file(
        kafka_cluster.node_service(i))), i + 1 in listed, f"{config.host}:{kafka_cluster.ports(config, i)[0]}")
        for i in nodes]


def _redis_cluster_rows(config: StackConfig) -> list[ServiceStatus]:
    count = redis_cluster.running_nodes(config)
    masters = count // (1 + redis_cluster.REPLICAS)
    rows = []
    for i, port in enumerate(redis_cluster.node_ports(config, masters) if masters else ()):
        pid = processes.read_pid(config.pid_file(redis_cluster.node_service(i)))
        state = redis_cluster.cluster_info(config, port).get("cluster_state") if pid is not None else None
        role = "master" if i < masters else "replica"
        rows.append(ServiceStatus(redis_cluster.node_service(i), pid, state == "ok",
                                  f"{config.host}:{port} ({role})"))
    return rows
