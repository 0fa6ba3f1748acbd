"""A local Kafka cluster of N KRaft nodes (each broker and controller), for replication tests.

``pricestream up --kafka-brokers 3`` starts it in place of the single node of :mod:`infra.kafka`.
Node ``i`` (0-based) listens on ``kafka_port + 2i`` and its controller on
``kafka_controller_port + 2i``; the quorum is the static voter set of all nodes. The cluster's
defaults are those of Kafka's own replication tests: replication factor 3 for new topics and the
internal ones, ``min.insync.replicas`` 2, unclean leader election off. With ``acks=all`` a
record is acknowledged once two replicas have it, so one broker killed loses no acknowledged
record. Plaintext only: a secure multi-node stack is not provided here.

Example:
    >>> from pathlib import Path
    >>> cfg = StackConfig(state_dir=Path("/tmp/ps"), kafka_port=19092, kafka_controller_port=19093)
    >>> bootstrap(cfg, 3)
    '127.0.0.1:19092,127.0.0.1:19094,127.0.0.1:19096'
    >>> voters(cfg, 3)
    '1@127.0.0.1:19093,2@127.0.0.1:19095,3@127.0.0.1:19097'
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from infra import processes
from infra.config import StackConfig
from infra.errors import StartError
from infra.jars import resolve
from infra.kafka import _LOG4J2, format_args, saved_cluster_id
from infra.prereqs import java

SERVICE = "kafka-cluster"
MIN_INSYNC = 2


def node_service(i: int) -> str:
    """The pid and log file name of node ``i``."""
    return f"{SERVICE}-{i}"


def ports(config: StackConfig, i: int) -> tuple[int, int]:
    """(broker port, controller port) of node ``i``."""
    return config.kafka_port + 2 * i, config.kafka_controller_port + 2 * i


def bootstrap(config: StackConfig, brokers: int) -> str:
    """Every node's broker address, for clients that must survive any one node."""
    return ",".join(f"{config.host}:{ports(config, i)[0]}" for i in range(brokers))


def voters(config: StackConfig, brokers: int) -> str:
    """The static controller quorum: ``id@host:port`` of every node."""
    return ",".join(f"{i + 1}@{config.host}:{ports(config, i)[1]}" for i in range(brokers))


def _properties(config: StackConfig, i: int, brokers: int, data: Path) -> str:
    port, cport = ports(config, i)
    host = config.host
    replication = min(3, brokers)
    return "\n".join([
        "process.roles=broker,controller",
        f"node.id={i + 1}",
        f"controller.quorum.voters={voters(config, brokers)}",
        f"listeners=PLAINTEXT://{host}:{port},CONTROLLER://{host}:{cport}",
        f"advertised.listeners=PLAINTEXT://{host}:{port}",
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=PLAINTEXT",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        f"log.dirs={data}",
        "num.partitions=3",
        f"default.replication.factor={replication}",
        f"min.insync.replicas={min(MIN_INSYNC, replication)}",
        f"offsets.topic.replication.factor={replication}",
        f"transaction.state.log.replication.factor={replication}",
        f"transaction.state.log.min.isr={min(MIN_INSYNC, replication)}",
        f"share.coordinator.state.topic.replication.factor={replication}",
        f"share.coordinator.state.topic.min.isr={min(MIN_INSYNC, replication)}",
        "unclean.leader.election.enable=false",
        "group.initial.rebalance.delay.ms=0",
        "auto.create.topics.enable=false",
        "",
    ])


def _cluster_id(root: Path) -> str:
    formatted = any((node / "data" / "meta.properties").exists() for node in root.glob("node-*"))
    return saved_cluster_id(root / "cluster.id", formatted=formatted)


def _prepare(config: StackConfig, i: int, brokers: int) -> Path:
    root = config.state_dir / SERVICE
    state = root / f"node-{i}"
    data = state / "data"
    state.mkdir(parents=True, exist_ok=True)
    props = state / "server.properties"
    props.write_text(_properties(config, i, brokers, data))
    (state / "log4j2.properties").write_text(_LOG4J2.format(log=state / "server.log"))
    if not (data / "meta.properties").exists():
        argv = [java(config.java_home), "-cp", f"{resolve(config, 'kafka')}/*", "kafka.tools.StorageTool", "format",
                *format_args(_cluster_id(root)), "-c", str(props)]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
        if done.returncode != 0:
            msg = f"kafka node {i} storage format failed: {(done.stdout + done.stderr)[-2000:]}"
            raise StartError(msg)
    return state


def start_node(config: StackConfig, i: int, brokers: int) -> int:
    """Start node ``i`` if it is not running; returns its pid (not waiting for the cluster)."""
    pid = processes.read_pid(config.pid_file(node_service(i)))
    if pid is not None:
        return pid
    state = _prepare(config, i, brokers)
    argv = [
        java(config.java_home), f"-Xmx{config.kafka_heap}", f"-Xms{config.kafka_heap}", "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={state / 'log4j2.properties'}",
        "-cp", f"{resolve(config, 'kafka')}/*", "kafka.Kafka", str(state / "server.properties"),
    ]
    return processes.spawn(argv, pid_file=config.pid_file(node_service(i)),
                           log_file=config.log_file(node_service(i)), cwd=state)


def start(config: StackConfig, brokers: int = 3) -> list[int]:
    """Start every node and wait until metadata lists all of them.

    Raises:
        StartError: ``brokers`` below 1, a secure stack, a node that exited, or the deadline passed.
    """
    if brokers < 1:
        msg = f"field 'brokers': got {brokers}, expected at least 1"
        raise StartError(msg)
    if config.secure:
        msg = "field 'secure': got True, expected a plaintext stack (the multi-node cluster has no SASL setup)"
        raise StartError(msg)
    pids = [start_node(config, i, brokers) for i in range(brokers)]
    wait_ready(config, brokers)
    return pids


def live_brokers(config: StackConfig, brokers: int, timeout_s: float = 2.0) -> int:
    """How many brokers the cluster's metadata lists now (0 when none answers)."""
    return len(live_broker_ids(config, brokers, timeout_s))


def live_broker_ids(config: StackConfig, brokers: int, timeout_s: float = 2.0) -> set[int]:
    """Node ids (1-based) the cluster's metadata lists now (none when no node answers)."""
    admin = AdminClient({"bootstrap.servers": bootstrap(config, brokers), "log_level": 0,
                         "socket.connection.setup.timeout.ms": 1000})
    try:
        return {int(b) for b in admin.list_topics(timeout=timeout_s).brokers}
    except KafkaException:
        return set()


def wait_ready(config: StackConfig, brokers: int) -> None:
    deadline = time.monotonic() + config.ready_timeout_s * max(1, brokers // 2)
    while time.monotonic() < deadline:
        dead = [i for i in range(brokers) if processes.read_pid(config.pid_file(node_service(i))) is None]
        if dead:
            log = processes.tail(config.log_file(node_service(dead[0])))
            msg = f"kafka node {dead[0]} exited during start-up:\n{log}"
            raise StartError(msg)
        if live_brokers(config, brokers) == brokers:
            return
        time.sleep(0.5)
    msg = f"kafka cluster: not all {brokers} brokers in the metadata after the deadline"
    raise StartError(msg)


def stop(config: StackConfig) -> bool:
    """Stop every node we started (its pid file, for each node directory); True if any was running."""
    nodes = sorted((config.state_dir / SERVICE).glob("node-*"))
    return any([processes.stop(config.pid_file(node_service(int(n.name.split("-")[1])))) for n in nodes])
