"""The benchmark's in-process features equal the job's served values on the same simulated events.

A benchmark replay (``bench/stream_features.py``: :class:`StreamFeatures`, fed the records in order)
reads a key's features when a request for it comes, 1 ms before the request's view. Here the
same records of a simulated market (2 hotels, 4 days, every event type) stop at three such read
instants (views at 40%, 70% and the last); at each, the real feature job (PyFlink, its own Redis
sink) consumes every record up to the instant, and every key seen so far is read from Redis by the
scorer's reader with its clock at the instant (:class:`features.online_source.RedisFeatureSource`,
the views' TTLs applied as serving applies them). Each of the 26 features of every key must equal
the benchmark's read, and the batch driver's (:func:`features.replay.features_at`, the training
frames' and the skew command's): one implementation, three drivers, the job's values.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from events.catalog import ALL_FEATURES, DAY_MS
from events.config import KafkaConfig
from events.models import Record, dumps
from features.config import FeaturesConfig
from features.online_source import RedisFeatureSource
from features.replay import events_frame, features_at
from infra.config import StackConfig
from market import Market, MarketConfig, simulate
from pipelines.config import FeatureJobConfig, OnlineSink
from pipelines.feature_job import run
from tests.integration._features_helpers import drop_project_keys
from tests.integration.flink_helpers import make_topics, read_all

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from stream_features import StreamFeatures  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.flink]

START = datetime(2026, 11, 1, tzinfo=UTC)
Key = tuple[str, str, date]


def _records() -> list[Record]:
    market = Market(MarketConfig(hotels=2, seed=5, start=START))
    return [r for r in simulate(market, start=START, duration=timedelta(days=4), rng_seed=5) if hasattr(r, "stay_date")]


def _read_instants(records: list[Record]) -> list[datetime]:
    views = [r.event_time for r in records if r.event_type == "view"]
    return [views[int(len(views) * q)] - timedelta(milliseconds=1) for q in (0.4, 0.7)] + [views[-1]]


def _job_reads(stack: StackConfig, tmp: Path, records: list[Record], at: datetime, keys: list[Key]) -> pd.DataFrame:
    """The job's served features of ``keys`` at ``at``, after it consumed every record up to ``at``."""
    kafka = KafkaConfig(bootstrap_servers=stack.kafka_bootstrap, topic_prefix=f"bj{uuid.uuid4().hex[:8]}-")
    make_topics(kafka, partitions=2)
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for r in records:
        producer.produce(kafka.topic("behaviour.events"), dumps(r), r.hotel_id.encode())  # type: ignore[attr-defined]
        producer.poll(0)
    assert producer.flush(60) == 0
    fconfig = FeaturesConfig(project=f"bj{uuid.uuid4().hex[:8]}", state_dir=tmp, redis_url=stack.redis_url)
    config = FeatureJobConfig(bootstrap_servers=stack.kafka_bootstrap, topic_prefix=kafka.topic_prefix,
                              connector_jar=stack.flink_kafka_connector_jar, bounded=True, startup="earliest-offset",
                              allowed_lateness_ms=3 * DAY_MS, checkpoint_dir=tmp / f"chk-{kafka.topic_prefix}",
                              group_id=f"bj-{uuid.uuid4().hex[:6]}",
                              online=OnlineSink(redis_url=stack.redis_url, project=fconfig.project))
    source = RedisFeatureSource(fconfig, clock=lambda: at)
    try:
        run(config)
        assert read_all(kafka, "behaviour.events.dlq", idle_polls=3) == []
        reads = source.read_many(keys)
    finally:
        source.close()
        drop_project_keys(fconfig)
    return pd.DataFrame([r.values for r in reads], columns=list(ALL_FEATURES), dtype="float64")


def _bench_reads(records: list[Record], at: datetime) -> tuple[list[Key], pd.DataFrame]:
    feats = StreamFeatures()
    for record in records:
        feats.add(record)
    keys = sorted(feats.keys())
    values = [feats.read(*k, at=at).values for k in keys]
    return keys, pd.DataFrame(values, columns=list(ALL_FEATURES), dtype="float64")


def _differences(got: pd.DataFrame, want: pd.DataFrame, keys: list[Key]) -> list[tuple]:
    a, b = got.to_numpy(dtype=float), want.to_numpy(dtype=float)
    same = np.isclose(a, b, rtol=1e-9, atol=1e-9) | (np.isnan(a) & np.isnan(b))
    return [(keys[i], ALL_FEATURES[j], a[i, j], b[i, j]) for i, j in zip(*np.nonzero(~same), strict=True)]


@pytest.fixture(scope="module")
def records() -> Iterator[list[Record]]:
    yield _records()


@pytest.mark.parametrize("cut", [0, 1, 2])
def test_the_benchmarks_reads_equal_the_jobs_served_values(stack: StackConfig, tmp_path: Path,
                                                           records: list[Record], cut: int) -> None:
    at = _read_instants(records)[cut]
    upto = [r for r in records if r.event_time <= at]
    keys, bench = _bench_reads(upto, at)
    job = _job_reads(stack, tmp_path, upto, at, keys)
    points = pd.DataFrame([(h, r, d.isoformat(), pd.Timestamp(at)) for h, r, d in keys],
                          columns=["hotel_id", "room_type", "stay_date", "event_time"])
    batch = features_at(events_frame(upto), points)
    assert len(upto) > 2000 and len(keys) > 300 and bench.notna().sum().min() > 0  # every feature served to some key
    assert bench["searches_1h"].isna().sum() > 0 and bench["searches_1h"].notna().sum() > 0  # TTLs bite both ways
    assert _differences(job, bench, keys)[:5] == []
    assert _differences(batch, bench, keys)[:5] == []
