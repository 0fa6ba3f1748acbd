"""Issue 31 item 12: ``up --secure`` with no password set generates them into a 0600 file every command reads."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from infra.config import StackConfig
from pricestream.supervision import executable
from tests.integration._http_serve import free_port

pytestmark = pytest.mark.integration


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([executable(), *args], env=env, capture_output=True, text=True, timeout=300, check=False)


def test_up_secure_generates_what_is_missing_and_every_command_reads_it(stack_config: StackConfig,
                                                                         tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRICESTREAM_")}  # no password set anywhere
    env |= {"PRICESTREAM_STATE_DIR": str(state), "PRICESTREAM_CACHE_DIR": str(stack_config.cache_dir),
            "PRICESTREAM_KAFKA_PORT": str(free_port()), "PRICESTREAM_KAFKA_CONTROLLER_PORT": str(free_port()),
            "PRICESTREAM_REDIS_PORT": str(free_port()), "PRICESTREAM_KAFKA_HEAP": "320m"}
    try:
        up = _cli(env, "up", "--secure")
        assert up.returncode == 0, (up.stdout + up.stderr)[-3000:]  # was: redis_passwords['admin']: got no password
        saved = state / "secrets" / "stack-passwords.json"
        assert str(saved) in " ".join(up.stderr.split())
        assert saved.stat().st_mode & 0o777 == 0o600
        body = json.loads(saved.read_text())
        assert len(body["kafka"]) == 12 and sorted(body["redis"]) == ["admin", "scorer", "writer"]
        assert len(set(body["kafka"].values()) | set(body["redis"].values())) == 15
        status = _cli(env, "status")  # no PRICESTREAM_SECURE, no password: the state dir says both
        assert status.returncode == 0, status.stderr[-2000:]
        rows = [line for line in status.stdout.splitlines() if "kafka" in line or "redis" in line]
        assert len(rows) == 2 and all(" yes " in line for line in rows), status.stdout
        topics = _cli(env | {"PRICESTREAM_TOPIC_PREFIX": "gen."}, "topics", "create")
        assert topics.returncode == 0, topics.stderr[-2000:]
        again = _cli(env, "up", "--secure")  # the saved passwords are kept, nothing generated again
        assert again.returncode == 0 and "generated" not in again.stderr
        assert json.loads(saved.read_text()) == body
    finally:
        _cli(env, "down")
