"""The standalone Flink cluster from the scripts that the PyFlink wheel ships.

``start`` writes a private conf dir (ports, memory, the venv's python) under the
state dir and runs ``bin/start-cluster.sh`` with ``FLINK_PID_DIR`` and
``FLINK_LOG_DIR`` there too, so ``stop`` ends exactly the JobManager and
TaskManager it started. ``submit_python_job`` runs ``flink run -d -py`` with our
packages shipped as one zip (client and Python workers import them from it) and
the venv's interpreter on both sides; job states come from the REST API.

Example:
    >>> cfg = StackConfig(state_dir=Path("/tmp/ps-doc"), flink_rest_port=18081)
    >>> rest_url(cfg)
    'http://127.0.0.1:18081'
    >>> job_state(cfg, "0" * 32) is None  # nothing listens there
    True
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pyflink

from infra.config import REPO_ROOT, StackConfig
from infra.errors import StartError
from infra.processes import tail

FLINK_HOME = Path(pyflink.__file__).resolve().parent
TERMINAL_STATES = frozenset({"FINISHED", "FAILED", "CANCELED", "SUSPENDED"})
# The JobManager only schedules and serves REST here; Flink's floor for its
# process size (metaspace + overhead + heap) is about 600 MB, so 768m is safe and small.
_JOBMANAGER_MEMORY = "768m"
# Managed memory serves RocksDB and Python workers; the job keeps heap state and runs
# pure SQL, so a small fraction leaves the heap to the operators.
_MANAGED_FRACTION = "0.1"
_STOP_WAIT_S = 15.0  # Flink's own scripts SIGKILL 10 s after SIGTERM; a little slack on a busy host
_SHIPPED_PACKAGES: tuple[str, ...] = ("events", "pipelines")


def _state(config: StackConfig) -> Path:
    return config.state_dir / "flink"


def _conf_dir(config: StackConfig) -> Path:
    return _state(config) / "conf"


def _env(config: StackConfig) -> dict[str, str]:
    state = _state(config)
    return {
        **os.environ,
        "FLINK_HOME": str(FLINK_HOME),
        "FLINK_CONF_DIR": str(_conf_dir(config)),
        "FLINK_PID_DIR": str(state / "pids"),
        "FLINK_LOG_DIR": str(state / "log"),
        # flink-daemon.sh names pid and log files after $USER, which is unset in CI containers
        "FLINK_IDENT_STRING": os.environ.get("USER") or "pricestream",
    }


_LISTEN_PORTS = (20_000, 32_767)
"""Where :func:`free_port` looks: below Linux's ephemeral range (32768-60999), so no outgoing connection can take
the port between the pick and the server's bind (a Kafka client did, and the JobManager's REST endpoint failed to
bind: ``BindException``)."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that nothing listens on right now, outside the ephemeral range (a server is about to bind it).

    Example:
        >>> _LISTEN_PORTS[0] <= free_port() <= _LISTEN_PORTS[1]
        True
    """
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randint(*_LISTEN_PORTS)
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue  # taken
            return port
    with socket.socket() as sock:  # a crowded range: let the kernel pick
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def write_conf(config: StackConfig) -> Path:
    """A conf dir with our ports and sizes; the rest is the wheel's defaults.

    The RPC port is picked free at each start (the default 6123 may belong to another
    cluster on this host); the TaskManager reads it from the same conf dir.
    """
    conf = _conf_dir(config)
    conf.mkdir(parents=True, exist_ok=True)
    for name in ("log4j.properties", "log4j-console.properties", "log4j-cli.properties", "logback.xml"):
        shutil.copy(FLINK_HOME / "conf" / name, conf / name)
    java_opts = (FLINK_HOME / "conf" / "config.yaml").read_text().split("all: ", 1)[1].splitlines()[0].strip()
    state = _state(config)
    lines = {
        "env.java.opts.all": java_opts,
        "jobmanager.rpc.address": "localhost",
        "jobmanager.rpc.port": str(free_port()),
        "jobmanager.bind-host": "localhost",
        "taskmanager.bind-host": "localhost",
        "taskmanager.host": "localhost",
        "rest.address": "localhost",
        "rest.bind-address": "localhost",
        "rest.port": str(config.flink_rest_port),
        "jobmanager.memory.process.size": _JOBMANAGER_MEMORY,
        "taskmanager.memory.process.size": config.flink_process_memory,
        "taskmanager.memory.managed.fraction": _MANAGED_FRACTION,
        "taskmanager.numberOfTaskSlots": str(config.flink_taskmanager_slots),
        "parallelism.default": "1",
        "python.executable": sys.executable,
        "python.client.executable": sys.executable,
        "io.tmp.dirs": str(state / "tmp"),
        "web.upload.dir": str(state / "upload"),
        "execution.checkpointing.dir": (state / "checkpoints").resolve().as_uri(),
    }
    (conf / "config.yaml").write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in lines.items()))
    (conf / "masters").write_text(f"localhost:{config.flink_rest_port}\n")
    (conf / "workers").write_text("localhost\n" * config.flink_taskmanagers)  # one TaskManager per line
    for sub in ("tmp", "upload", "log", "pids"):
        # flink-daemon.sh redirects the JVM's stdout into the log dir: a missing dir kills the JVM at once
        (state / sub).mkdir(parents=True, exist_ok=True)
    return conf


def rest_url(config: StackConfig) -> str:
    return f"http://{config.host}:{config.flink_rest_port}"


def _get(config: StackConfig, path: str, *, timeout_s: float = 5.0) -> dict | None:
    try:
        with urllib.request.urlopen(f"{rest_url(config)}{path}", timeout=timeout_s) as resp:  # noqa: S310
            return dict(json.loads(resp.read()))
    except (urllib.error.URLError, OSError, ValueError):
        return None


def overview(config: StackConfig) -> dict | None:
    """``GET /overview`` (task managers, slots, jobs), or None when the REST endpoint is down."""
    return _get(config, "/overview", timeout_s=2.0)


def pids(config: StackConfig) -> list[int]:
    """Pids recorded by ``flink-daemon.sh`` in our pid dir (JobManager and TaskManager)."""
    out = []
    for pid_file in sorted((_state(config) / "pids").glob("*.pid")):
        out += [int(tok) for tok in pid_file.read_text().split() if tok.isdigit()]
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _ours(config: StackConfig, pid: int) -> bool:
    """Alive and started with our log dir (a recycled pid belongs to someone else)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (FileNotFoundError, PermissionError):
        return False
    return _alive(pid) and f"-Dlog.file={_state(config) / 'log'}/" in cmdline


