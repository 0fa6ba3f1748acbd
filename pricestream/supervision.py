"""The whole pipeline as local OS processes under ``supervisord`` (the ``supervisor`` package).

:func:`programs` lists the processes of a local deployment, each started by its own command:
the Flink feature job (``jobs run features``, which writes Redis itself), the offline writer (and
the online writer when ``job_writes_online`` is off), ``serve``, and the label, sampler, trainer
and monitor services (``services run NAME``). :func:`write_config` turns
them into a ``supervisord.conf`` under ``<state>/run``: per-program logs, ``stopsignal=TERM`` with
``stopwaitsecs`` past the services' grace period, restart on an unexpected exit, and priorities
so that a shutdown stops the consumers of a topic before its producers. :class:`Supervisor` starts
``supervisord`` in the foreground of a child process, reads the processes' states over its
XML-RPC socket, and shuts everything down with one call.

Example:
    >>> from pathlib import Path
    >>> from pricestream.settings import Settings
    >>> progs = programs(Settings(state_dir=Path("/tmp/x"), ops_base_port=9460), exe="pricestream")
    >>> [p.name for p in progs][:3], progs[1].command
    (['features', 'offline-writer', 'serve'], 'pricestream services run offline-writer')
    >>> progs[1].ops_url
    'http://127.0.0.1:9461/healthz'

Ops ports (:mod:`pricestream.ops_ports`): without ``ops_base_port`` a deployment's block of ports is
picked free and recorded under ``<state>/run``; the status table reads a ``/healthz`` only when the
process supervisord started holds that port.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import xmlrpc.client
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.services import TABLE, Service
from pricestream.commands.services import default_ops_port
from pricestream.ops_ports import OPS_PORTS_FILE as OPS_PORTS_FILE
from pricestream.ops_ports import RUN_DIR as RUN_DIR
from pricestream.ops_ports import listening as listening
from pricestream.ops_ports import ops_base as ops_base
from pricestream.ops_ports import own_probe as own_probe
from pricestream.ops_ports import probe as probe
from pricestream.ops_ports import recorded_ops_base as recorded_ops_base
from pricestream.ops_ports import with_ops_ports as with_ops_ports
from pricestream.settings import Settings

STOP_MARGIN_S = 10.0
"""``stopwaitsecs`` = the services' grace period + this: a service that overruns its grace ends itself
(exit 75) before supervisord would have to SIGKILL it."""
_START_TIMEOUT_S = 30.0


class SupervisionError(RuntimeError):
    """supervisord could not be started or reached."""


@dataclass(frozen=True)
class Program:
    """One process of the local deployment."""

    name: str
    command: str
    priority: int
    env: dict[str, str] = field(default_factory=dict)
    ops_url: str | None = None
    """Its ``/healthz`` (``None``: the feature job, which has no such endpoint)."""
    stops_by_signal: bool = False
    """SIGTERM ends it (the Flink job: its state is in its checkpoints), so "terminated by SIGTERM" is a clean stop."""
    stop_as_group: bool = True
    """SIGTERM goes to its whole process group. Not for the feature job: its JVM (a child in the same group)
    would die before the Python side stops the job with a savepoint through it (exit 1, no savepoint)."""


def executable() -> str:
    """The ``pricestream`` console script next to this interpreter (else the one on ``PATH``)."""
    beside = Path(sys.executable).with_name("pricestream")
    return str(beside) if beside.exists() else "pricestream"


def programs(s: Settings, *, exe: str | None = None, skip: frozenset[str] = frozenset()) -> list[Program]:
    """Every process of the pipeline, in start order (producers of a topic before its consumers).

    Without ``s.ops_base_port`` the services' ops ports are this state dir's (:func:`ops_base`).
    """
    exe = exe or executable()
    s = with_ops_ports(s)
    out = [_program(s, exe, service) for service in TABLE]
    if s.job_writes_online:  # the job writes Redis itself unless job_writes_online is off
        skip = skip | {"online-writer"}
    return [p for p in out if p.name not in skip]


def _program(s: Settings, exe: str, service: Service) -> Program:
    """The supervisord program of one row of the service table."""
    env = _login(s, service.principal, redis_user=service.redis_user)
    command = f"{exe} {service.command}"
    if service.kind == "job":
        return Program(service.name, command, service.priority, env=env, stops_by_signal=True, stop_as_group=False)
    if service.kind == "serve":
        serve_url = f"http://{s.http_host}:{s.http_port}/healthz"
        return Program(service.name, command, service.priority, env=env, ops_url=serve_url)
    port = default_ops_port(service.name, base=ops_base(s))
    return Program(service.name, command, service.priority, env={"PRICESTREAM_OPS_PORT": str(port), **env},
                   ops_url=f"http://{s.ops_host}:{port}/healthz")


def _login(s: Settings, principal: str, *, redis_user: str | None = None) -> dict[str, str]:
    """On a secure stack: the program's own Kafka principal and Redis user (names only, never a secret)."""
    if not s.secure:
        return {}
    return {"PRICESTREAM_KAFKA_PRINCIPAL": principal, **({"PRICESTREAM_REDIS_USER": redis_user} if redis_user else {})}


