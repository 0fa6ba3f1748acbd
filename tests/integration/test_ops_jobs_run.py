"""Issue 31 item 9: a bounded ``jobs run features`` that completes exits 0, on the real Kafka and Redis."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from infra.config import StackConfig
from pricestream.supervision import executable

pytestmark = pytest.mark.integration


def _records(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{uuid.uuid4().hex}"})
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(hi - lo for lo, hi in (consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                                          for p in parts))
    finally:
        consumer.close()


def test_a_bounded_feature_job_that_completes_exits_0(stack: StackConfig, tmp_path: Path) -> None:
    prefix = f"t{uuid.uuid4().hex[:10]}."
    env = {**os.environ, "PRICESTREAM_KAFKA_BOOTSTRAP": stack.kafka_bootstrap, "PRICESTREAM_TOPIC_PREFIX": prefix,
           "PRICESTREAM_REDIS_URL": stack.redis_url, "PRICESTREAM_STATE_DIR": str(tmp_path / "state"),
           "PRICESTREAM_CACHE_DIR": str(stack.cache_dir)}
    produced = subprocess.run([executable(), "produce", "--hotels", "2", "--rate", "200", "--duration", "1"],
                              env=env, capture_output=True, text=True, timeout=120, check=False)
    assert produced.returncode == 0, produced.stderr[-2000:]
    done = subprocess.run([executable(), "jobs", "run", "features", "--bounded", "--startup", "earliest-offset",
                           "--fresh"], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert f"feature job finished: {prefix}behaviour.events -> {prefix}features.v1" in done.stdout
    assert _records(stack.kafka_bootstrap, f"{prefix}features.v1") > 0