def start(config: StackConfig) -> dict:
    """Start JobManager + TaskManager unless running; return the cluster overview once a slot registered.

    Raises:
        StartError: the scripts failed or no TaskManager registered within ``ready_timeout_s``
            (the message carries the newest log's tail).
    """
    current = overview(config)
    if current is not None and current.get("slots-total", 0) > 0:
        return current
    write_conf(config)
    wanted = config.flink_taskmanagers
    for pid_file in (_state(config) / "pids").glob("*.pid"):
        # a crashed earlier run left pids behind; flink-daemon.sh would append to them
        if not any(_ours(config, int(tok)) for tok in pid_file.read_text().split() if tok.isdigit()):
            pid_file.unlink()
    script = FLINK_HOME / "bin" / "start-cluster.sh"
    done = subprocess.run(["bash", str(script)], env=_env(config), capture_output=True, text=True, check=False)  # noqa: S603,S607
    if done.returncode != 0:
        msg = f"start-cluster.sh failed: {done.stdout[-1500:]} {done.stderr[-1500:]}"
        raise StartError(msg)
    deadline = time.monotonic() + config.ready_timeout_s
    while time.monotonic() < deadline:
        current = overview(config)
        if current is not None and current.get("taskmanagers", 0) >= wanted and current.get("slots-total", 0) > 0:
            return current
        if not any(_alive(pid) for pid in pids(config)):
            break  # both JVMs died: waiting longer cannot help
        time.sleep(0.5)
    logs = sorted((_state(config) / "log").glob("*"), key=lambda p: p.stat().st_mtime)
    msg = f"flink cluster at {rest_url(config)} not ready after start: {tail(logs[-1]) if logs else 'no logs'}"
    raise StartError(msg)