def _quote(value: str) -> str:
    """A supervisord ``environment=`` value: quoted, with ``%`` escaped (the file is %-interpolated)."""
    return '"' + value.replace("%", "%%").replace('"', '\\"') + '"'


_SOCKET_PATH_MAX = 100
"""An AF_UNIX path holds at most 107 bytes on Linux (``sun_path``); a deeper run dir gets its socket in /tmp."""


def socket_path(root: Path) -> Path:
    """supervisord's control socket: ``root/supervisor.sock``, or a per-root name in the temp dir when too long.

    Example:
        >>> socket_path(Path("/srv/state/run")).as_posix()
        '/srv/state/run/supervisor.sock'
        >>> socket_path(Path("/x" * 60)).name.startswith("pricestream-supervisor-")
        True
    """
    sock = root / "supervisor.sock"
    if len(os.fsencode(sock)) <= _SOCKET_PATH_MAX:
        return sock
    digest = hashlib.sha256(os.fsencode(root.resolve())).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"pricestream-supervisor-{digest}.sock"


def write_config(root: Path, progs: list[Program], *, grace_s: float) -> Path:
    """``supervisord.conf`` for ``progs`` under ``root`` (logs in ``root/logs``); returns its path."""
    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    sock = socket_path(root)
    esc = {k: str(v).replace("%", "%%") for k, v in {"root": root, "sock": sock, "logs": logs}.items()}
    lines = [
        "[unix_http_server]", f"file={esc['sock']}", "chmod=0700", "",
        "[supervisord]", f"logfile={esc['root']}/supervisord.log", f"pidfile={esc['root']}/supervisord.pid",
        f"childlogdir={esc['logs']}", "nodaemon=true", "loglevel=info", "",
        "[rpcinterface:supervisor]", "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface",
        "", "[supervisorctl]", f"serverurl=unix://{esc['sock']}", "",
    ]
    for p in progs:
        lines += [
            f"[program:{p.name}]", f"command={p.command.replace('%', '%%')}", f"priority={p.priority}",
            "autostart=true", "autorestart=unexpected", "exitcodes=0", "startsecs=3", "startretries=3",
            "stopsignal=TERM", f"stopwaitsecs={int(grace_s + STOP_MARGIN_S)}",
            f"stopasgroup={'true' if p.stop_as_group else 'false'}", "killasgroup=true",
            f"stdout_logfile={esc['logs']}/{p.name}.out", f"stderr_logfile={esc['logs']}/{p.name}.err",
            "stdout_logfile_maxbytes=20MB", "stderr_logfile_maxbytes=20MB",
        ]
        if p.env:
            lines.append("environment=" + ",".join(f"{k}={_quote(v)}" for k, v in sorted(p.env.items())))
        lines.append("")
    path = root / "supervisord.conf"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


@dataclass
class Status:
    """One row of the status table."""

    name: str
    state: str
    pid: int
    uptime_s: float
    health: str
    lag: int | None
    exit_status: int | None


