"""The feature job's specs, written by Python and read by the job's typed Java readers, must agree.

``pipelines.job_specs`` serialises typed models (``pipelines.spec_models``); the JVM reads each spec
once through its typed reader (``SinkSpec.java``, ``SourceSpec.java``, ``TileSpec.java``,
``RedisSinkSpec.java``), as it reads the contract spec of ``events.contract.job_spec``
(``ContractRules.java``). Here the specs of a default and of a secure, non-default config are read in
a JVM against the job's own jar (``tests/java/JobSpecCheck.java`` writes the typed fields back as
JSON), and every value must come back as Python wrote it; a field removed, renamed or mistyped must
be refused with a message naming the spec and the field.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from events.contract import job_spec
from infra.config import StackConfig
from infra.jars import build_udf, pyflink_lib
from pipelines.config import FeatureJobConfig, OnlineSink
from pipelines.job_specs import redis_sink_spec, sink_spec, source_spec, tile_spec

pytestmark = [pytest.mark.integration]

HARNESS = Path(__file__).resolve().parent.parent / "java" / "JobSpecCheck.java"

SPECS: dict[str, tuple[Callable[[FeatureJobConfig], str], str]] = {
    "sink": (sink_spec, "sink spec"),
    "source": (source_spec, "source spec"),
    "tile": (tile_spec, "tile spec"),
    "redis": (redis_sink_spec, "redis sink spec"),
    "contract": (lambda _: json.dumps(job_spec()), "contract spec"),
}
"""Harness kind -> the Python that writes the spec, and the name the Java reader gives it in errors."""


def _configs() -> dict[str, FeatureJobConfig]:
    default = FeatureJobConfig(connector_jar=Path("/x.jar"),
                               online=OnlineSink(redis_url="redis://127.0.0.1:6379/0", project="demo"))
    secure = FeatureJobConfig(
        connector_jar=Path("/x.jar"), topic_prefix="h3.", accepted_topic=None,
        kafka_properties={"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"},
        startup="latest-offset", bounded=True, watermark_emit="on-event", delivery="at-least-once",
        allowed_lateness_ms=3_600_000, flush_ms=500,
        online=OnlineSink(redis_url="redis+cluster://10.0.0.1:7000,10.0.0.2:7001", project="p2",
                          username="writer", password="s3cret", batch_rows=10, retry_ms=0))
    return {"default": default, "secure": secure}


@pytest.fixture(scope="module")
def run_java(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, list[str]], list[str]]:
    """Compiles the harness against the job's jar; returns a function: (kind, spec texts) -> output lines."""
    tmp = tmp_path_factory.mktemp("job_specs")
    jar = build_udf(StackConfig())
    classpath = ":".join(str(p) for p in [jar, *sorted(pyflink_lib().glob("flink-*.jar"))])
    classes = tmp / "classes"
    subprocess.run(["javac", "-nowarn", "--release", "17", "-cp", classpath, "-d", str(classes), str(HARNESS)],
                   check=True, capture_output=True, text=True)

    def run(kind: str, texts: list[str]) -> list[str]:
        files = []
        for i, text in enumerate(texts):
            path = tmp / f"{kind}-{len(list(tmp.iterdir()))}-{i}.json"
            path.write_text(text)
            files.append(str(path))
        done = subprocess.run(["java", "-cp", f"{classes}:{classpath}", "io.pricestream.flink.JobSpecCheck",
                               kind, *files], check=True, capture_output=True, text=True, timeout=120)
        lines = done.stdout.splitlines()
        assert len(lines) == len(texts), done.stdout[-2000:] + done.stderr[-2000:]
        return lines

    return run


def _tile_as_read(spec: dict) -> dict:
    """The tile spec as the Java reader holds it: each feature by its partials, each group's feature count."""
    def feature(f: dict, partials: list[str]) -> dict:
        named = {kind: f"{kind}:{f['column']}" for kind in ("sum", "n", "sq")}
        return {"name": f["name"], "agg": f["agg"],
                **{kind: name if name in partials else None for kind, name in named.items()}}

    groups = []
    for g in spec["groups"]:
        views = [{**{k: v[k] for k in ("name", "tile_ms", "window_ms", "rates", "partials")},
                  "features": [feature(f, v["partials"]) for f in v["features"]]} for v in g["views"]]
        groups.append({"name": g["name"], "keys": g["keys"], "views": views,
                       "feature_count": sum(len(v["features"]) for v in g["views"])})
    return {**{k: spec[k] for k in ("columns", "flush_ms", "backlog_flush_ms", "backlog_lag_ms", "horizon_ms")},
            "groups": groups}


def _contract_as_read(spec: dict) -> dict:
    """The contract spec as the Java reader compiles it (bounds, each type's rules), and the two flags it raises."""
    def rule(r: dict) -> dict:
        return {"name": r["name"], "kind": r["kind"], "required": r.get("required", False),
                "nullable": r.get("nullable", False), "min_length": r.get("minLength", -1),
                "max_length": r.get("maxLength", -1), "minimum": r.get("minimum"), "maximum": r.get("maximum")}

    return {**{k: spec[k] for k in ("max_record_bytes", "dlq_payload_bytes", "event_time_ms", "default_zone",
                                    "default_price_range")},
            "types": {name: [rule(r) for r in rules] for name, rules in sorted(spec["types"].items())},
            "complimentary": "complimentary", "outlier": "price_outlier"}


_AS_READ: dict[str, Callable[[dict], dict]] = {"tile": _tile_as_read, "contract": _contract_as_read}


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_every_spec_reads_back_as_python_wrote_it(run_java: Callable, kind: str) -> None:
    write, _ = SPECS[kind]
    texts = [write(config) for config in _configs().values()]
    for text, line in zip(texts, run_java(kind, texts), strict=True):
        assert line.startswith("OK "), line
        expected = json.loads(text)
        assert json.loads(line[3:]) == _AS_READ.get(kind, lambda spec: spec)(expected)


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_a_missing_or_renamed_field_is_refused_naming_the_spec_and_the_field(run_java: Callable, kind: str) -> None:
    write, name = SPECS[kind]
    spec = json.loads(write(_configs()["secure"]))
    variants = []
    for field in (f for f in spec if f != "schema_version"):  # the parser checks events, not the spec's version
        renamed = {(f"{k}_renamed" if k == field else k): v for k, v in spec.items()}
        variants.append((f"{name}: field {field}: got nothing (the field is missing)", renamed))
    for line, (expected, _) in zip(run_java(kind, [json.dumps(v) for _, v in variants]), variants, strict=True):
        assert line.startswith(f"ERROR {expected}, expected "), (expected, line)


def test_a_mistyped_or_nested_field_is_refused_naming_its_path(run_java: Callable) -> None:
    config = _configs()["default"]
    sink = json.loads(sink_spec(config))
    sink["features"]["topic"] = 7
    redis = json.loads(redis_sink_spec(config))
    redis["port"] = "6379"
    tile = json.loads(tile_spec(config))
    del tile["groups"][1]["views"][0]["window_ms"]
    assert run_java("sink", [json.dumps(sink)]) == ["ERROR sink spec: field features.topic: got 7, expected text"]
    assert run_java("redis", [json.dumps(redis)]) == [
        'ERROR redis sink spec: field port: got "6379", expected a 32-bit integer']
    assert run_java("tile", [json.dumps(tile)]) == [
        "ERROR tile spec: field groups[1].views[0].window_ms: got nothing (the field is missing), expected an integer"]
