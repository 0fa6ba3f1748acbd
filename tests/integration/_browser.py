"""A real headless browser for the tests that look at pages: Debian's Chromium (installed by
``infra/install_system_deps.sh``), started the way this closed network needs (no background
networking, no sync, a fresh profile)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync",
          "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000")
_CONSOLE = re.compile(r"CONSOLE\(\d+\)\] \"(.*?)\", source: ", re.S)


@dataclass(frozen=True)
class Rendered:
    dom: str
    console: list[str]
    """Every console message the page logged (errors and uncaught exceptions among them)."""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        msg = "Chromium is not installed; run `make setup` (infra/install_system_deps.sh installs it)"
        raise RuntimeError(msg)
    return found


def render(page: Path, *, timeout_s: float = 120.0) -> Rendered:
    """The DOM after the page's scripts ran, and what they logged to the console."""
    return _dump(page.resolve().as_uri(), timeout_s)


def render_url(url: str, *, timeout_s: float = 120.0) -> Rendered:
    """:func:`render` of a page a server serves (``http://127.0.0.1:PORT/...``)."""
    return _dump(url, timeout_s)


def _dump(target: str, timeout_s: float) -> Rendered:
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(  # noqa: S603
            [chromium(), *_FLAGS, f"--user-data-dir={profile}", "--dump-dom", target],
            capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0 or "<html" not in done.stdout.lower():
        msg = f"chromium exited {done.returncode}: {done.stderr[-2000:]}"
        raise RuntimeError(msg)
    return Rendered(done.stdout, _CONSOLE.findall(done.stderr))
