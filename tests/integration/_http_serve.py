"""For the HTTP API tests: a private redis-server, a real ``pricestream serve`` process, a strict JSON reader."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from infra.config import StackConfig

PRICESTREAM = str(Path(sys.executable).with_name("pricestream"))
START_WAIT_S = 240.0
"""Bound on waiting for a process to answer (bootstrap training on a loaded 2-core host); not an assertion."""


def free_port() -> int:
    """A port for a server about to start, outside the ephemeral range (:func:`infra.flink_cluster.free_port`)."""
    from infra.flink_cluster import free_port as listen_port

    return listen_port()


def strict_json(raw: bytes) -> Any:
    """``raw`` read as RFC 8259 JSON: UTF-8, no NaN/Infinity, no lone surrogates (else the test fails)."""

    def refuse(token: str) -> None:
        msg = f"non-JSON constant {token!r} in a response"
        raise AssertionError(msg)

    value = json.loads(raw.decode("utf-8"), parse_constant=refuse)
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            item.encode("utf-8")  # raises on a lone surrogate
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return value


class RedisServer:
    """A redis-server of this test alone (own port, no persistence), that the test may stop and restart."""

    def __init__(self, port: int, workdir: Path, *, password: str | None = None) -> None:
        self.port = port
        self.workdir = workdir
        self.password = password
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server") or "redis-server"
        args = [binary, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no",
                "--dir", str(self.workdir)]
        if self.password:
            args += ["--requirepass", self.password]
        self._proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        msg = f"redis-server on port {self.port} did not listen within 30 s"
        raise RuntimeError(msg)

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=30)
            self._proc = None


@contextmanager
def serve(stack: StackConfig, state_dir: Path, **env_extra: str) -> Iterator[str]:
    """A real ``pricestream serve`` on a free loopback port; yields its base URL, stops it (SIGTERM) after."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRICESTREAM_")}
    env.update({
        "PRICESTREAM_STATE_DIR": str(state_dir),
        "PRICESTREAM_KAFKA_BOOTSTRAP": stack.kafka_bootstrap,
        "PRICESTREAM_REDIS_URL": stack.redis_url,
        "PRICESTREAM_TOPIC_PREFIX": f"t{uuid.uuid4().hex[:10]}-",
        "PRICESTREAM_HTTP_HOST": "127.0.0.1",
        "PRICESTREAM_HTTP_PORT": str(port),
        "PRICESTREAM_BOOTSTRAP_ROWS": "200",
        "PRICESTREAM_AUDIT": "false",
        **env_extra,
    })
    log = (state_dir / f"serve-{port}.log").open("wb")
    proc = subprocess.Popen([PRICESTREAM, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_WAIT_S
        while True:
            if proc.poll() is not None:
                msg = f"pricestream serve exited with {proc.returncode}: {_tail(state_dir / f'serve-{port}.log')}"
                raise RuntimeError(msg)
            try:
                httpx.get(f"{base}/openapi.json", timeout=2.0)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def serve_log(state_dir: Path) -> str:
    """Everything the serve processes under ``state_dir`` wrote."""
    return "".join(p.read_text(errors="replace") for p in sorted(state_dir.glob("serve-*.log")))


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-2000:] if path.exists() else "(no log)"
