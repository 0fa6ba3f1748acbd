"""Check for the programs the local stack needs, with one clear message each."""

from __future__ import annotations

import shutil
from pathlib import Path

from infra.errors import PrerequisiteMissing


def require(program: str, install_hint: str) -> str:
    """Absolute path of ``program`` on PATH.

    Raises:
        PrerequisiteMissing: naming the program and how to install it.

    Example:
        >>> require("sh", "a POSIX shell").endswith("sh")
        True
    """
    found = shutil.which(program)
    if found is None:
        msg = f"{program!r} is not installed or not on PATH; install {install_hint}"
        raise PrerequisiteMissing(msg)
    return found


def java(java_home: Path | None) -> str:
    """The java binary (JAVA_HOME from config first, else PATH); Java 17+ is needed by Kafka 4."""
    if java_home is not None:
        candidate = java_home / "bin" / "java"
        if candidate.exists():
            return str(candidate)
    return require("java", "a Java 17 runtime (apt-get install openjdk-17-jre-headless)")
