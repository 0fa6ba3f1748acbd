"""``pricestream jobs backfill features FILE``: a file in no event-time order, replayed bounded, loses nothing.

The file's 2,000 events span 10 days and are shuffled, so the live job's one day of lateness
would dead-letter a large share of them as late; the backfill's default lateness keeps every one.
Two malformed lines go to the backfill topic's DLQ with their field; every valid event is reflected
in its stay's final row, and each stay's ``searches_7d`` equals a count by hand of the documented
window (hourly tiles from ``floor(t, 1 h) - 7 d`` on, as of the stay's newest event).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from events.catalog import DAY_MS, HOUR_MS
from events.config import KafkaConfig
from events.models import SearchEvent, ViewEvent, dumps
from infra.config import StackConfig
from tests.integration.flink_helpers import make_topics, read_all

pytestmark = [pytest.mark.integration, pytest.mark.flink]

T0 = datetime(2026, 6, 1, tzinfo=UTC)
N = 2000


def _events() -> list[bytes]:
    rng = random.Random(5)
    out = []
    for i in range(N):
        key = {"hotel_id": f"h{i % 3}", "room_type": "std", "stay_date": date(2026, 7, 1) + timedelta(days=i % 4)}
        at = T0 + timedelta(seconds=rng.uniform(0, 10 * 86_400))
        event = SearchEvent(**key, event_time=at) if i % 2 else ViewEvent(**key, event_time=at, price_shown=90.0)
        out.append(dumps(event))
    rng.shuffle(out)
    return out


def test_a_shuffled_file_is_backfilled_with_every_event_and_the_bad_lines_in_the_dlq(
        stack: StackConfig, tmp_path: Path) -> None:
    kafka = KafkaConfig(bootstrap_servers=stack.kafka_bootstrap, topic_prefix=f"bf{uuid.uuid4().hex[:8]}-")
    make_topics(kafka)
    events = _events()
    lines = [*events[:700], b'{"event_type": "search", "hotel_id": 7}', *events[700:], b"not json at all"]
    history = tmp_path / "history.jsonl"
    history.write_bytes(b"\n".join(lines) + b"\n")
    env = {**os.environ, "PRICESTREAM_TOPIC_PREFIX": kafka.topic_prefix, "PRICESTREAM_STATE_DIR": str(tmp_path)}
    argv = [str(Path(sys.executable).with_name("pricestream")), "jobs", "backfill", "features", str(history)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert f"published {N + 2:,} records" in done.stderr

    source = next(line.split(" to ")[1].strip() for line in done.stderr.splitlines() if "published 2,002" in line)
    dlq = read_all(kafka, source.removeprefix(kafka.topic_prefix) + ".dlq", idle_polls=3)
    classes = sorted({k: v.decode() for k, v in m.headers()}["error_class"] for m in dlq)
    assert len(dlq) == 2 and "LateEvent" not in classes

    rows = [json.loads(m.value()) for m in read_all(kafka, "features.v1")]
    final: dict[tuple, dict] = {}
    for r in rows:
        if r["view"] == "stay_7d":
            stay = (r["hotel_id"], r["room_type"], r["stay_date"])
            if stay not in final or r["version"] > final[stay]["version"]:
                final[stay] = r
    by_stay: dict[tuple, list[dict]] = {}
    for raw in events:
        body = json.loads(raw)
        by_stay.setdefault((body["hotel_id"], body["room_type"], body["stay_date"]), []).append(body)
    assert sorted(final) == sorted(by_stay)
    for stay, bodies in by_stay.items():
        anchor = max(b["event_time"] for b in bodies)
        floor = anchor - anchor % HOUR_MS - 7 * DAY_MS
        searches = sum(1 for b in bodies
                       if b["event_type"] == "search" and b["event_time"] - b["event_time"] % HOUR_MS >= floor)
        assert final[stay]["feature_time"] == anchor
        assert final[stay]["features"]["searches_7d"] == searches
