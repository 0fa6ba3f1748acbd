"""Resolve JVM artefacts from Maven Central with the poms kept in ``infra/maven``."""

from __future__ import annotations

import subprocess
from pathlib import Path

from infra.config import StackConfig
from infra.errors import ResolveError
from infra.prereqs import require

POM_DIR = Path(__file__).resolve().parent / "maven"
BUNDLES: tuple[str, ...] = ("kafka", "flink")
_DONE = ".resolved"


def resolve(config: StackConfig, bundle: str) -> Path:
    """Copy ``bundle``'s jars into the cache once; later calls return at once.

    Raises:
        ResolveError: Maven failed (its output tail is in the message).
    """
    out = config.jar_dir(bundle)
    pom = POM_DIR / bundle / "pom.xml"
    marker = out / _DONE
    if marker.exists() and marker.read_text() == pom.read_text():
        return out
    mvn = require(config.mvn, "Maven (apt-get install maven)")
    out.mkdir(parents=True, exist_ok=True)
    argv = [
        mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
        f"-DoutputDirectory={out}", "-DincludeScope=runtime",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode != 0:
        msg = f"mvn could not resolve {pom}: {(done.stdout + done.stderr)[-2000:]}"
        raise ResolveError(msg)
    marker.write_text(pom.read_text())
    return out


def resolve_all(config: StackConfig) -> dict[str, Path]:
    """Resolve every bundle; returns bundle -> jar directory."""
    return {bundle: resolve(config, bundle) for bundle in BUNDLES}
