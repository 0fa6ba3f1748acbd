"""A local deployment driven from outside: the processes of ``pricestream run``, seen as a client sees them.

:class:`Deployment` starts the programs of :func:`pricestream.supervision.programs` under
``supervisord`` with one :class:`~pricestream.settings.Settings` turned into ``PRICESTREAM_*``
variables (:func:`settings_env`), and then only talks to them the way an operator's tools do:
``/healthz`` of each process, ``pricestream ...`` commands (:meth:`Deployment.cli`), and the
supervisor's status. It holds no scorer and no service of its own. The demo
(:mod:`pricestream.demo`) drives one.

:func:`record_deployment` notes where a deployment keeps its state, so that ``pricestream monitor
report`` finds the running system's decisions without flags (:func:`latest_deployment`).

Example:
    >>> from pathlib import Path
    >>> env = settings_env(Settings(state_dir=Path("/tmp/x"), topic_prefix="demo1-", recalibrate=True))
    >>> env["PRICESTREAM_STATE_DIR"], env["PRICESTREAM_TOPIC_PREFIX"], env["PRICESTREAM_RECALIBRATE"]
    ('/tmp/x', 'demo1-', 'true')
    >>> "PRICESTREAM_AUDIT_LOG" in env  # None: the child derives it from the state dir, as this process does
    False
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from pricestream.settings import Settings
from pricestream.supervision import Program, Status, Supervisor, executable, programs

_PREFIX = "PRICESTREAM_"
_POLL_S = 0.5
_HTTP_TIMEOUT_S = 5.0
DEPLOYMENT_FILE = "deployment.json"
"""Under a settings' data dir: the settings of the deployment last started from there (the demo's)."""


class DeploymentError(RuntimeError):
    """A process of the deployment did not start, answer or stop as expected (the message names it)."""


def settings_env(s: Settings, *, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default ``os.environ``) without its ``PRICESTREAM_*`` variables, plus every set field of ``s``."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith(_PREFIX)}
    for name in type(s).model_fields:
        value = getattr(s, name)
        if value is None:
            continue
        env[f"{_PREFIX}{name.upper()}"] = _env_text(value)
    return env


def _env_text(value: object) -> str:
    """A setting as its variable's text: secrets revealed (the child needs them), mappings as JSON.

    Example:
        >>> _env_text({"scorer": SecretStr("pw")}), _env_text(True), _env_text(SecretStr("k"))
        ('{"scorer": "pw"}', 'true', 'k')
    """
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return json.dumps({str(k): _env_text(v) for k, v in value.items()})
    return str(value)


def port_free(host: str, port: int) -> bool:
    """Nothing listens on ``host:port`` (a bind succeeds)."""
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def healthz(url: str) -> tuple[int, dict[str, Any]]:
    """``(status code, body)`` of a ``/healthz`` (503 bodies too); raises ``OSError`` when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=_HTTP_TIMEOUT_S) as resp:
            return int(resp.status), json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return int(exc.code), json.loads(exc.read() or b"{}")


