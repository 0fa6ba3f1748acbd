"""Start and stop the processes we own, tracked by pid files (never by name)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

_STOP_GRACE_S = 20.0  # Kafka flushes and closes its log segments on SIGTERM; give it time.


def read_pid(pid_file: Path) -> int | None:
    """The pid in ``pid_file`` if that process is alive and still ours, else None."""
    try:
        parts = pid_file.read_text().split(maxsplit=1)
        pid = int(parts[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None
    marker = parts[1].strip() if len(parts) > 1 else ""
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except (FileNotFoundError, PermissionError):
        return None
    # A recycled pid belongs to someone else: ours run with their cwd inside our state dir
    # (redis rewrites its process title, so the command line cannot be the marker). The
    # kernel reports the resolved path, so the marker is stored resolved too (see spawn).
    if marker and not _inside(cwd, marker):
        return None
    return pid if _alive(pid) else None


def _inside(path: str, root: str) -> bool:
    """``path`` is ``root`` or lies below it (``/s/redis2`` is not inside ``/s/redis``)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def spawn(
    argv: list[str], *, pid_file: Path, log_file: Path, cwd: Path, env: dict[str, str] | None = None
) -> int:
    """Start ``argv`` detached (own session) in ``cwd``, log to ``log_file``, record its pid.

    ``cwd`` must lie inside the state directory: it is how :func:`read_pid` tells our
    process from a stranger that reused the pid.
    """
    cwd.mkdir(parents=True, exist_ok=True)
    marker = str(cwd.resolve())  # /proc/<pid>/cwd is absolute with symlinks resolved
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("ab") as log:
        proc = subprocess.Popen(  # noqa: S603 - argv is built from settings, not user strings
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=cwd,
            env={**os.environ, **(env or {})},
        )
    pid_file.write_text(f"{proc.pid} {marker}\n")
    return proc.pid


def stop(pid_file: Path, *, grace_s: float = _STOP_GRACE_S) -> bool:
    """Stop the process recorded in ``pid_file``; True if one was running."""
    pid = read_pid(pid_file)
    if pid is None:
        pid_file.unlink(missing_ok=True)
        return False
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        while _alive(pid):
            time.sleep(0.05)
    # It may have died between _alive's reap and its state check: a zombie child of ours keeps
    # its /proc entry (and its pid) until waited for.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    pid_file.unlink(missing_ok=True)
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, but another user's: never ours to signal (read_pid filters it out first)
    try:
        # Reap it if it is our child; a zombie is not alive.
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return False
    return state != "Z"


def tail(path: Path, lines: int = 30) -> str:
    """Last lines of a log, for error messages."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return f"(no log at {path})"


def end_tree(proc: subprocess.Popen[bytes], *, sig: int = signal.SIGTERM, timeout_s: float = 30.0) -> None:
    """Signal a child process and all its descendants, then reap them.

    A PyFlink job starts its JVM in a session of its own, so killing the child's
    process group would miss it; the descendants are collected before the signal.
    """
    import psutil

    try:
        family = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        family = []
    for victim in (proc, *family):
        with contextlib.suppress(ProcessLookupError, psutil.NoSuchProcess):
            victim.send_signal(sig)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=timeout_s)
    psutil.wait_procs(family, timeout=timeout_s)
