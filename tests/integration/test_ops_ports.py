"""Issue 31 item 6 on the real stack: ports named when taken, taken before slow work, status of our own processes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from infra.config import StackConfig
from pricestream.supervision import Program, Supervisor, executable

pytestmark = pytest.mark.integration


class _Ok(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        body = json.dumps({"status": "ok", "lag_total": 0}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's signature
        """Quiet."""


@pytest.fixture
def other_stack() -> Iterator[int]:
    """Another deployment's healthy ops endpoint, on a port of its own."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_port)
    server.shutdown()
    server.server_close()


def _env(stack: StackConfig, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PRICESTREAM_KAFKA_BOOTSTRAP": stack.kafka_bootstrap,
            "PRICESTREAM_REDIS_URL": stack.redis_url,
            "PRICESTREAM_TOPIC_PREFIX": f"t{uuid.uuid4().hex[:10]}.", "PRICESTREAM_STATE_DIR": str(tmp_path / "state"),
            "PRICESTREAM_CACHE_DIR": str(stack.cache_dir)}


def test_the_status_table_does_not_read_another_stack_health_as_its_own(other_stack: int, tmp_path: Path) -> None:
    crashed = Program("monitor", f"{sys.executable} -c 'import time; time.sleep(60)'", 10,
                      ops_url=f"http://127.0.0.1:{other_stack}/healthz")
    sup = Supervisor(tmp_path / "run", [crashed], grace_s=2.0)
    sup.start()
    try:
        deadline = time.monotonic() + 20
        while (row := sup.statuses()[0]).state != "RUNNING" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert row.state == "RUNNING"
        assert row.health == f"not listening on 127.0.0.1:{other_stack}"  # it said "ok": the other stack's answer
    finally:
        sup.shutdown(timeout_s=30)


def test_a_service_whose_ops_port_is_taken_names_the_address(stack: StackConfig, tmp_path: Path,
                                                               other_stack: int) -> None:
    done = subprocess.run([executable(), "services", "run", "monitor", "--ops-port", str(other_stack),
                           "--max-idle", "1"], env=_env(stack, tmp_path), capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 1
    assert f"cannot bind 127.0.0.1:{other_stack}" in done.stderr, done.stderr[-2000:]


def test_serve_on_a_taken_port_fails_before_it_trains(stack: StackConfig, tmp_path: Path, other_stack: int) -> None:
    began = time.monotonic()
    done = subprocess.run([executable(), "serve", "--port", str(other_stack)], env=_env(stack, tmp_path),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1
    assert f"serve --port: cannot bind 127.0.0.1:{other_stack}" in done.stderr, done.stderr[-2000:]
    assert "serving on" not in done.stderr
    assert not (tmp_path / "state" / "data" / "registry").exists()  # no starter model was trained first
    assert time.monotonic() - began < 60


def test_monitor_stream_default_port_is_not_the_trainer_port(stack: StackConfig, tmp_path: Path) -> None:
    with socket.socket() as trainer:  # 9464: the trainer's ops port under `pricestream run` before
        try:
            trainer.bind(("127.0.0.1", 9464))
            trainer.listen()
        except OSError:
            pass  # already taken by someone: the point stands
        done = subprocess.run([executable(), "monitor", "stream", "--max-idle", "1", "--out",
                               str(tmp_path / "m.html")], env=_env(stack, tmp_path), capture_output=True, text=True,
                              timeout=180, check=False)
    assert "already in use" not in done.stderr, done.stderr[-2000:]  # (with no decisions it then ends with exit 1)
    line = next(x for x in done.stderr.splitlines() if x.startswith("metrics on http://127.0.0.1:"))
    assert not line.startswith("metrics on http://127.0.0.1:9464/")
