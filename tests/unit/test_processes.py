"""Pid-file tracking of the processes the local stack owns (with a harmless ``sleep`` as the service)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from infra import processes

_SLEEP = shutil.which("sleep") or "/bin/sleep"


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[Path]]:
    """Pid files to stop after the test, whatever happened."""
    files: list[Path] = []
    yield files
    for pid_file in files:
        processes.stop(pid_file, grace_s=2.0)


def _spawn(cwd: Path, pid_file: Path, started: list[Path]) -> int:
    started.append(pid_file)
    return processes.spawn([_SLEEP, "60"], pid_file=pid_file, log_file=cwd / "sleep.log", cwd=cwd)


def test_pid_is_found_through_a_symlinked_state_dir(tmp_path: Path, started: list[Path]) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    pid_file = tmp_path / "link" / "pids" / "svc.pid"
    pid = _spawn(tmp_path / "link" / "svc", pid_file, started)
    assert processes.read_pid(pid_file) == pid  # the kernel reports .../real/svc as the cwd
    assert pid_file.read_text().split()[1] == str(tmp_path.resolve() / "real" / "svc")


def test_relative_state_dir_is_recorded_absolute(tmp_path: Path, started: list[Path],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    pid = _spawn(Path("state") / "svc", tmp_path / "svc.pid", started)
    assert processes.read_pid(tmp_path / "svc.pid") == pid


def test_a_pid_running_elsewhere_is_not_ours(tmp_path: Path, started: list[Path]) -> None:
    pid = _spawn(tmp_path / "redis2", tmp_path / "real.pid", started)
    impostor = tmp_path / "svc.pid"
    impostor.write_text(f"{pid} {tmp_path / 'redis'}\n")  # a sibling dir sharing the prefix
    assert processes.read_pid(impostor) is None
    assert processes.stop(impostor) is False  # and stop leaves the stranger alone
    assert processes.read_pid(tmp_path / "real.pid") == pid
    impostor.write_text(f"{os.getpid()} {tmp_path}\n")  # this test runner: alive, but not in our dir
    assert processes.read_pid(impostor) is None


def test_stop_terminates_and_reaps(tmp_path: Path, started: list[Path]) -> None:
    pid_file = tmp_path / "svc.pid"
    pid = _spawn(tmp_path / "svc", pid_file, started)
    assert processes.stop(pid_file, grace_s=5.0) is True
    assert not Path(f"/proc/{pid}").exists()
    assert not pid_file.exists()
    assert processes.stop(pid_file) is False


@pytest.mark.parametrize("content", ["", "not-a-pid /x", "999999999 /x"])
def test_garbage_or_dead_pid_files_read_as_none(tmp_path: Path, content: str) -> None:
    pid_file = tmp_path / "svc.pid"
    pid_file.write_text(content)
    assert processes.read_pid(pid_file) is None
