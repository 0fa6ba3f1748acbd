"""The local single-server Apache Druid: assemble it from Maven Central, start, check, stop.

Layout follows Druid's own distribution: ``<home>/lib`` and ``<home>/extensions/<name>``,
resolved by ``infra/druid/pom.xml``. One JVM each for ZooKeeper, coordinator (which also
runs the overlord and the Derby metadata server), broker, historical, indexer (tasks run
as threads, no peon forks) and, optionally, the router. Processes are tracked by pid files
under ``<state_dir>/pids`` and stopped by pid, never by name.

Example:
    >>> from pathlib import Path
    >>> s = DruidSettings(home=Path("/opt/druid"), state_dir=Path("/tmp/d"), with_router=False)
    >>> [name for name, _ in launch_plan(s)]
    ['zookeeper', 'coordinator', 'broker', 'historical', 'indexer']
    >>> launch_plan(s)[1][1][-2:]
    ['server', 'coordinator']
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from infra import processes
from infra.config import StackConfig
from infra.druid.config import (
    DRUID_VERSION,
    LOG4J2_XML,
    DruidSettings,
    Service,
    common_properties,
    jvm_flags,
    render_properties,
    service_properties,
    zookeeper_config,
)
from infra.druid.supervisors import submit_supervisors
from infra.errors import ResolveError, StartError
from infra.prereqs import java, require

__all__ = [
    "DruidSettings",
    "ServiceStatus",
    "assemble",
    "launch_plan",
    "settings_for",
    "start",
    "status",
    "stop",
    "submit_supervisors",
    "wait_ready",
]

POM = Path(__file__).resolve().parent / "druid" / "pom.xml"
_MARKER = ".assembled"
_POLL_S = 0.5
_ZK_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"


@dataclass(frozen=True)
class ServiceStatus:
    """One process of the local Druid."""

    name: str
    pid: int | None
    ready: bool
    endpoint: str


def _pom_digest() -> str:
    poms = sorted(POM.parent.rglob("pom.xml"))
    return hashlib.sha256(b"".join(p.read_bytes() for p in poms)).hexdigest()


def assemble(cache_dir: Path, *, mvn: str = "mvn", on_progress: Callable[[str], None] | None = None) -> Path:
    """Resolve Druid into ``cache_dir/druid-<version>`` once; later calls return at once.

    Returns:
        The Druid home (``lib/`` and ``extensions/`` inside).

    Raises:
        ResolveError: Maven failed; the message carries its output tail.
    """
    home = Path(cache_dir) / f"druid-{DRUID_VERSION}"
    marker = home / _MARKER
    digest = _pom_digest()
    if marker.exists() and marker.read_text() == digest:
        return home
    mvn_bin = require(mvn, "Maven (apt-get install maven)")
    if on_progress:
        on_progress(f"resolving Druid {DRUID_VERSION} from Maven Central into {home} (first time: minutes)")
    argv = [mvn_bin, "-q", "-B", "-f", str(POM), "package", f"-Ddruid.home={home}"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603 - argv from settings
    if done.returncode != 0:
        msg = f"mvn could not assemble Druid from {POM}: {(done.stdout + done.stderr)[-3000:]}"
        raise ResolveError(msg)
    marker.write_text(digest)
    return home


def settings_for(config: StackConfig, **overrides: object) -> DruidSettings:
    """Druid settings that live beside the rest of the local stack.

    Home is ``<cache_dir>/druid-<version>`` (what :func:`assemble` fills), state is
    ``<state_dir>/druid``; ``overrides`` set any other :class:`DruidSettings` field.

    Example:
        >>> s = settings_for(StackConfig(state_dir=Path("/tmp/ps"), cache_dir=Path("/tmp/c")), with_router=False)
        >>> str(s.state_dir), s.home.name, s.sql_url
        ('/tmp/ps/druid', 'druid-33.0.0', 'http://127.0.0.1:18082')
    """
    fields: dict[str, object] = {
        "home": config.cache_dir / f"druid-{DRUID_VERSION}",
        "state_dir": config.state_dir / "druid",
        "host": config.host,
        "java_home": config.java_home,
    }
    return DruidSettings.model_validate(fields | overrides)


def launch_plan(settings: DruidSettings) -> list[tuple[Service, list[str]]]:
    """(service, argv) for every process, in start order. Pure: reads nothing from disk."""
    java_bin = str(settings.java_home / "bin" / "java") if settings.java_home else "java"
    lib = f"{settings.home / 'lib'}/*"
    plan: list[tuple[Service, list[str]]] = [
        ("zookeeper", [java_bin, *jvm_flags(settings, "zookeeper"), "-cp", lib, _ZK_MAIN, str(_zoo_cfg(settings))]),
    ]
    common = settings.state_dir / "conf" / "_common"
    for service in settings.services:
        classpath = os.pathsep.join([str(common), str(settings.conf_dir(service)), lib])
        argv = [
            java_bin,
            *jvm_flags(settings, service),
            "-cp",
            classpath,
            "org.apache.druid.cli.Main",
            "server",
            service,
        ]
        plan.append((service, argv))
    return plan


def write_config(settings: DruidSettings) -> None:
    """Write ``conf/_common`` and ``conf/<service>`` under the state directory."""
    common = settings.state_dir / "conf" / "_common"
    common.mkdir(parents=True, exist_ok=True)
    (common / "common.runtime.properties").write_text(render_properties(common_properties(settings)))
    (common / "log4j2.xml").write_text(LOG4J2_XML)
    _zoo_cfg(settings).parent.mkdir(parents=True, exist_ok=True)
    _zoo_cfg(settings).write_text(zookeeper_config(settings))
    for service in settings.services:
        conf = settings.conf_dir(service)
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "runtime.properties").write_text(render_properties(service_properties(settings, service)))
    for sub in ("tmp", "var/zookeeper", "var/processing"):
        (settings.state_dir / sub).mkdir(parents=True, exist_ok=True)


def _zoo_cfg(settings: DruidSettings) -> Path:
    return settings.state_dir / "conf" / "zookeeper" / "zoo.cfg"


def _port_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def _port(settings: DruidSettings, service: str) -> int:
    port: int = getattr(settings.ports, service)
    return port


def start(settings: DruidSettings) -> None:
    """Start every process that is not running yet, then wait until all are ready.

    Idempotent: a running service is left alone.

    Raises:
        StartError: a port is taken by a stranger, the distribution is missing, or a service
            did not become ready (the message carries the tail of its log).
    """
    if not (settings.home / "lib").is_dir():
        msg = f"Druid home {settings.home} has no lib/; run infra.druid_stack.assemble(cache_dir) first"
        raise StartError(msg)
    java_bin = java(settings.java_home)
    write_config(settings)
    for service, argv in launch_plan(settings):
        if processes.read_pid(settings.pid_file(service)) is not None:
            continue
        port = _port(settings, service)
        if _port_open(settings.host, port):
            msg = (f"port {settings.host}:{port} for Druid {service} is taken by another process; set another with "
                   f"PRICESTREAM_DRUID_PORTS='{{\"{service}\": PORT}}'")
            raise StartError(msg)
        argv = [java_bin, *argv[1:]]
        cwd = settings.state_dir / "run" / service
        processes.spawn(argv, pid_file=settings.pid_file(service), log_file=settings.log_file(service), cwd=cwd)
        if service == "zookeeper":
            _wait(settings, service, lambda: _port_open(settings.host, settings.ports.zookeeper), 30.0)
    deadline = time.monotonic() + settings.ready_timeout_s
    for service in settings.services:
        url = settings.url(service)
        _wait(settings, service, functools.partial(_healthy, url), max(deadline - time.monotonic(), 1.0))
    _wait(settings, "broker", lambda: _sql_ready(settings.sql_url), max(deadline - time.monotonic(), 1.0))


def _wait(settings: DruidSettings, service: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if processes.read_pid(settings.pid_file(service)) is None:
            log = processes.tail(settings.log_file(service), 40)
            msg = f"Druid {service} exited during start-up; log tail:\n{log}"
            raise StartError(msg)
        time.sleep(_POLL_S)
    log = processes.tail(settings.log_file(service), 40)
    msg = f"Druid {service} not ready after {timeout:.0f}s; log tail:\n{log}"
    raise StartError(msg)


def _healthy(url: str) -> bool:
    try:
        resp = httpx.get(f"{url}/status/health", timeout=2.0)
    except httpx.HTTPError:
        return False
    return resp.status_code == 200 and resp.text.strip() == "true"


def _sql_ready(url: str) -> bool:
    try:
        resp = httpx.post(f"{url}/druid/v2/sql", json={"query": "SELECT 1 AS x"}, timeout=5.0)
    except httpx.HTTPError:
        return False
    return resp.status_code == 200 and resp.json() == [{"x": 1}]


def wait_ready(url: str, timeout: float, *, sql: bool = True) -> None:
    """Block until the Druid service at ``url`` is healthy (and, with ``sql``, answers SQL).

    Raises:
        StartError: not ready within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _healthy(url) and (not sql or _sql_ready(url)):
            return
        time.sleep(_POLL_S)
    what = "/status/health and SELECT 1" if sql else "/status/health"
    msg = f"Druid at {url} did not pass {what} within {timeout:.0f}s"
    raise StartError(msg)


