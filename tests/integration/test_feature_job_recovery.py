"""SIGKILL the feature job mid-stream and restart it with the plain documented command.

``pricestream jobs run features`` resumes from the latest retained checkpoint by default. The
job writes Redis itself, at-least-once, so the restart replays some rows; the compare-and-set on
the version makes the replay harmless. The values the job left in Redis must then equal those an
uninterrupted run leaves, for every key, with no event lost (counts exactly; means up to the
rounding of the window's running sums, which saw other intermediate tiles). The rows of
``features.v1`` replayed through the Python online writer serve the same values.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from events.admin import create_topics
from events.config import KafkaConfig
from events.models import (
    BookingEvent,
    CancellationEvent,
    CompetitorRateEvent,
    InventoryEvent,
    Record,
    SearchEvent,
    ViewEvent,
)
from events.topics import TopicSpec
from features.config import FeaturesConfig
from features.online_source import RedisFeatureSource
from features.online_writer import OnlineWriter
from features.rows import parse_row
from infra.config import StackConfig
from infra.processes import end_tree
from pipelines.config import FeatureJobConfig, OnlineSink
from pipelines.feature_job import latest_checkpoint, run
from tests.integration._features_helpers import drop_project_keys
from tests.integration.flink_helpers import feature_rows, make_topics, publish, reflected_events

pytestmark = [pytest.mark.integration, pytest.mark.flink]

T0 = datetime(2026, 10, 1, tzinfo=UTC)
N_EVENTS = 1600
HOTELS, ROOMS, STAYS = 3, ("std", "dlx"), 4


def _key(i: int) -> dict:
    stay = date(2026, 12, 1) + timedelta(i % STAYS)
    return {"hotel_id": f"h{i % HOTELS}", "room_type": ROOMS[i % 2], "stay_date": stay}


def _events(start: int, n: int) -> list[Record]:
    """Every event type, 97 s apart (1,600 events span 43 h: the 1 h, 24 h and 7 d windows all differ)."""
    out: list[Record] = []
    for i in range(start, start + n):
        key, at = _key(i), T0 + timedelta(seconds=97 * i)
        kind = i % 6
        if kind == 0:
            out.append(SearchEvent(**key, event_time=at, nights=1 + i % 3))
        elif kind == 1:
            out.append(ViewEvent(**key, event_time=at, price_shown=100.0 + i % 11))
        elif kind == 2:
            out.append(BookingEvent(**key, event_time=at, price_paid=90.0 + i % 7, rooms=1 + i % 2))
        elif kind == 3:
            out.append(CompetitorRateEvent(**key, event_time=at, competitor_id=f"c{i % 4}", rate=80.0 + i % 13))
        elif kind == 4:
            out.append(InventoryEvent(**key, event_time=at, rooms_left=i % 10, capacity=10))
        else:
            out.append(CancellationEvent(**key, event_time=at, booking_id=uuid.uuid4()))
    return out


def _start(env: dict[str, str], log: Path) -> subprocess.Popen:
    argv = [str(Path(sys.executable).with_name("pricestream")), "jobs", "run", "features"]
    return subprocess.Popen(argv, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True)


def _served(stack: StackConfig, tmp_path: Path, *, project: str | None = None, rows: list[dict] | None = None) -> dict:
    """Every key's values in Redis: as the job wrote them under ``project``, or ``rows`` through the Python writer."""
    config = FeaturesConfig(project=project or f"fr{uuid.uuid4().hex[:8]}", state_dir=tmp_path,
                            redis_url=stack.redis_url)
    try:
        if rows is not None:
            OnlineWriter(config).write_rows([parse_row(r) for r in rows])
        keys = sorted({tuple(_key(i).values()) for i in range(N_EVENTS)})
        as_of = T0 + timedelta(seconds=97 * N_EVENTS + 60)  # just after the last event: inside every TTL
        reads = RedisFeatureSource(config, clock=lambda: as_of).read_many(keys)
        return {k: (r.values, r.event_time) for k, r in zip(keys, reads, strict=True)}
    finally:
        drop_project_keys(config)