@dataclass
class Deployment:
    """The processes of ``pricestream run`` on ``settings``, with ``extra_env`` for the per-process options.

    Args:
        settings: the deployment's settings (state dir, Kafka, Redis, ports, prefix, ...).
        extra_env: variables of the commands' own options (``PRICESTREAM_LABEL_HORIZON_HOURS``, ...).
        skip: programs left out.
    """

    settings: Settings
    extra_env: dict[str, str] = field(default_factory=dict)
    skip: frozenset[str] = frozenset()
    supervisor: Supervisor | None = None
    exit_codes: dict[str, int] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        return {**settings_env(self.settings), **self.extra_env}

    @property
    def programs(self) -> list[Program]:
        return programs(self.settings, skip=self.skip)

    @property
    def base_url(self) -> str:
        return f"http://{self.settings.http_host}:{self.settings.http_port}"

    def start(self) -> None:
        """Check the ports are free, start supervisord and with it every program."""
        from pricestream.ops_ports import with_ops_ports

        self.settings = s = with_ops_ports(self.settings)  # its own block of ops ports, recorded in its state dir
        busy = [p for p in self._ports() if not port_free(s.http_host, p)]
        if busy:
            msg = (f"ports {busy} are in use: set PRICESTREAM_HTTP_PORT / PRICESTREAM_OPS_BASE_PORT to free ones "
                   "(another serve or run is up)")
            raise DeploymentError(msg)
        if s.secure:  # as the admin: each service's ACLs on this deployment's (prefixed) topics and groups
            from infra.kafka_security import apply_acls
            from infra.redis_server import grant_project

            apply_acls(s.stack(), s.topic_prefix)
            grant_project(s.stack())  # and the Redis users' key pattern of its Feast project
        self.supervisor = Supervisor(s.state_dir / "run", self.programs, grace_s=s.grace_s, env=self.env)
        self.supervisor.start()

    def _ports(self) -> list[int]:
        ports = [self.settings.http_port] if "serve" not in self.skip else []
        return ports + [int(p.ops_url.rsplit(":", 1)[1].split("/", 1)[0]) for p in self.programs
                        if p.ops_url is not None and p.name != "serve"]

    def statuses(self) -> list[Status]:
        if self.supervisor is None:
            msg = "the deployment is not started"
            raise DeploymentError(msg)
        return self.supervisor.statuses()

    def wait_ready(self, *, timeout_s: float, on_wait: Callable[[str], None] | None = None) -> None:
        """Until every program is RUNNING and every ``/healthz`` says ok."""
        deadline = time.monotonic() + timeout_s
        while True:
            rows = self.statuses()
            waiting = [f"{r.name} ({r.state}, {r.health})" for r in rows
                       if r.state != "RUNNING" or r.health not in ("ok", "-")]
            if not waiting:
                return
            failed = [r.name for r in rows if r.state == "FATAL"]  # supervisord gave up restarting it
            if failed or time.monotonic() > deadline:
                msg = (f"not ready after {timeout_s:.0f} s: {', '.join(waiting)}; logs in "
                       f"{self.settings.state_dir / 'run' / 'logs'}")
                raise DeploymentError(msg)
            if on_wait is not None:
                on_wait(", ".join(waiting))
            time.sleep(_POLL_S)

    def health(self, name: str) -> dict[str, Any]:
        """The ``/healthz`` body of one program (``{}`` if it does not answer)."""
        url = next(p.ops_url for p in self.programs if p.name == name)
        if url is None:
            return {}
        try:
            return healthz(url)[1]
        except (OSError, ValueError):
            return {}

    def caught_up(self, names: tuple[str, ...], *, settle_s: float, timeout_s: float) -> bool:
        """Wait until each of ``names`` has consumer lag 0 and an unchanged ``consumed`` count for ``settle_s``.

        Returns False (having waited ``timeout_s``) if they did not settle.
        """
        deadline = time.monotonic() + timeout_s
        last: tuple[Any, ...] | None = None
        since = time.monotonic()
        while time.monotonic() < deadline:
            bodies = [self.health(n) for n in names]
            mark = tuple(b.get("consumed") for b in bodies)
            idle = all(b.get("lag_total") == 0 and b.get("assigned") for b in bodies)
            if mark != last or not idle:
                last, since = mark, time.monotonic()
            elif time.monotonic() - since >= settle_s:
                return True
            time.sleep(_POLL_S)
        return False

    def cli(self, *args: str, timeout_s: float = 300.0) -> subprocess.CompletedProcess[str]:
        """Run ``pricestream ARGS`` against this deployment (its settings in the environment)."""
        return subprocess.run([executable(), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout_s, check=False)

    def stop(self) -> dict[str, int]:
        """Stop every program (SIGTERM each within its grace, consumers first) and supervisord; exit codes."""
        if self.supervisor is None:
            return {}
        sup, self.supervisor = self.supervisor, None
        sup.shutdown(timeout_s=self.settings.grace_s * len(sup.progs) + 30.0)
        self.exit_codes = sup.exit_codes()
        return {name: code for name, code in sup.unclean().items()}


def record_deployment(home: Settings, deployment: Settings, *, reference: str | None = None) -> Path:
    """Note under ``home``'s data dir that ``deployment`` runs from there (and its drift reference snapshot)."""
    path = home.data_dir / DEPLOYMENT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"settings": deployment.model_dump(mode="json", exclude_none=True), "reference": reference}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(body, indent=1), encoding="utf-8")
    tmp.replace(path)
    return path


def latest_deployment(home: Settings) -> tuple[Settings, str | None]:
    """The settings whose audit log was written last: ``home``'s own, or the recorded deployment's.

    Returns the settings and the recorded drift reference (``None`` for ``home`` itself).

    Raises:
        ValueError: the recorded file is not a deployment record (names the file and the field).
    """
    path = home.data_dir / DEPLOYMENT_FILE
    if not path.exists():
        return home, None
    body = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(body, dict) or not isinstance(body.get("settings"), dict):
        msg = f"{path}: field 'settings': expected an object of pricestream settings, got {body!r:.80}"
        raise ValueError(msg)
    recorded = Settings(**body["settings"])
    mine, theirs = home.audit(), recorded.audit()
    if not theirs.exists():
        return home, None
    if mine.exists() and mine.stat().st_mtime >= theirs.stat().st_mtime:
        return home, None
    return recorded, body.get("reference")


def free_ports(host: str, n: int) -> int:
    """A base port with ``n`` consecutive free ports from it (for a deployment beside another one)."""
    from infra.flink_cluster import free_port  # here, not at import: it imports pyflink

    for _ in range(100):
        base = free_port()  # below the ephemeral range: no outgoing connection takes it before the bind
        if base + n < 65_000 and all(port_free(host, base + i) for i in range(n)):
            return base
    msg = f"no block of {n} free ports on {host}"
    raise DeploymentError(msg)
