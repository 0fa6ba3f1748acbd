"""Resolve JVM artefacts from Maven Central with the poms kept in ``infra/maven``."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from infra.config import StackConfig
from infra.errors import ResolveError
from infra.prereqs import require

POM_DIR = Path(__file__).resolve().parent / "maven"
UDF_SOURCES = Path(__file__).resolve().parent.parent / "pipelines" / "udf" / "src"
"""Java sources of the feature job's functions (the one-pass event parser)."""
UDF_RESOURCES = UDF_SOURCES.parent / "resources"
"""Files packed as they are, if any (none today: the job has no SQL connector of its own)."""
UDF_JAR = "pricestream-udf.jar"
_JAVA_RELEASE = "11"  # the oldest JVM Flink 2.x runs on
BUNDLES: tuple[str, ...] = ("kafka", "flink", "redis")
_PACKED = "redis"
"""The bundle whose jars go inside the function jar (Jedis for the online-store sink): one jar on the job's path."""
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
    """Compile ``pipelines/udf`` (against PyFlink's jars and the Kafka connector) and Jedis into one jar.

    Rebuilt only when an input changes.

    javac, not Maven: the Flink jars are the ones the job runs on, which rules out a version
    mismatch. The Redis client's classes (bundle ``redis``) are packed into the jar, so the job has
    one jar of its own on ``pipeline.jars``.

    Raises:
        ResolveError: javac or jar failed (their output is in the message).
    """
    sources = sorted(UDF_SOURCES.rglob("*.java"))
    resources = sorted(p for p in UDF_RESOURCES.rglob("*") if p.is_file())
    packed = sorted(resolve(config, _PACKED).glob("*.jar"))
    digest = hashlib.sha256(b"".join([*(p.read_bytes() for p in sources + resources),
                                      *(p.name.encode() for p in packed)])).hexdigest()
    jar = config.jar_dir("flink") / UDF_JAR
    marker = jar.with_suffix(".sha256")
    if jar.exists() and marker.exists() and marker.read_text() == digest:
        return jar
    lib = pyflink_lib()
    # The Kafka connector is on the job's pipeline.jars beside this jar: compiled against, not packed.
    provided = [*sorted(lib.glob("flink-*.jar")), config.flink_kafka_connector_jar]
    classpath = ":".join(str(p) for p in [*provided, *packed])
    javac, jar_tool = require("javac", "a JDK 17 (javac)"), require("jar", "a JDK 17 (jar)")
    jar.parent.mkdir(parents=True, exist_ok=True)
    # Written beside the jar and renamed over it: a running job keeps reading the jar it opened.
    building = jar.with_name(f".{jar.name}.{os.getpid()}")
    with tempfile.TemporaryDirectory() as classes:
        for dependency in packed:
            _unpack(dependency, Path(classes))
        for resource in resources:
            target = Path(classes) / resource.relative_to(UDF_RESOURCES)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(resource, target)
        for argv in (
            [javac, "-nowarn", "--release", _JAVA_RELEASE, "-cp", classpath, "-d", classes, *map(str, sources)],
            [jar_tool, "cf", str(building), "-C", classes, "."],
        ):
            done = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
            if done.returncode != 0:
                msg = f"{argv[0]} failed building {jar.name}: {(done.stdout + done.stderr)[-2000:]}"
                raise ResolveError(msg)
    os.replace(building, jar)
    marker.write_text(digest)
    return jar


def _unpack(dependency: Path, into: Path) -> None:
    """A dependency's classes, without its signature, manifest, module descriptor or service entries."""
    with zipfile.ZipFile(dependency) as archive:
        for name in archive.namelist():
            if name.endswith("/") or name.startswith("META-INF/") or name.endswith("module-info.class"):
                continue
            target = into / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(name))
