"""Kill the feature job mid-stream and restore it from its last checkpoint.

``features.v1`` read with read_committed must then hold every version exactly
once per key: no duplicate from the replay, no gap from the crash.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from events.config import KafkaConfig
from events.models import SearchEvent, ViewEvent
from infra.config import StackConfig
from infra.processes import end_tree
from pipelines.config import FeatureJobConfig
from tests.integration.flink_helpers import feature_rows, make_topics, publish

pytestmark = [pytest.mark.integration, pytest.mark.flink]

T0 = datetime(2026, 10, 1, tzinfo=UTC)
STAY_VIEWS = ("stay_1h", "stay_24h", "stay_7d", "stay_14d")


def _events(start: int, n: int) -> list:
    out = []
    for i in range(start, start + n):
        key = {"hotel_id": f"h{i % 3}", "room_type": "std", "stay_date": date(2026, 12, 1) + timedelta(days=i % 4)}
        at = T0 + timedelta(seconds=30 * i)
        view = ViewEvent(**key, event_time=at, price_shown=100.0 + i % 7)
        out.append(view if i % 2 else SearchEvent(**key, event_time=at))
    return out


def _latest_checkpoint(root: Path) -> Path | None:
    found = sorted(root.glob("*/chk-*/_metadata"), key=lambda p: int(p.parent.name.split("-")[1]))
    return found[-1].parent if found else None


def _start(config: FeatureJobConfig, log: Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "pipelines.feature_job", "--config-json", config.model_dump_json()]
    return subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)


def test_kill_and_restore_gives_no_duplicate_and_no_missing_version(stack: StackConfig, tmp_path: Path) -> None:
    kafka = KafkaConfig(bootstrap_servers=stack.kafka_bootstrap, topic_prefix=f"fr{uuid.uuid4().hex[:8]}-")
    make_topics(kafka, partitions=1)
    # a last event a day later moves the watermark past event 799, so all of its rows are due
    sentinel = SearchEvent(
        hotel_id="h9", room_type="std", stay_date=date(2026, 12, 9), event_time=T0 + timedelta(days=1)
    )
    first, second = _events(0, 400), [*_events(400, 400), sentinel]
    publish(kafka, first)
    config = FeatureJobConfig(
        bootstrap_servers=stack.kafka_bootstrap, topic_prefix=kafka.topic_prefix,
        connector_jar=stack.flink_kafka_connector_jar, startup="earliest-offset", checkpoint_interval_ms=1000,
        checkpoint_dir=tmp_path / "checkpoints", out_of_orderness_ms=0, watermark_emit="on-event",
        group_id=f"g-{uuid.uuid4().hex[:8]}", transactional_id_prefix=f"tx-{uuid.uuid4().hex[:8]}",
    )
    job = _start(config, tmp_path / "job1.log")
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not feature_rows(kafka):
            assert job.poll() is None, (tmp_path / "job1.log").read_text()[-3000:]
            time.sleep(2)
        assert feature_rows(kafka), "the job wrote nothing before the deadline"
        publish(kafka, second)  # more data arrives while the job runs ...
        time.sleep(3)
    finally:
        end_tree(job, sig=signal.SIGKILL)  # ... and the job dies mid-stream: python and its JVM, no clean shutdown
    checkpoint = _latest_checkpoint(tmp_path / "checkpoints")
    assert checkpoint is not None, "no completed checkpoint before the kill"

    # Restart from the checkpoint as a deployment would (unbounded: the restored splits keep
    # their own stopping offsets) and let it catch up until every event has its rows.
    restored = _start(config.model_copy(update={"restore_from": checkpoint}), tmp_path / "job2.log")
    try:
        deadline, rows = time.monotonic() + 600, []
        while time.monotonic() < deadline:
            assert restored.poll() is None, (tmp_path / "job2.log").read_text()[-3000:]
            rows = feature_rows(kafka)
            if len({(r["view"], r["version"]) for r in rows if r["hotel_id"] != "h9"}) >= 5 * 800:
                break
            time.sleep(3)
        time.sleep(5)  # a little longer: a replayed duplicate would show up now
        rows = feature_rows(kafka)
    finally:
        end_tree(restored, sig=signal.SIGKILL)

    keys = ((r["view"], r["hotel_id"], r["room_type"], r["stay_date"], r["version"]) for r in rows)
    versions = Counter(k for k in keys if k[1] != "h9")
    duplicates = [k for k, n in versions.items() if n > 1]
    assert duplicates == []
    # every one of the 800 events (offsets 0..799) yields exactly one row in each stay view
    expected = {int((T0 + timedelta(seconds=30 * i)).timestamp() * 1000) * 1_000_000 + i for i in range(800)}
    for view in STAY_VIEWS:
        got = {k[4] for k in versions if k[0] == view}
        assert got == expected, f"{view}: missing {sorted(expected - got)[:5]}, extra {sorted(got - expected)[:5]}"