def stop(config: StackConfig) -> bool:
    """Stop the cluster we started (Flink's own pid files under our state dir); True if one ran.

    Both JVMs get SIGTERM at once (``stop-cluster.sh`` stops them one after the other, waiting
    up to 10 s each), then SIGKILL after ``_STOP_WAIT_S``. Returns once they are gone.
    """
    running = [pid for pid in pids(config) if _ours(config, pid)]
    for pid in running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_WAIT_S
    while time.monotonic() < deadline and any(_alive(pid) for pid in running):
        time.sleep(0.1)
    for pid in running:
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    while any(_alive(pid) for pid in running):
        time.sleep(0.05)
    for pid_file in (_state(config) / "pids").glob("*.pid"):
        pid_file.unlink()
    return bool(running)


def ship_packages(config: StackConfig, packages: Sequence[str] = _SHIPPED_PACKAGES) -> Path:
    """Zip our Python packages for ``-pyfs`` (a zip on the path makes them importable).

    Shipping the repo root instead would upload the venv too.
    """
    out = _state(config) / "jobs" / "pricestream-packages.zip"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in packages:
            for path in sorted((REPO_ROOT / package).rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    zf.write(path, path.relative_to(REPO_ROOT).as_posix())
    tmp.replace(out)
    return out


def submit_python_job(config: StackConfig, module_file: Path, args: Sequence[str]) -> str:
    """``flink run -d -py module_file args…`` on the cluster; returns the job id.

    Raises:
        StartError: the client failed (its output tail is in the message).
    """
    flink = FLINK_HOME / "bin" / "flink"
    argv = [
        "bash", str(flink), "run", "-d", "-m", f"localhost:{config.flink_rest_port}",
        "-pyclientexec", sys.executable, "-pyexec", sys.executable,
        "-pyfs", str(ship_packages(config)), "-py", str(module_file), *args,
    ]
    done = subprocess.run(argv, env=_env(config), capture_output=True, text=True, check=False, cwd=REPO_ROOT)  # noqa: S603
    for line in done.stdout.splitlines():
        if "JobID" in line:
            return line.rsplit(" ", 1)[-1].strip()
    msg = f"flink run {module_file} failed (exit {done.returncode}): {done.stdout[-2000:]} {done.stderr[-2000:]}"
    raise StartError(msg)


def job_state(config: StackConfig, job_id: str) -> str | None:
    """The job's state from ``GET /jobs/<id>`` (``RUNNING``, ``FINISHED``…), None if unknown."""
    body = _get(config, f"/jobs/{job_id}")
    return None if body is None or "state" not in body else str(body["state"])


def wait_for_job(config: StackConfig, job_id: str, *, timeout_s: float, poll_s: float = 0.5) -> str:
    """Poll the job until it reaches a terminal state; returns that state.

    Raises:
        StartError: still not terminal after ``timeout_s`` (last state in the message).
    """
    deadline = time.monotonic() + timeout_s
    state = None
    while time.monotonic() < deadline:
        state = job_state(config, job_id)
        if state in TERMINAL_STATES:
            return state
        time.sleep(poll_s)
    msg = f"job {job_id}: state {state!r} after {timeout_s}s, expected one of {sorted(TERMINAL_STATES)}"
    raise StartError(msg)


def cancel_job(config: StackConfig, job_id: str) -> bool:
    """``PATCH /jobs/<id>?mode=cancel``; True when the cluster accepted the request."""
    request = urllib.request.Request(f"{rest_url(config)}/jobs/{job_id}?mode=cancel", method="PATCH")  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=5) as resp:  # noqa: S310
            return bool(200 <= resp.status < 300)
    except (urllib.error.URLError, OSError):
        return False


def list_jobs(config: StackConfig) -> list[dict]:
    """``GET /jobs/overview``: one dict per job (``jid``, ``name``, ``state``, timings)."""
    body = _get(config, "/jobs/overview") or {}
    return list(body.get("jobs", []))


def job_exceptions(config: StackConfig, job_id: str) -> str:
    """The root exception the cluster recorded for a job ('' when none)."""
    body = _get(config, f"/jobs/{job_id}/exceptions") or {}
    history = body.get("exceptionHistory", {}).get("entries", [])
    return str(history[0].get("stacktrace", "")) if history else str(body.get("root-exception") or "")
