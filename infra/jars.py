"""Resolve JVM artefacts from Maven Central with the poms kept in ``infra/maven``."""

from __future__ import annotations

import hashlib
import importlib.util
import subprocess
import tempfile
from pathlib import Path

from infra.config import StackConfig
from infra.errors import ResolveError
from infra.prereqs import require

POM_DIR = Path(__file__).resolve().parent / "maven"
UDF_SOURCES = Path(__file__).resolve().parent.parent / "pipelines" / "udf" / "src"
"""Java sources of the feature job's functions (the one-pass event parser)."""
UDF_JAR = "pricestream-udf.jar"
_JAVA_RELEASE = "11"  # the oldest JVM Flink 2.x runs on
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
    """Resolve every bundle and build the job's function jar; returns bundle -> jar directory."""
    out = {bundle: resolve(config, bundle) for bundle in BUNDLES}
    build_udf(config)
    return out


def pyflink_lib() -> Path:
    """The ``lib/`` of the installed PyFlink wheel: the Flink jars our functions compile against."""
    spec = importlib.util.find_spec("pyflink")
    if spec is None or spec.origin is None:
        msg = "PyFlink (apache-flink) is not installed; run `make setup`"
        raise ResolveError(msg)
    return Path(spec.origin).parent / "lib"


def build_udf(config: StackConfig) -> Path:
    """Compile ``pipelines/udf`` against PyFlink's own jars into one jar; rebuilt only when a source changes.

    javac, not Maven: the only dependencies are Flink's, and compiling against the jars the job runs
    on rules out a version mismatch.

    Raises:
        ResolveError: javac or jar failed (their output is in the message).
    """
    sources = sorted(UDF_SOURCES.rglob("*.java"))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()
    jar = config.jar_dir("flink") / UDF_JAR
    marker = jar.with_suffix(".sha256")
    if jar.exists() and marker.exists() and marker.read_text() == digest:
        return jar
    lib = pyflink_lib()
    classpath = ":".join(str(p) for p in sorted(lib.glob("flink-*.jar")))
    javac, jar_tool = require("javac", "a JDK 17 (javac)"), require("jar", "a JDK 17 (jar)")
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as classes:
        for argv in (
            [javac, "-nowarn", "--release", _JAVA_RELEASE, "-cp", classpath, "-d", classes, *map(str, sources)],
            [jar_tool, "cf", str(jar), "-C", classes, "."],
        ):
            done = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
            if done.returncode != 0:
                msg = f"{argv[0]} failed building {jar.name}: {(done.stdout + done.stderr)[-2000:]}"
                raise ResolveError(msg)
    marker.write_text(digest)
    return jar