def stop(state_dir: Path) -> list[str]:
    """Stop every Druid process recorded under ``state_dir``; returns the ones that were running.

    The Druid servers get SIGTERM together and are waited for; ZooKeeper goes last, since a
    server that loses ZooKeeper while shutting down retries its unannouncements for a while.
    """
    pid_dir = Path(state_dir) / "pids"
    stopped: list[str] = []
    for group in (("router", "indexer", "historical", "broker", "coordinator"), ("zookeeper",)):
        running = {name: processes.read_pid(pid_dir / f"{name}.pid") for name in group}
        for pid in running.values():
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGTERM)
        for name, pid in running.items():
            processes.stop(pid_dir / f"{name}.pid")
            if pid is not None:
                stopped.append(name)
    return stopped


def status(settings: DruidSettings) -> list[ServiceStatus]:
    """Pid and readiness of each process (ZooKeeper: port open; Druid: ``/status/health``)."""
    out = []
    for service, _ in launch_plan(settings):
        pid = processes.read_pid(settings.pid_file(service))
        if service == "zookeeper":
            endpoint = f"{settings.host}:{settings.ports.zookeeper}"
            ready = pid is not None and _port_open(settings.host, settings.ports.zookeeper)
        else:
            endpoint = settings.url(service)
            ready = pid is not None and _healthy(endpoint)
        out.append(ServiceStatus(service, pid, ready, endpoint))
    return out


def memory_mb(state_dir: Path) -> dict[str, float]:
    """Resident memory (RSS, MiB) of each running Druid process, read from ``/proc``."""
    out: dict[str, float] = {}
    for pid_file in sorted((Path(state_dir) / "pids").glob("*.pid")):
        pid = processes.read_pid(pid_file)
        if pid is None:
            continue
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                out[pid_file.stem] = int(line.split()[1]) / 1024.0
    return out
