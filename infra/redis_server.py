"""A local ``redis-server`` with AOF on, data in the state directory."""

from __future__ import annotations

import time

import redis

from infra import processes
from infra.config import StackConfig
from infra.errors import StartError
from infra.prereqs import require

SERVICE = "redis"


def start(config: StackConfig) -> int:
    """Start redis-server if not running; return its pid once it answers PING."""
    pid = processes.read_pid(config.pid_file(SERVICE))
    if pid is not None:
        return pid
    binary = require("redis-server", "Redis (apt-get install redis-server)")
    data = config.state_dir / SERVICE
    data.mkdir(parents=True, exist_ok=True)
    argv = [
        binary, "--bind", config.host, "--port", str(config.redis_port), "--dir", str(data),
        "--appendonly", "yes", "--appendfsync", "everysec", "--daemonize", "no",
        "--save", "", "--protected-mode", "yes", "--logfile", "",
    ]
    pid = processes.spawn(
        argv, pid_file=config.pid_file(SERVICE), log_file=config.log_file(SERVICE), cwd=config.state_dir / SERVICE
    )
    wait_ready(config)
    return pid


def ready(url: str) -> bool:
    client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
    try:
        return bool(client.ping())
    except (redis.ConnectionError, redis.TimeoutError):
        return False
    finally:
        client.close()


def wait_ready(config: StackConfig) -> None:
    deadline = time.monotonic() + config.ready_timeout_s
    while time.monotonic() < deadline:
        if processes.read_pid(config.pid_file(SERVICE)) is None:
            msg = f"redis-server exited during start-up:\n{processes.tail(config.log_file(SERVICE))}"
            raise StartError(msg)
        if ready(config.redis_url):
            return
        time.sleep(0.1)
    msg = f"redis not ready after {config.ready_timeout_s}s:\n{processes.tail(config.log_file(SERVICE))}"
    raise StartError(msg)


def stop(config: StackConfig) -> bool:
    return processes.stop(config.pid_file(SERVICE))
