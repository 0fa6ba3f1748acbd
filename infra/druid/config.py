"""Settings of the local single-server Druid, and the runtime properties rendered from them.

Pure: nothing here touches the disk or starts a process (see :mod:`infra.druid_stack`).
Ports default to Druid's own numbers plus 10000, so that the Flink REST port (8081) and a
Druid started by hand never clash with ours.

Example:
    >>> s = DruidSettings(home=Path("/opt/druid"), state_dir=Path("/tmp/d"))
    >>> s.router_url
    'http://127.0.0.1:18888'
    >>> service_properties(s, "broker")["druid.plaintextPort"]
    '18082'
    >>> common_properties(s)["druid.zk.service.host"], common_properties(s)["druid.bindOnHost"]
    ('127.0.0.1:12181', 'true')
    >>> zookeeper_config(s).splitlines()[:2]
    ['clientPort=12181', 'clientPortAddress=127.0.0.1']

Every process binds ``host`` only (loopback by default, as Kafka and Redis do): Jetty through
``druid.bindOnHost``, Derby through its connector host, ZooKeeper through ``clientPortAddress``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from infra.config import REPO_ROOT

DRUID_VERSION = "33.0.0"
"""Pinned in ``infra/druid/pom.xml``; the newest release Central serves with its extensions."""

Service = Literal["zookeeper", "coordinator", "broker", "historical", "indexer", "router"]
DRUID_SERVICES: tuple[Service, ...] = ("coordinator", "broker", "historical", "indexer", "router")
"""Druid servers, in start order (the coordinator also runs the overlord and Derby)."""

# Internal JDK APIs that Druid's memory mapping and buffers reach into on Java 17
# (Druid's "Java runtime" page lists the same set).
JAVA17_FLAGS: tuple[str, ...] = (
    "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=jdk.management/com.sun.management.internal=ALL-UNNAMED",
)

_DEFAULT_HEAP_MB = MappingProxyType(
    {"zookeeper": 64, "coordinator": 320, "broker": 320, "historical": 256, "indexer": 448, "router": 128}
)
# Direct (off-heap) buffers each query-serving process allocates: one per processing
# thread, per merge buffer, plus one spare for the result merge.
_BUFFERS = MappingProxyType({"broker": (1, 2), "historical": (1, 1), "indexer": (1, 2)})


class DruidPorts(BaseModel):
    """TCP ports of the local Druid (Druid's defaults + 10000)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    zookeeper: int = Field(default=12181, gt=0, lt=65536)
    derby: int = Field(default=11527, gt=0, lt=65536)
    coordinator: int = Field(default=18081, gt=0, lt=65536)
    broker: int = Field(default=18082, gt=0, lt=65536)
    historical: int = Field(default=18083, gt=0, lt=65536)
    indexer: int = Field(default=18091, gt=0, lt=65536)
    router: int = Field(default=18888, gt=0, lt=65536)


class DruidSettings(BaseModel):
    """Where Druid lives, where it keeps state, and how big each process is.

    ``home`` is the assembled distribution (``lib/`` and ``extensions/``), as returned by
    :func:`infra.druid_stack.assemble`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    home: Path
    state_dir: Path = REPO_ROOT / ".state" / "druid"
    host: str = "127.0.0.1"
    ports: DruidPorts = DruidPorts()
    with_router: bool = True
    java_home: Path | None = None
    heap_mb: Mapping[str, int] = Field(default_factory=lambda: dict(_DEFAULT_HEAP_MB))
    processing_buffer_mb: int = Field(default=32, ge=8)
    worker_capacity: int = Field(default=3, ge=1)
    extensions: tuple[str, ...] = ("druid-kafka-indexing-service",)
    ready_timeout_s: float = Field(default=240.0, gt=0)

    def url(self, service: Service) -> str:
        """``http://host:port`` of a Druid service."""
        return f"http://{self.host}:{getattr(self.ports, service)}"

    @property
    def router_url(self) -> str:
        return self.url("router")

    @property
    def sql_url(self) -> str:
        """Where analysts send SQL: the router if it runs, else the broker."""
        return self.router_url if self.with_router else self.url("broker")

    @property
    def services(self) -> tuple[Service, ...]:
        return tuple(s for s in DRUID_SERVICES if s != "router" or self.with_router)

    def conf_dir(self, service: str) -> Path:
        return self.state_dir / "conf" / service

    def log_file(self, service: str) -> Path:
        return self.state_dir / "logs" / f"{service}.log"

    def pid_file(self, service: str) -> Path:
        return self.state_dir / "pids" / f"{service}.pid"


def _props(**kv: object) -> dict[str, str]:
    return {k.replace("__", "."): str(v) for k, v in kv.items()}


def common_properties(s: DruidSettings) -> dict[str, str]:
    """``_common/common.runtime.properties``: ZooKeeper, Derby metadata, local deep storage."""
    var = s.state_dir / "var"
    host, derby = s.host, s.ports.derby
    return {
        "druid.extensions.directory": str(s.home / "extensions"),
        "druid.extensions.hadoopDependenciesDir": str(s.home / "hadoop-dependencies"),
        "druid.extensions.loadList": json.dumps(list(s.extensions)),
        "druid.host": host,
        # Jetty binds druid.host only (default: every interface); Derby binds connector.host below.
        "druid.bindOnHost": "true",
        "druid.startup.logging.logProperties": "false",
        "druid.zk.service.host": f"{host}:{s.ports.zookeeper}",
        "druid.zk.paths.base": "/druid",
        "druid.metadata.storage.type": "derby",
        "druid.metadata.storage.connector.connectURI": f"jdbc:derby://{host}:{derby}/{var}/metadata.db;create=true",
        "druid.metadata.storage.connector.host": host,
        "druid.metadata.storage.connector.port": str(derby),
        "druid.metadata.storage.connector.createTables": "true",
        "druid.storage.type": "local",
        "druid.storage.storageDirectory": str(var / "segments"),
        "druid.indexer.logs.type": "file",
        "druid.indexer.logs.directory": str(var / "indexing-logs"),
        "druid.selectors.indexing.serviceName": "druid/overlord",
        "druid.selectors.coordinator.serviceName": "druid/coordinator",
        "druid.monitoring.monitors": "[]",
        "druid.emitter": "noop",
        "druid.indexing.doubleStorage": "double",
        "druid.sql.enable": "true",
        "druid.lookup.enableLookupSyncOnStartup": "false",
        "druid.server.http.numThreads": "12",
        "druid.processing.tmpDir": str(var / "processing"),
    }


def _processing(s: DruidSettings, service: str) -> dict[str, str]:
    threads, merges = _BUFFERS[service]
    return {
        "druid.processing.buffer.sizeBytes": f"{s.processing_buffer_mb}MiB",
        "druid.processing.numThreads": str(threads),
        "druid.processing.numMergeBuffers": str(merges),
    }


def _coordinator(s: DruidSettings) -> dict[str, str]:
    # Short periods: at demo scale we want hand-off and new datasources visible in seconds.
    return _props(
        druid__service="druid/coordinator",
        druid__coordinator__startDelay="PT5S",
        druid__coordinator__period="PT5S",
        druid__manager__segments__pollDuration="PT5S",
        druid__coordinator__asOverlord__enabled="true",
        druid__coordinator__asOverlord__overlordService="druid/overlord",
        druid__indexer__queue__startDelay="PT1S",
        druid__indexer__storage__type="metadata",
        druid__indexer__runner__type="httpRemote",
    )


def _broker(s: DruidSettings) -> dict[str, str]:
    return _processing(s, "broker") | _props(
        druid__service="druid/broker",
        druid__broker__http__numConnections=5,
        druid__broker__cache__useCache="false",
        druid__broker__cache__populateCache="false",
        druid__sql__planner__metadataRefreshPeriod="PT5S",
    )


def _historical(s: DruidSettings) -> dict[str, str]:
    cache = [{"path": str(s.state_dir / "var" / "segment-cache"), "maxSize": "10g"}]
    return _processing(s, "historical") | _props(
        druid__service="druid/historical",
        druid__segmentCache__locations=json.dumps(cache),
        druid__server__maxSize="10g",
    )


def _indexer(s: DruidSettings) -> dict[str, str]:
    var = s.state_dir / "var"
    return _processing(s, "indexer") | _props(
        druid__service="druid/indexer",
        druid__worker__capacity=s.worker_capacity,
        druid__indexer__task__baseTaskDir=var / "task",
        druid__indexer__task__hadoopWorkingPath=var / "hadoop-tmp",
        druid__indexer__task__restoreTasksOnRestart="true",
    )


def _router(s: DruidSettings) -> dict[str, str]:
    return _props(
        druid__service="druid/router",
        druid__router__defaultBrokerServiceName="druid/broker",
        druid__router__coordinatorServiceName="druid/coordinator",
        druid__router__managementProxy__enabled="true",
        druid__router__http__numConnections=10,
    )


_SERVICE_PROPS: dict[str, Callable[[DruidSettings], dict[str, str]]] = {
    "coordinator": _coordinator, "broker": _broker, "historical": _historical, "indexer": _indexer,
    "router": _router,
}


def service_properties(s: DruidSettings, service: Service) -> dict[str, str]:
    """``<service>/runtime.properties`` for one Druid server."""
    props = _SERVICE_PROPS.get(service)
    if props is None:
        msg = f"service {service!r} has no runtime.properties; expected one of {DRUID_SERVICES}"
        raise ValueError(msg)
    return {"druid.plaintextPort": str(getattr(s.ports, service))} | props(s)


def direct_memory_mb(s: DruidSettings, service: str) -> int:
    """``-XX:MaxDirectMemorySize`` for a service: its buffers plus a margin for Netty and Jetty.

    Example:
        >>> direct_memory_mb(DruidSettings(home=Path("/x")), "broker")
        192
    """
    threads, merges = _BUFFERS.get(service, (0, 0))
    return (threads + merges + 1) * s.processing_buffer_mb + 64


def jvm_flags(s: DruidSettings, service: Service) -> list[str]:
    """JVM options for one process (heap, direct memory, UTC, logging to stdout)."""
    heap = s.heap_mb[service]
    flags = [
        f"-Xms{heap}m",
        f"-Xmx{heap}m",
        "-XX:+UseSerialGC",  # one GC thread: this machine is small and shared
        "-XX:TieredStopAtLevel=1",  # C1 only: start-up dominates at demo scale
        "-XX:+ExitOnOutOfMemoryError",
        "-Duser.timezone=UTC",
        "-Dfile.encoding=UTF-8",
        f"-Djava.io.tmpdir={s.state_dir / 'tmp'}",
    ]
    flags.append(f"-Dlog4j.configurationFile={s.state_dir / 'conf' / '_common' / 'log4j2.xml'}")
    if service == "zookeeper":
        return [*flags, "-Dzookeeper.admin.enableServer=false", "-Dzookeeper.4lw.commands.whitelist=ruok,srvr"]
    return [
        *flags,
        f"-XX:MaxDirectMemorySize={direct_memory_mb(s, service)}m",
        "-Djava.util.logging.manager=org.apache.logging.log4j.jul.LogManager",
        *JAVA17_FLAGS,
    ]


LOG4J2_XML = """\
<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <Console name="Console" target="SYSTEM_OUT">
      <PatternLayout pattern="%d{ISO8601} %p [%t] %c - %m%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Root level="info"><AppenderRef ref="Console"/></Root>
    <Logger name="org.apache.druid.jetty.RequestLog" additivity="false" level="warn">
      <AppenderRef ref="Console"/>
    </Logger>
    <Logger name="org.apache.zookeeper" level="warn"/>
    <Logger name="org.apache.curator" level="warn"/>
    <Logger name="org.apache.kafka" level="warn"/>
  </Loggers>
</Configuration>
"""


def zookeeper_config(s: DruidSettings) -> str:
    """``zoo.cfg`` of the metadata ZooKeeper: its port on ``host`` only (``port dataDir`` binds every interface)."""
    return "".join(f"{k}={v}\n" for k, v in (
        ("clientPort", s.ports.zookeeper), ("clientPortAddress", s.host),
        ("dataDir", s.state_dir / "var" / "zookeeper"), ("tickTime", 2000), ("maxClientCnxns", 60),
        ("admin.enableServer", "false"), ("4lw.commands.whitelist", "ruok,srvr"),
    ))


def render_properties(props: dict[str, str]) -> str:
    """Java ``.properties`` text, one ``key=value`` a line, keys sorted.

    Example:
        >>> render_properties({"b": "2", "a": "1"})
        'a=1\\nb=2\\n'
    """
    return "".join(f"{k}={v}\n" for k, v in sorted(props.items()))
