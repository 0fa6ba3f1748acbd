"""Poison records never stop the job: a 2 MB record, one that is not UTF-8 and one that is not JSON, among 10,000.

The job runs unbounded; all three reach the DLQ with their headers (the 2 MB one cut to the
configured size, its original length in ``payload_bytes``), every valid event is counted in the
tiles, and the job is still running afterwards.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, date, datetime, timedelta

import confluent_kafka
import pytest

from events.config import KafkaConfig
from events.contract import DLQ_PAYLOAD_BYTES
from events.models import SearchEvent, ViewEvent, dumps
from infra.config import StackConfig
from pipelines.config import FeatureJobConfig
from pipelines.feature_job import run
from tests.integration.flink_helpers import make_topics, read_all, reflected_events

pytestmark = [pytest.mark.integration, pytest.mark.flink]

T0 = datetime(2026, 11, 2, tzinfo=UTC)
N_VALID = 10_000


def _valid(i: int) -> bytes:
    key = {"hotel_id": f"h{i % 5}", "room_type": "std", "stay_date": date(2026, 12, 1) + timedelta(days=i % 3)}
    at = T0 + timedelta(seconds=7 * i)
    event = ViewEvent(**key, event_time=at, price_shown=100.0 + i % 9) if i % 2 else SearchEvent(**key, event_time=at)
    return dumps(event)


def test_poison_records_go_to_the_dlq_and_the_job_goes_on(stack: StackConfig) -> None:
    kafka = KafkaConfig(bootstrap_servers=stack.kafka_bootstrap, topic_prefix=f"fp{uuid.uuid4().hex[:8]}-")
    make_topics(kafka, partitions=1)
    big = b'{"event_type": "search", "pad": "' + b"x" * 2_000_000 + b'"}'
    poison = {3_000: big, 6_000: b"\xff\xfe not utf-8 \xc3\x28", 9_000: b"this is not json"}
    # a third-party client: our SDK refuses all three before they are sent
    producer = confluent_kafka.Producer({"bootstrap.servers": stack.kafka_bootstrap, "compression.type": "lz4",
                                         "message.max.bytes": 4_000_000})
    for i in range(N_VALID):
        if i in poison:
            producer.produce(kafka.topic("behaviour.events"), poison[i], b"h0")
        producer.produce(kafka.topic("behaviour.events"), _valid(i), f"h{i % 5}".encode())
        producer.poll(0)
    assert producer.flush(60) == 0
    config = FeatureJobConfig(bootstrap_servers=stack.kafka_bootstrap, topic_prefix=kafka.topic_prefix,
                              connector_jar=stack.flink_kafka_connector_jar, startup="earliest-offset",
                              group_id=f"fp-{uuid.uuid4().hex[:6]}", checkpoint_interval_ms=1000)
    result = run(config, wait=False)
    client = result.get_job_client()
    assert client is not None
    try:
        deadline, dlq = time.monotonic() + 300, []
        while time.monotonic() < deadline and (len(dlq) < 3 or reflected_events(kafka) < N_VALID):
            time.sleep(3)
            dlq = read_all(kafka, "behaviour.events.dlq", idle_polls=2)
        time.sleep(3)  # the job keeps running after the poison
        status = client.get_job_status().result().name
    finally:
        client.cancel().result()
    assert status == "RUNNING"
    assert reflected_events(kafka) == N_VALID
    headers = [{k: v.decode() for k, v in m.headers()} for m in read_all(kafka, "behaviour.events.dlq")]
    assert sorted(h["error_class"] for h in headers) == ["MalformedRecord"] * 3
    by_size = sorted(headers, key=lambda h: int(h["payload_bytes"]))
    assert [h["payload_bytes"] for h in by_size[:2]] == sorted(str(len(poison[i])) for i in (6_000, 9_000))
    assert by_size[2]["payload_bytes"] == str(len(big))
    sizes = sorted(len(m.value()) for m in read_all(kafka, "behaviour.events.dlq"))
    assert sizes[-1] == DLQ_PAYLOAD_BYTES  # the 2 MB record, cut to the configured size
    assert all(h["source_topic"] == kafka.topic("behaviour.events") and h["error_message"] for h in headers)
