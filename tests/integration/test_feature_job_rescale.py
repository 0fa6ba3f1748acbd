"""Rescale the feature job 1 -> 2 -> 1 mid-stream the way an operator does, and lose nothing.

Each step is the documented stop (SIGTERM: a savepoint, then exit 0) and the plain restart with a
new ``--parallelism`` (it resumes from the newest savepoint by default). The tile operator's keyed
state is redistributed with its key groups; the values the job leaves in Redis must then equal those
of an uninterrupted run at parallelism 1 over the same events, for every key, with every event
reflected.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from events.admin import create_topics
from events.config import KafkaConfig
from events.topics import TopicSpec
from infra.config import StackConfig
from infra.processes import end_tree
from pipelines.config import FeatureJobConfig, OnlineSink
from pipelines.feature_job import latest_checkpoint, run
from tests.integration.flink_helpers import make_topics, publish, reflected_events
from tests.integration.test_feature_job_recovery import N_EVENTS, _differences, _events, _served

pytestmark = [pytest.mark.integration, pytest.mark.flink]


def _start(env: dict[str, str], log: Path, parallelism: int) -> subprocess.Popen:
    argv = [str(Path(sys.executable).with_name("pricestream")), "jobs", "run", "features",
            "--parallelism", str(parallelism)]
    return subprocess.Popen(argv, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True)


def _step(env: dict[str, str], log: Path, kafka: KafkaConfig, parallelism: int, reach: int) -> None:
    """Run at ``parallelism`` until ``reach`` events are reflected, then stop with a savepoint."""
    job = _start(env, log, parallelism)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and reflected_events(kafka) < reach:
            assert job.poll() is None, log.read_text()[-3000:]
            time.sleep(2)
        job.send_signal(signal.SIGTERM)
        job.wait(180)
    finally:
        end_tree(job, sig=signal.SIGKILL)
    assert job.returncode == 0, log.read_text()[-3000:]


def test_rescale_one_two_one_serves_the_values_of_an_uninterrupted_run(stack: StackConfig, tmp_path: Path) -> None:
    kafka = KafkaConfig(bootstrap_servers=stack.kafka_bootstrap, topic_prefix=f"rs{uuid.uuid4().hex[:8]}-")
    make_topics(kafka, partitions=4)
    create_topics(kafka, [TopicSpec(name="features.reference", partitions=1)])
    events = _events(0, N_EVENTS)
    thirds = [events[: N_EVENTS // 3], events[N_EVENTS // 3: 2 * N_EVENTS // 3], events[2 * N_EVENTS // 3:]]
    project = f"rs{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "PRICESTREAM_TOPIC_PREFIX": kafka.topic_prefix, "PRICESTREAM_STATE_DIR": str(tmp_path),
           "PRICESTREAM_JOB_STARTUP": "earliest-offset", "PRICESTREAM_FEAST_PROJECT": project}
    log = tmp_path / "job.log"
    published = 0
    for part, parallelism in zip(thirds, (1, 2, 1), strict=True):
        publish(kafka, part)
        published += len(part)
        _step(env, log, kafka, parallelism, published)
    text = log.read_text()
    assert text.count("stopped with a savepoint at") == 3 and text.count("restoring from") >= 2, text[-3000:]
    newest = latest_checkpoint(tmp_path / "flink" / "feature-job-checkpoints" / f"{kafka.topic_prefix}features")
    assert newest is not None and newest.parent.name == "savepoints"
    assert reflected_events(kafka) == N_EVENTS  # 0 lost

    reference = FeatureJobConfig(
        bootstrap_servers=stack.kafka_bootstrap, topic_prefix=kafka.topic_prefix, sink_topic="features.reference",
        connector_jar=stack.flink_kafka_connector_jar, startup="earliest-offset", bounded=True,
        checkpoint_dir=tmp_path / "reference-checkpoints", group_id=f"ref-{uuid.uuid4().hex[:8]}",
        online=OnlineSink(redis_url=stack.redis_url, project=f"{project}ref"),
    )
    run(reference)
    got, want = _served(stack, tmp_path, project=project), _served(stack, tmp_path, project=f"{project}ref")
    assert len(want) == 12 and all(v[0]["searches_7d"] is not None for v in want.values())
    assert {k: v[1] for k, v in got.items()} == {k: v[1] for k, v in want.items()}  # the same anchors
    assert _differences(got, want) == []
