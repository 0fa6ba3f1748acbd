"""The feature job's parser has two paths, and they must agree on every record.

``ParseEvent.java`` reads a plain record with a streaming scan into an array of top-level values
(the fast path) and falls back to Jackson's tree (which words every error) for anything it does not
take as plainly valid. Here both run on the same records, in a JVM against the job's own jar: the
events of the contract's generator, each with one defect, the issue's hostile shapes (nested values,
duplicate and unknown fields, big, non-finite and fractional numbers, escapes, trailing text) and
real simulator events. Every row must be equal, field for field.
"""

from __future__ import annotations

import base64
import json
import random
import re
import subprocess
from pathlib import Path

import pytest

from events.contract import encoded_job_spec
from infra.config import StackConfig
from infra.jars import build_udf, pyflink_lib
from tests.strategies import draw_examples, encode, invalid_event, valid_event

pytestmark = [pytest.mark.integration]

HARNESS = Path(__file__).resolve().parent.parent / "java" / "ParseCheck.java"


def _defects(event: dict, rnd: random.Random) -> list[bytes]:
    """Shapes the fast path must hand to the tree path, and some it must take as they are."""
    name = rnd.choice(sorted(event))
    base = json.dumps(event)
    out = []
    for value in (None, {"a": 1}, [1, 2], True, 10**30, 1.5, -1, 0, 10**12, "x", "é", float(rnd.randrange(10**5))):
        out.append(json.dumps({**event, name: value}, ensure_ascii=rnd.random() < 0.5).encode())
    out.append((base[:-1] + f', "{name}": {json.dumps(event[name])}}}').encode())  # a duplicate key
    out.append((base[:-1] + ', "unknown_field": 1}').encode())
    out.append((base + " x").encode())  # trailing text
    out.append(base.replace(": 1", ": NaN", 1).encode())
    escaped = "\\u" + f"{ord(name[0]):04x}" + name[1:]  # the field's name with its first letter escaped
    out.append(base.replace(f'"{name}"', f'"{escaped}"').encode())
    out.append(repr(event).encode())  # Python's repr: not JSON
    return out


def _corpus() -> list[bytes]:
    rnd = random.Random(13)
    valid = draw_examples(valid_event(), 400)
    payloads = [encode(e) for e in valid]
    payloads += [encode(e) for e, _ in draw_examples(invalid_event(), 400)]
    for event in rnd.sample(valid, 60):
        payloads += _defects(event, rnd)
    return payloads


def test_the_fast_path_and_the_tree_path_give_the_same_row_for_every_record(tmp_path: Path) -> None:
    jar = build_udf(StackConfig())
    classpath = ":".join(str(p) for p in [jar, *sorted(pyflink_lib().glob("flink-*.jar"))])
    classes = tmp_path / "classes"
    subprocess.run(["javac", "-nowarn", "--release", "17", "-cp", classpath, "-d", str(classes), str(HARNESS)],
                   check=True, capture_output=True, text=True)
    payloads = _corpus()
    (tmp_path / "spec.txt").write_text(encoded_job_spec())
    (tmp_path / "corpus.txt").write_text("".join(base64.b64encode(p).decode() + "\n" for p in payloads))
    done = subprocess.run(["java", "-cp", f"{classes}:{classpath}", "io.pricestream.flink.ParseCheck",
                           str(tmp_path / "spec.txt"), str(tmp_path / "corpus.txt")],
                          check=True, capture_output=True, text=True, timeout=300)
    last = done.stdout.strip().splitlines()[-1]
    got = re.fullmatch(r"payloads (\d+) valid (\d+) mismatches (\d+)", last)
    assert got, done.stdout[-2000:]
    total, valid, mismatches = map(int, got.groups())
    assert total == len(payloads)
    assert 400 <= valid < total  # the generator's valid events pass and the defects do not
    assert mismatches == 0, done.stdout[-4000:]
