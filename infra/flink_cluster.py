"""The standalone Flink cluster from the scripts that the PyFlink wheel ships.

``start`` writes a private conf dir (ports, memory, the venv's python) under the
state dir and runs ``bin/start-cluster.sh`` with ``FLINK_PID_DIR`` there too, so
``stop`` ends exactly the JobManager and TaskManager it started.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pyflink

from infra.config import StackConfig
from infra.errors import StartError
from infra.processes import tail

FLINK_HOME = Path(pyflink.__file__).resolve().parent


def _conf_dir(config: StackConfig) -> Path:
    return config.state_dir / "flink" / "conf"


def _env(config: StackConfig) -> dict[str, str]:
    state = config.state_dir / "flink"
    return {
        **os.environ,
        "FLINK_HOME": str(FLINK_HOME),
        "FLINK_CONF_DIR": str(_conf_dir(config)),
        "FLINK_PID_DIR": str(state / "pids"),
        "FLINK_LOG_DIR": str(state / "log"),
    }


def write_conf(config: StackConfig) -> Path:
    """A conf dir with our ports and sizes; the rest is the wheel's defaults."""
    conf = _conf_dir(config)
    conf.mkdir(parents=True, exist_ok=True)
    for name in ("log4j.properties", "log4j-console.properties", "log4j-cli.properties", "logback.xml"):
        shutil.copy(FLINK_HOME / "conf" / name, conf / name)
    java_opts = (FLINK_HOME / "conf" / "config.yaml").read_text().split("all: ", 1)[1].splitlines()[0].strip()
    state = config.state_dir / "flink"
    lines = {
        "env.java.opts.all": java_opts,
        "jobmanager.rpc.address": "localhost",
        "jobmanager.bind-host": "localhost",
        "taskmanager.bind-host": "localhost",
        "taskmanager.host": "localhost",
        "rest.address": "localhost",
        "rest.bind-address": "localhost",
        "rest.port": str(config.flink_rest_port),
        "jobmanager.memory.process.size": "1024m",
        "taskmanager.memory.process.size": config.flink_process_memory,
        "taskmanager.numberOfTaskSlots": str(config.flink_taskmanager_slots),
        "parallelism.default": "1",
        "python.executable": sys.executable,
        "python.client.executable": sys.executable,
        "io.tmp.dirs": str(state / "tmp"),
        "execution.checkpointing.dir": (state / "checkpoints").resolve().as_uri(),
    }
    (conf / "config.yaml").write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in lines.items()))
    (conf / "masters").write_text(f"localhost:{config.flink_rest_port}\n")
    (conf / "workers").write_text("localhost\n")
    (state / "tmp").mkdir(parents=True, exist_ok=True)
    return conf


def rest_url(config: StackConfig) -> str:
    return f"http://{config.host}:{config.flink_rest_port}"


def overview(config: StackConfig) -> dict | None:
    try:
        with urllib.request.urlopen(f"{rest_url(config)}/overview", timeout=2) as resp:  # noqa: S310
            return json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None


def start(config: StackConfig) -> dict:
    """Start JobManager + TaskManager unless running; return the cluster overview once a slot is up."""
    current = overview(config)
    if current is not None and current.get("taskmanagers", 0) > 0:
        return current
    write_conf(config)
    script = FLINK_HOME / "bin" / "start-cluster.sh"
    done = subprocess.run(["bash", str(script)], env=_env(config), capture_output=True, text=True, check=False)  # noqa: S603,S607
    if done.returncode != 0:
        msg = f"start-cluster.sh failed: {done.stdout[-1500:]} {done.stderr[-1500:]}"
        raise StartError(msg)
    deadline = time.monotonic() + config.ready_timeout_s
    while time.monotonic() < deadline:
        current = overview(config)
        if current is not None and current.get("taskmanagers", 0) > 0:
            return current
        time.sleep(1.0)
    logs = sorted((config.state_dir / "flink" / "log").glob("*.log"))
    msg = f"flink cluster not ready after {config.ready_timeout_s}s: {tail(logs[-1]) if logs else 'no logs'}"
    raise StartError(msg)


def stop(config: StackConfig) -> bool:
    """Stop the cluster we started (Flink's own pid files under our state dir)."""
    pid_dir = config.state_dir / "flink" / "pids"
    if not pid_dir.exists() or not any(pid_dir.glob("*.pid")):
        return False
    script = FLINK_HOME / "bin" / "stop-cluster.sh"
    subprocess.run(["bash", str(script)], env=_env(config), capture_output=True, text=True, check=False)  # noqa: S603,S607
    return True


def submit_python_job(config: StackConfig, module_file: Path, args: list[str], *, repo_root: Path) -> str:
    """``flink run -d -py`` a Python job on the cluster; returns the job id."""
    flink = FLINK_HOME / "bin" / "flink"
    argv = [
        "bash", str(flink), "run", "-d", "-m", f"localhost:{config.flink_rest_port}",
        "-py", str(module_file), "-pyfs", str(repo_root), *args,
    ]
    done = subprocess.run(argv, env=_env(config), capture_output=True, text=True, check=False)  # noqa: S603
    for line in done.stdout.splitlines():
        if "JobID" in line:
            return line.rsplit(" ", 1)[-1].strip()
    msg = f"flink run failed (exit {done.returncode}): {done.stdout[-2000:]} {done.stderr[-2000:]}"
    raise StartError(msg)


def job_state(config: StackConfig, job_id: str) -> str | None:
    try:
        with urllib.request.urlopen(f"{rest_url(config)}/jobs/{job_id}", timeout=5) as resp:  # noqa: S310
            return str(json.loads(resp.read())["state"])
    except (urllib.error.URLError, OSError, ValueError, KeyError):
        return None