class Supervisor:
    """``supervisord -n -c conf`` as a child process, driven over its XML-RPC socket.

    Args:
        root: the run directory (config, socket, logs).
        progs: the programs to run.
        grace_s: the services' grace period (their ``stopwaitsecs`` follows it).
        env: environment of supervisord and so of every program.
    """

    def __init__(self, root: Path, progs: list[Program], *, grace_s: float, env: dict[str, str] | None = None):
        self.root = root
        self.progs = {p.name: p for p in progs}
        self.config = write_config(root, progs, grace_s=grace_s)
        self._env = dict(os.environ if env is None else env)
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def _rpc(self) -> Any:
        """A fresh XML-RPC proxy (supervisor's transport keeps one connection, unusable after an error)."""
        from supervisor.xmlrpc import SupervisorTransport

        transport = SupervisorTransport(None, None, serverurl=f"unix://{socket_path(self.root)}")
        return xmlrpc.client.ServerProxy("http://127.0.0.1", transport=transport)

    def start(self) -> None:
        """Start supervisord (in its own session: a terminal's Ctrl-C reaches only this process)."""
        sock = socket_path(self.root)
        sock.unlink(missing_ok=True)
        supervisord = Path(sys.executable).with_name("supervisord")
        exe = str(supervisord) if supervisord.exists() else "supervisord"
        log = (self.root / "supervisord.stdout").open("ab")
        self._proc = subprocess.Popen([exe, "-n", "-c", str(self.config)], env=self._env, stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            try:
                if self._rpc.supervisor.getState()["statename"] == "RUNNING":
                    return
            except (OSError, xmlrpc.client.Fault, http.client.HTTPException):
                pass  # socket not there yet
            if self._proc.poll() is not None or time.monotonic() > deadline:
                msg = f"supervisord did not start (exit {self._proc.poll()}); see {self.root / 'supervisord.log'}"
                raise SupervisionError(msg)
            time.sleep(0.2)

    def statuses(self) -> list[Status]:
        """State of every program (supervisord's) with its ``/healthz`` verdict and consumer lag."""
        rows = []
        for info in self._rpc.supervisor.getAllProcessInfo():
            prog = self.progs.get(info["name"])
            health, lag = ("-", None)
            if info["statename"] == "RUNNING" and prog is not None and prog.ops_url is not None:
                health, lag = own_probe(prog.ops_url, int(info["pid"]))
            uptime = float(info["now"] - info["start"]) if info["statename"] == "RUNNING" else 0.0
            exit_status = info["exitstatus"] if info["statename"] in ("EXITED", "FATAL", "BACKOFF") else None
            rows.append(Status(info["name"], info["statename"], int(info["pid"]), uptime, health, lag, exit_status))
        return rows

    def send(self, name: str, sig: str) -> None:
        """Send ``sig`` (``TERM``, ``KILL``, ...) to one program (supervisord restarts it if that was unexpected)."""
        self._rpc.supervisor.signalProcess(name, sig)

    def restart(self, name: str) -> None:
        """Stop one program gracefully (SIGTERM, its grace period) and start it again by its command."""
        self._rpc.supervisor.stopProcess(name, True)
        self._rpc.supervisor.startProcess(name, True)

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def shutdown(self, *, timeout_s: float) -> int:
        """Stop every program (SIGTERM, reverse priority, each within its grace) and supervisord; its exit code."""
        if self._proc is None:
            return 0
        if self._proc.poll() is None:
            try:
                self._rpc.supervisor.shutdown()
            except (OSError, xmlrpc.client.Fault, http.client.HTTPException):
                self._proc.terminate()  # the socket is not answering: SIGTERM does the same shutdown
        try:
            return self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            return self._proc.wait()

    def unclean(self) -> dict[str, int]:
        """Programs whose last exit was not a clean stop (exit 0, or SIGTERM for those that stop by it)."""
        by_signal = {name for name, p in self.progs.items() if p.stops_by_signal}
        return {name: code for name, code in self.exit_codes().items()
                if code != 0 and not (code == -signal.SIGTERM and name in by_signal)}

    def exit_codes(self) -> dict[str, int]:
        """Exit status of each program as supervisord logged it (``exited: NAME (exit status N; ...)``)."""
        codes: dict[str, int] = {}
        log = self.root / "supervisord.log"
        if not log.exists():
            return codes
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            if "exited: " in line and "exit status " in line:
                name = line.split("exited: ", 1)[1].split(" ", 1)[0]
                codes[name] = int(line.split("exit status ", 1)[1].split(";", 1)[0].split(")", 1)[0])
            elif "stopped: " in line and "(terminated by " in line:
                sig = line.split("(terminated by ", 1)[1].split(")", 1)[0].split(" ", 1)[0]
                number = signal.Signals[sig].value if sig in signal.Signals.__members__ else 0
                codes[line.split("stopped: ", 1)[1].split(" ", 1)[0]] = -number
            elif "stopped: " in line and "(exit status " in line:
                name = line.split("stopped: ", 1)[1].split(" ", 1)[0]
                codes[name] = int(line.split("exit status ", 1)[1].split(")", 1)[0])
        return codes


def command_line(prog: Program) -> list[str]:
    """A program's command as argv (tests start single services the same way)."""
    return shlex.split(prog.command)
