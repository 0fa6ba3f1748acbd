"""One Apache Kafka 4.x node in KRaft mode (combined broker and controller).

A secure stack (``StackConfig.secure``) listens with SASL/SCRAM-SHA-512 and the
``StandardAuthorizer``, with per-service principals and ACLs (:mod:`infra.kafka_security`).
"""

from __future__ import annotations

import base64
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from infra import kafka_security, processes
from infra.config import StackConfig
from infra.errors import StartError
from infra.jars import resolve
from infra.prereqs import java

SERVICE = "kafka"
_PROBE_GROUP = "pricestream-ready-probe"

_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = WARN
logger.apache.name = org.apache.kafka
logger.apache.level = WARN
"""


def _properties(config: StackConfig, data_dir: Path) -> str:
    host = config.host
    keystore = kafka_security.write_keystore(config, data_dir.parent / "tls") if config.kafka_tls else None
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.bootstrap.servers={host}:{config.kafka_controller_port}",
            *kafka_security.listener_properties(config, keystore=keystore),
            f"log.dirs={data_dir}",
            "num.partitions=3",
            "offsets.topic.replication.factor=1",
            # One node: one offsets partition, so the coordinator probe in wait_ready covers every group.
            "offsets.topic.num.partitions=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            f"transaction.max.timeout.ms={config.kafka_transaction_max_timeout_ms}",
            "auto.create.topics.enable=false",
            "",
        ]
    )


def new_cluster_id(draw: Callable[[], uuid.UUID] = uuid.uuid4) -> str:
    """A KRaft cluster id as Kafka's ``Uuid.randomUuid()`` makes one: drawn again while its text begins with ``-``.

    About one id in 64 would begin with ``-`` (the base64url digit of 62), which ``kafka-storage format -t``
    reads as an option: the format fails, and a saved id fails every later start the same way.

    Example:
        >>> ids = iter([uuid.UUID(bytes=b"\\xf9" + bytes(15)), uuid.UUID(int=1)])
        >>> new_cluster_id(lambda: next(ids))
        'AAAAAAAAAAAAAAAAAAAAAQ'
    """
    while True:
        text = base64.urlsafe_b64encode(draw().bytes).decode().rstrip("=")
        if not text.startswith("-") and text != "AAAAAAAAAAAAAAAAAAAAAA":  # Kafka refuses the zero id too
            return text


def saved_cluster_id(path: Path, *, formatted: bool) -> str:
    """The cluster id saved at ``path``, drawn (and saved) when missing.

    A saved id that begins with ``-`` (written before :func:`new_cluster_id` drew again) is drawn anew
    while no storage was formatted with it: that format failed, so the id was never used.

    Example:
        >>> import tempfile
        >>> p = Path(tempfile.mkdtemp()) / "cluster.id"
        >>> _ = p.write_text("-cenBVttRUmIyIhUAhL2EA")
        >>> saved_cluster_id(p, formatted=False).startswith("-"), p.read_text().startswith("-")
        (False, False)
    """
    if path.exists():
        saved = path.read_text().strip()
        if saved and (formatted or not saved.startswith("-")):
            return saved
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(new_cluster_id())
    return path.read_text().strip()


def format_args(cluster_id: str) -> list[str]:
    """``kafka-storage format``'s cluster id argument, as one token (an id beginning with ``-`` is still a value).

    Example:
        >>> format_args("-x")
        ['--cluster-id=-x']
    """
    return [f"--cluster-id={cluster_id}"]


def _cluster_id(state: Path) -> str:
    return saved_cluster_id(state / "cluster.id", formatted=(state / "data" / "meta.properties").exists())


def _prepare(config: StackConfig) -> tuple[Path, Path]:
    state = config.state_dir / SERVICE
    data = state / "data"
    state.mkdir(parents=True, exist_ok=True)
    props = state / "server.properties"
    props.touch(mode=0o600)  # a secure broker's JAAS lines hold the admin password
    props.chmod(0o600)
    props.write_text(_properties(config, data))
    (state / "log4j2.properties").write_text(_LOG4J2.format(log=state / "server.log"))
    if not (data / "meta.properties").exists():
        jars = resolve(config, "kafka")
        argv = [
            java(config.java_home), "-cp", f"{jars}/*", "kafka.tools.StorageTool", "format",
            *format_args(_cluster_id(state)), "-c", str(props), "--standalone",
            *kafka_security.scram_format_args(config),
        ]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
        if done.returncode != 0:
            msg = f"kafka storage format failed: {(done.stdout + done.stderr)[-2000:]}"
            raise StartError(msg)
    return state, props


def start(config: StackConfig) -> int:
    """Start the broker if not running; return its pid once an AdminClient sees it."""
    pid = processes.read_pid(config.pid_file(SERVICE))
    if pid is not None:
        return pid
    data = config.state_dir / SERVICE / "data"
    if config.secure and (data / "meta.properties").exists() and not (data.parent / "secure").exists():
        msg = (f"kafka state {data}: formatted without SCRAM credentials, expected a secure broker; "
               "start a secure stack in another PRICESTREAM_STATE_DIR")
        raise StartError(msg)
    state, props = _prepare(config)
    if config.secure:
        (state / "secure").touch()
    jars = resolve(config, "kafka")
    argv = [
        java(config.java_home), f"-Xmx{config.kafka_heap}", f"-Xms{config.kafka_heap}",
        "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={state / 'log4j2.properties'}",
        f"-Dpricestream.state={config.state_dir}",
        "-cp", f"{jars}/*", "kafka.Kafka", str(props),
    ]
    pid = processes.spawn(
        argv, pid_file=config.pid_file(SERVICE), log_file=config.log_file(SERVICE), cwd=config.state_dir / SERVICE
    )
    wait_ready(config)
    if config.secure:
        kafka_security.apply_acls(config)
    return pid


def ready(bootstrap: str, timeout_s: float = 2.0, *, client: dict[str, Any] | None = None) -> bool:
    """True if an AdminClient (with ``client`` settings, e.g. SASL) sees at least one broker."""
    # log_level 0: while the broker boots, librdkafka would print a refused connection every 50 ms.
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.connection.setup.timeout.ms": 1000, "log_level": 0,
                         **(client or {})})
    try:
        meta = admin.list_topics(timeout=timeout_s)
    except KafkaException:
        return False
    return bool(meta.brokers)


def coordinator_ready(bootstrap: str, timeout_s: float = 5.0, *, client: dict[str, Any] | None = None) -> bool:
    """True once the group coordinator answers an offset fetch.

    A broker lists itself in metadata seconds before it has loaded ``__consumer_offsets``;
    in that window offset fetches fail with NOT_COORDINATOR, and a consumer that assigns
    partitions then never starts fetching.
    """
    probe = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": _PROBE_GROUP, "enable.auto.commit": False, "log_level": 0,
         **(client or {})}
    )
    try:
        probe.committed([TopicPartition(_PROBE_GROUP, 0)], timeout=timeout_s)
    except KafkaException:
        return False
    finally:
        probe.close()
    return True


def wait_ready(config: StackConfig) -> None:
    """Wait until the broker serves metadata and its group coordinator answers.

    Raises:
        StartError: the process died, or the deadline passed (with the log tail).
    """
    deadline = time.monotonic() + config.ready_timeout_s
    while time.monotonic() < deadline:
        if processes.read_pid(config.pid_file(SERVICE)) is None:
            msg = f"kafka exited during start-up:\n{processes.tail(config.log_file(SERVICE))}"
            raise StartError(msg)
        client = kafka_security.client_config(config, "admin")
        if ready(config.kafka_bootstrap, client=client) and coordinator_ready(config.kafka_bootstrap, client=client):
            return
        time.sleep(0.5)
    msg = f"kafka not ready after {config.ready_timeout_s}s:\n{processes.tail(config.log_file(SERVICE))}"
    raise StartError(msg)


def stop(config: StackConfig) -> bool:
    return processes.stop(config.pid_file(SERVICE))
