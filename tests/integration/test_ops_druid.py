"""Issue 31 items 7 and 8 on a real Druid: its ports are settings, it binds loopback, ``status`` shows it."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from infra import druid_stack, processes
from infra.config import StackConfig
from infra.druid.config import DruidSettings
from pricestream.settings import Settings
from pricestream.supervision import executable
from tests.integration._http_serve import free_port

pytestmark = [pytest.mark.integration, pytest.mark.druid]

PROCESSES = ("zookeeper", "derby", "coordinator", "broker", "historical", "indexer", "router")


@pytest.fixture(scope="module")
def env(stack_config: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A state dir of its own and a free port for every Druid process, given as the operator gives them."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("PRICESTREAM_")}
    return base | {"PRICESTREAM_STATE_DIR": str(tmp_path_factory.mktemp("druid-ops") / "state"),
                   "PRICESTREAM_CACHE_DIR": str(stack_config.cache_dir),
                   "PRICESTREAM_DRUID_PORTS": json.dumps({p: free_port() for p in PROCESSES})}


@pytest.fixture(scope="module")
def druid(env: dict[str, str]) -> Iterator[DruidSettings]:
    settings = Settings(state_dir=Path(env["PRICESTREAM_STATE_DIR"]), cache_dir=Path(env["PRICESTREAM_CACHE_DIR"]),
                        druid_ports=json.loads(env["PRICESTREAM_DRUID_PORTS"])).druid()
    druid_stack.assemble(settings.home.parent)
    try:
        druid_stack.start(settings)
        yield settings
    finally:
        druid_stack.stop(settings.state_dir)


def test_druid_listens_on_the_ports_set_and_on_loopback_only(druid: DruidSettings, env: dict[str, str]) -> None:
    wanted = json.loads(env["PRICESTREAM_DRUID_PORTS"])
    listening: dict[int, set[str]] = {}
    for pid_file in (druid.state_dir / "pids").glob("*.pid"):
        pid = processes.read_pid(pid_file)
        assert pid is not None, pid_file
        for conn in psutil.Process(pid).net_connections(kind="inet"):
            if conn.status == psutil.CONN_LISTEN:
                listening.setdefault(conn.laddr.port, set()).add(conn.laddr.ip)
    assert set(wanted.values()) <= set(listening), (wanted, listening)  # every process on its set port
    beyond = {port: ips for port, ips in listening.items() if ips - {"127.0.0.1", "::ffff:127.0.0.1"}}
    assert not beyond  # was: Jetty, ZooKeeper and Derby on every interface


def test_status_shows_druid_when_started(druid: DruidSettings, env: dict[str, str]) -> None:
    done = subprocess.run([executable(), "status"], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {cells[0]: cells[2] for line in done.stdout.splitlines()
            if len(cells := [c.strip() for c in line.strip("│┃ ").split("│")]) == 4}
    expected = {f"druid-{s}": "yes" for s in ("zookeeper", "coordinator", "broker", "historical", "indexer", "router")}
    assert {k: v for k, v in rows.items() if k.startswith("druid-")} == expected


def test_the_analyst_url_follows_the_router_port(druid: DruidSettings, env: dict[str, str]) -> None:
    url = Settings(state_dir=druid.state_dir.parent, druid_ports=json.loads(env["PRICESTREAM_DRUID_PORTS"])).druid_url
    assert url == druid.router_url
    assert druid_stack._healthy(url)