def test_kill_and_plain_restart_serve_the_values_of_an_uninterrupted_run(stack: StackConfig, tmp_path: Path) -> None:
    kafka = KafkaConfig(bootstrap_servers=stack.kafka_bootstrap, topic_prefix=f"fr{uuid.uuid4().hex[:8]}-")
    make_topics(kafka, partitions=2)
    create_topics(kafka, [TopicSpec(name="features.reference", partitions=1)])
    first, second = _events(0, N_EVENTS // 2), _events(N_EVENTS // 2, N_EVENTS // 2)
    publish(kafka, first)
    project = f"fr{uuid.uuid4().hex[:8]}"  # where the deployed job writes Redis
    env = {**os.environ, "PRICESTREAM_TOPIC_PREFIX": kafka.topic_prefix, "PRICESTREAM_STATE_DIR": str(tmp_path),
           "PRICESTREAM_JOB_STARTUP": "earliest-offset", "PRICESTREAM_FEAST_PROJECT": project}
    log = tmp_path / "job.log"
    job = _start(env, log)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and reflected_events(kafka) == 0:
            assert job.poll() is None, log.read_text()[-3000:]
            time.sleep(2)
        # more data arrives while the job runs, 50 events every 1.5 s (longer than a checkpoint interval) ...
        trickle = threading.Thread(target=lambda: [(publish(kafka, second[i:i + 50]), time.sleep(1.5))
                                                   for i in range(0, len(second), 50)])
        trickle.start()
        deadline = time.monotonic() + 120
        checkpoints = tmp_path / "flink" / "feature-job-checkpoints" / f"{kafka.topic_prefix}features"
        while time.monotonic() < deadline and latest_checkpoint(checkpoints) is None:
            time.sleep(0.2)
        time.sleep(1)
    finally:
        end_tree(job, sig=signal.SIGKILL)  # ... and the job dies mid-stream: python and its JVM, no clean shutdown
    assert trickle.is_alive(), "every event was published before the kill: not mid-stream"
    trickle.join()
    assert latest_checkpoint(checkpoints) is not None, "no completed checkpoint before the kill"
    assert reflected_events(kafka) < N_EVENTS

    restarted = _start(env, log)  # the same command, nothing added
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and reflected_events(kafka) < N_EVENTS:
            assert restarted.poll() is None, log.read_text()[-3000:]
            time.sleep(3)
        time.sleep(3)  # a replayed row would show up now
        rows = feature_rows(kafka)
        restarted.send_signal(signal.SIGTERM)  # the documented stop: a savepoint, then exit
        restarted.wait(180)
    finally:
        end_tree(restarted, sig=signal.SIGKILL)
    assert "restoring from" in log.read_text()
    assert "stopped with a savepoint at" in log.read_text() and restarted.returncode == 0
    newest = latest_checkpoint(checkpoints)
    assert newest is not None and newest.parent.name == "savepoints"  # where the next run resumes from
    assert reflected_events(kafka) == N_EVENTS  # 0 lost

    reference = FeatureJobConfig(
        bootstrap_servers=stack.kafka_bootstrap, topic_prefix=kafka.topic_prefix, sink_topic="features.reference",
        connector_jar=stack.flink_kafka_connector_jar, startup="earliest-offset", bounded=True,
        checkpoint_dir=tmp_path / "reference-checkpoints", group_id=f"ref-{uuid.uuid4().hex[:8]}",
        online=OnlineSink(redis_url=stack.redis_url, project=f"{project}ref"),
    )
    run(reference)
    assert reflected_events(kafka, "features.reference") == N_EVENTS
    got, want = _served(stack, tmp_path, project=project), _served(stack, tmp_path, project=f"{project}ref")
    assert _differences(_served(stack, tmp_path, rows=rows), want) == []  # features.v1 carries the same values
    assert len(want) == 12 and all(v[0]["searches_7d"] is not None for v in want.values())
    assert {k: v[1] for k, v in got.items()} == {k: v[1] for k, v in want.items()}  # the same anchors
    assert _differences(got, want) == []


def _differences(got: dict, want: dict) -> list:
    """Features that differ: counts exactly, other values beyond float rounding of the window's running sums."""
    out = []
    for key, (values, _) in want.items():
        for name, value in values.items():
            have = got[key][0][name]
            far = value is not None and have is not None and abs(have - value) > 1e-9 * max(1, abs(value))
            if (have is None) != (value is None) or far:
                out.append((key, name, have, value))
    return out
