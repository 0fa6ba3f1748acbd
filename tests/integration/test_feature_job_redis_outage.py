"""Redis dies under the running feature job (SIGKILL) and comes back: the job's own sink loses nothing.

The sink holds its rows and retries (backpressure: the job slows, nothing is dropped) until Redis
answers again, reloads its script there, and writes on. Redis keeps its data across the kill with an
append-only file fsynced on every write (the operator's durability setting; without it a killed
Redis restarts empty whatever the writer does). The values in Redis must then equal those of an
uninterrupted run, for every key, and the job must still be running.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
import redis

from events.admin import create_topics
from events.config import KafkaConfig
from events.topics import TopicSpec
from infra.config import StackConfig
from pipelines.config import FeatureJobConfig, OnlineSink
from pipelines.feature_job import run, run_until_stopped
from tests.integration.flink_helpers import make_topics, publish, reflected_events
from tests.integration.test_feature_job_recovery import N_EVENTS, _differences, _events, _served

pytestmark = [pytest.mark.integration, pytest.mark.flink]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _redis(port: int, workdir: Path) -> subprocess.Popen:
    binary = shutil.which("redis-server") or "redis-server"
    proc = subprocess.Popen([binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--dir", str(workdir),
                             "--appendonly", "yes", "--appendfsync", "always"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if redis.Redis(port=port, socket_timeout=1).ping():
                return proc
        except redis.RedisError:
            time.sleep(0.1)
    msg = f"redis-server on {port} did not answer"
    raise AssertionError(msg)


def test_redis_killed_and_restarted_under_the_job_loses_no_value(stack: StackConfig, tmp_path: Path) -> None:
    kafka = KafkaConfig(bootstrap_servers=stack.kafka_bootstrap, topic_prefix=f"ro{uuid.uuid4().hex[:8]}-")
    make_topics(kafka, partitions=2)
    create_topics(kafka, [TopicSpec(name="features.reference", partitions=1)])
    port, workdir = _free_port(), tmp_path / "redis"
    workdir.mkdir()
    server = _redis(port, workdir)
    url, project = f"redis://127.0.0.1:{port}/0", f"ro{uuid.uuid4().hex[:8]}"
    config = FeatureJobConfig(
        bootstrap_servers=stack.kafka_bootstrap, topic_prefix=kafka.topic_prefix,
        connector_jar=stack.flink_kafka_connector_jar, startup="earliest-offset",
        checkpoint_dir=tmp_path / "checkpoints", group_id=f"ro-{uuid.uuid4().hex[:8]}",
        online=OnlineSink(redis_url=url, project=project, timeout_ms=1_000, retry_ms=300_000),
    )
    events = _events(0, N_EVENTS)
    publish(kafka, events[: N_EVENTS // 2])
    stop, failure = threading.Event(), []

    def job() -> None:
        try:
            run_until_stopped(config, stop)
        except Exception as exc:  # noqa: BLE001 - the test asserts there was none
            failure.append(exc)

    runner = threading.Thread(target=job, daemon=True)
    runner.start()
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and reflected_events(kafka) < N_EVENTS // 2:
            assert not failure, failure
            time.sleep(2)
        server.send_signal(signal.SIGKILL)
        server.wait(30)
        publish(kafka, events[N_EVENTS // 2:])  # rows for these wait in the sink while Redis is gone
        time.sleep(8)
        assert not failure and runner.is_alive()
        server = _redis(port, workdir)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and reflected_events(kafka) < N_EVENTS:
            assert not failure, failure
            time.sleep(2)
        time.sleep(3)  # the sink's last rows (50 ms flush)
        assert runner.is_alive() and not failure  # the job rode out the outage
    finally:
        stop.set()
        runner.join(240)
        reference = FeatureJobConfig(
            bootstrap_servers=stack.kafka_bootstrap, topic_prefix=kafka.topic_prefix, sink_topic="features.reference",
            connector_jar=stack.flink_kafka_connector_jar, startup="earliest-offset", bounded=True,
            checkpoint_dir=tmp_path / "reference-checkpoints", group_id=f"ref-{uuid.uuid4().hex[:8]}",
            online=OnlineSink(redis_url=url, project=f"{project}ref"),
        )
    assert reflected_events(kafka) == N_EVENTS
    try:
        run(reference)
        private = StackConfig(redis_port=port)
        got, want = _served(private, tmp_path, project=project), _served(private, tmp_path, project=f"{project}ref")
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait(30)
    assert len(want) == 12 and all(v[0]["searches_7d"] is not None for v in want.values())
    assert _differences(got, want) == []
