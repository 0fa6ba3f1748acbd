"""A local ``redis-server`` with AOF on, data in the state directory.

A secure stack (``StackConfig.secure``, ``pricestream up --secure``) starts it with an ACL
file of one user per role and the ``default`` user off, passwords stored as sha256 (``#<hex>``):

* ``admin``: everything (start-up checks, operators);
* ``scorer``: reads feature hashes only (``HGET``/``HMGET``/``HGETALL``/``EXISTS`` on keys
  matching ``*<project>``); no write, no ``FLUSHALL``, no ``CONFIG``;
* ``writer``: the online writer: hash reads and writes and the compare-and-set Lua
  scripts (``EVALSHA``/``EVAL``/``SCRIPT LOAD``) on the same key pattern, nothing else.

Example:
    >>> from pathlib import Path
    >>> from pydantic import SecretStr
    >>> cfg = StackConfig(state_dir=Path("/tmp/ps"), secure=True,
    ...                   redis_passwords={r: SecretStr(r + "-pw") for r in ROLES})
    >>> lines = acl_lines(cfg)
    >>> lines[0], lines[2].split()[:3]
    ('user default off', ['user', 'scorer', 'on'])
    >>> "scorer-pw" in "\\n".join(lines)
    False
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from urllib.parse import quote

import redis

from infra import processes
from infra.config import StackConfig
from infra.errors import StartError
from infra.prereqs import require

SERVICE = "redis"

ROLES = ("admin", "scorer", "writer")
"""Redis users of a secure stack."""

_CONNECT = "+auth +hello +ping +select +echo +quit +reset +client|setname +client|getname"
"""What every role may do on a connection (not ``CLIENT KILL`` or ``CLIENT LIST``: no ``@connection``)."""

_ROLE_RULES = {
    "admin": "~* &* +@all",
    "scorer": f"resetchannels -@all {_CONNECT} +hget +hmget +hgetall +exists",
    "writer": f"resetchannels -@all {_CONNECT} +hget +hmget +hgetall +exists +hset +hdel +evalsha +eval "
              "+script|load +script|exists",
}


def _password(config: StackConfig, role: str) -> str:
    secret = config.redis_passwords.get(role)
    if secret is None or not secret.get_secret_value():
        msg = (f"redis_passwords[{role!r}]: got no password, expected one for a secure stack "
               f"(PRICESTREAM_REDIS_{role.upper()}_PASSWORD)")
        raise StartError(msg)
    return secret.get_secret_value()


def acl_lines(config: StackConfig) -> list[str]:
    """The ACL file of a secure stack: ``default`` off, one user per role, passwords as sha256."""
    pattern = f"~*{config.feature_project}"
    lines = ["user default off"]
    for role in ROLES:
        digest = hashlib.sha256(_password(config, role).encode("utf-8")).hexdigest()
        keys = "" if role == "admin" else f" {pattern}"
        lines.append(f"user {role} on #{digest}{keys} {_ROLE_RULES[role]}")
    return lines


_PROJECT_NAME = re.compile(r"[A-Za-z0-9_]+")
"""A Feast project name (no glob characters: it becomes a key pattern)."""


def grant_project(config: StackConfig) -> list[str]:
    """Let the ``scorer`` and ``writer`` users at ``config.feature_project``'s keys too, as the admin (idempotent).

    The ACL file covers the project the stack was started with; a deployment with a Feast project of
    its own (the demo's, one per run) gets its key pattern here when it starts, as it gets its Kafka
    ACLs. The grant lives in the server's memory (the file keeps the start-up project): each start of
    a deployment applies it again. Returns the roles granted (none when the stack is not secure).

    Raises:
        StartError: the project name is not a plain name, or the server refused (names the role).
    """
    if not config.secure:
        return []
    project = config.feature_project
    if not _PROJECT_NAME.fullmatch(project):
        msg = (f"feast_project: got {project!r}, expected letters, digits and underscores only "
               "(it becomes a Redis ACL key pattern)")
        raise StartError(msg)
    client = redis.Redis.from_url(role_url(config, "admin"), socket_connect_timeout=5.0, socket_timeout=5.0)
    granted = []
    try:
        for role in ("scorer", "writer"):
            client.execute_command("ACL", "SETUSER", role, f"~*{project}")
            granted.append(role)
    except redis.RedisError as exc:
        role = ("scorer", "writer")[len(granted)]
        msg = f"redis ACL SETUSER {role} ~*{project}: refused ({exc}); expected the admin user to grant it"
        raise StartError(msg) from exc
    finally:
        client.close()
    return granted


def role_url(config: StackConfig, role: str) -> str:
    """``redis://<role>:<password>@host:port/0`` (a secret: never log it); the plain URL when not secure."""
    if not config.secure:
        return config.redis_url
    user, password = quote(role, safe=""), quote(_password(config, role), safe="")
    scheme, _, rest = config.redis_url.partition("://")
    return f"{scheme}://{user}:{password}@{rest}"


def _write_acl(config: StackConfig) -> str:
    path = config.state_dir / SERVICE / "users.acl"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write("\n".join(acl_lines(config)) + "\n")
    return str(path)


def _tls_args(config: StackConfig) -> list[str]:
    """redis-server options for TLS only (the plain port off; clients are not asked for certificates).

    Raises:
        StartError: the certificate or its key is missing or not a readable file (names the setting).
    """
    if not config.redis_tls:
        return []
    files = {"redis_tls_cert": config.redis_tls_cert, "redis_tls_key": config.redis_tls_key,
             "redis_tls_ca": config.redis_ca}
    for name, path in files.items():
        if path is None or not path.is_file():
            msg = f"{name}: got {path}, expected a readable PEM file (PRICESTREAM_{name.upper()})"
            raise StartError(msg)
    return ["--port", "0", "--tls-port", str(config.redis_port), "--tls-cert-file", str(config.redis_tls_cert),
            "--tls-key-file", str(config.redis_tls_key), "--tls-ca-cert-file", str(config.redis_ca),
            "--tls-auth-clients", "no"]


def start(config: StackConfig) -> int:
    """Start redis-server if not running; return its pid once it answers PING."""
    pid = processes.read_pid(config.pid_file(SERVICE))
    if pid is not None:
        if config.secure and not (config.state_dir / SERVICE / "users.acl").exists():
            msg = (f"redis (pid {pid}, port {config.redis_port}): running without ACL users, expected a secure "
                   "server; run `pricestream down` first, then `pricestream up --secure`")
            raise StartError(msg)
        return pid
    binary = require("redis-server", "Redis (apt-get install redis-server)")
    data = config.state_dir / SERVICE
    data.mkdir(parents=True, exist_ok=True)
    argv = [
        binary, "--bind", config.host, "--port", str(config.redis_port), "--dir", str(data),
        "--appendonly", "yes", "--appendfsync", "everysec", "--daemonize", "no",
        "--save", "", "--protected-mode", "yes", "--logfile", "",
    ]
    if config.secure:
        argv += ["--aclfile", _write_acl(config)]
    argv += _tls_args(config)
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
        if ready(role_url(config, "admin")):
            return
        time.sleep(0.1)
    msg = f"redis not ready after {config.ready_timeout_s}s:\n{processes.tail(config.log_file(SERVICE))}"
    raise StartError(msg)


def stop(config: StackConfig) -> bool:
    return processes.stop(config.pid_file(SERVICE))
