"""Druid on real services: Kafka supervisor ingestion, analyst SQL on Druid vs DuckDB, backfill.

Starts its own Druid (assembled from Maven Central into the stack's cache) on test ports in a
temporary state dir, ingests once per module from uuid-named topics on the secure stack's Kafka
(``secure_stack``: SASL/SCRAM and ACLs), and checks the results against figures computed here from
the rows produced. The test records are written as the admin; the supervisors are submitted by
``pricestream druid ingest``, so Druid's Kafka consumers log in as the ``druid`` principal, whose
ACLs allow reading ``features.v1`` and ``behaviour.events`` only.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from events.catalog import VIEWS
from events.config import KafkaConfig
from events.models import BookingEvent, SearchEvent, ViewEvent, dumps
from features.analytics import QueryFailed, query
from features.backfill import Entity, backfill, offline_rows
from infra import druid_stack
from infra.config import StackConfig
from infra.druid.config import DruidPorts, DruidSettings
from infra.druid.supervisors import terminate_supervisor
from pricestream.deployment import settings_env
from pricestream.settings import Settings
from pricestream.supervision import executable

pytestmark = [pytest.mark.integration, pytest.mark.druid]

T0 = datetime(2026, 3, 1, tzinfo=UTC)
HOTELS = ("h1", "h2", "h3", "h4")
ROOMS = ("std", "dlx")
STAYS = ("2026-03-20", "2026-04-02")
STEP = timedelta(minutes=30)
STEPS = 96  # two days of feature rows per key
# Ports of the test Druid: Druid's defaults + 10100, clear of a dev Druid on the defaults.
TEST_PORTS = DruidPorts(
    zookeeper=12281, derby=11627, coordinator=18181, broker=18182, historical=18183, indexer=18191, router=18988
)
_INGEST_TIMEOUT_S = 240.0


def _feature_rows() -> list[dict[str, object]]:
    """Deterministic feature rows: stay views only; some features null, values on a 1/4 grid."""
    rng = np.random.default_rng(7)
    rows: list[dict[str, object]] = []
    for hotel in HOTELS:
        for room in ROOMS:
            for stay in STAYS:
                for view in ("stay_24h", "stay_7d"):
                    names = VIEWS[view][1]
                    for step in range(STEPS):
                        row: dict[str, object] = {"hotel_id": hotel, "room_type": room, "stay_date": stay, "view": view}
                        for name in names:
                            row[name] = None if rng.random() < 0.1 else float(rng.integers(0, 400)) / 4.0
                        row["feature_time"] = int((T0 + step * STEP).timestamp() * 1000)
                        row["version"] = 1 + step // 48
                        rows.append(row)
    return rows


def _write_offline(rows: list[dict[str, object]], root: Path) -> None:
    """The offline store's layout: features_v1/date=YYYY-MM-DD/part-0.parquet, feature_time a timestamp."""
    frame = pd.DataFrame(rows)
    frame["feature_time"] = pd.to_datetime(frame["feature_time"], unit="ms", utc=True)
    frame["stay_date"] = pd.to_datetime(frame["stay_date"]).dt.date
    for day, part in frame.groupby(frame["feature_time"].dt.strftime("%Y-%m-%d")):
        out = root / "features_v1" / f"date={day}"
        out.mkdir(parents=True)
        pq.write_table(pa.Table.from_pandas(part, preserve_index=False), out / "part-0.parquet")


def _behaviour_events() -> list[bytes]:
    """30 events per (hotel, minute, type) bucket: rollup must fold each bucket into one row."""
    out = []
    for hotel in HOTELS[:2]:
        for minute in range(3):
            at = T0 + timedelta(minutes=minute, seconds=1)
            for i in range(10):
                keys = {"hotel_id": hotel, "room_type": "std", "stay_date": date(2026, 3, 20), "channel": "web"}
                stamp = at + timedelta(seconds=i)
                out.append(dumps(SearchEvent(**keys, event_time=stamp)))
                out.append(dumps(ViewEvent(**keys, event_time=stamp, price_shown=100.0 + i)))
                out.append(dumps(BookingEvent(**keys, event_time=stamp, price_paid=90.0 + i, rooms=2)))
    return out


@pytest.fixture(scope="module")
def kafka_settings(request: pytest.FixtureRequest) -> Settings:
    """Settings of the secure stack's Kafka (as its admin) with a topic prefix private to this module.

    The services' ACLs (the ``druid`` principal's among them) are applied on that prefix, as
    ``pricestream run`` does. ``PRICESTREAM_TEST_KAFKA_BOOTSTRAP`` points the module at another running
    (plaintext) broker instead.
    """
    from infra.kafka_security import apply_acls

    prefix = f"t{uuid.uuid4().hex[:10]}-"
    external = os.environ.get("PRICESTREAM_TEST_KAFKA_BOOTSTRAP")
    if external:
        return Settings(kafka_bootstrap=external, topic_prefix=prefix)
    stack: StackConfig = request.getfixturevalue("secure_stack")
    apply_acls(stack, prefix)
    return Settings(state_dir=stack.state_dir, cache_dir=stack.cache_dir, kafka_port=stack.kafka_port,
                    kafka_controller_port=stack.kafka_controller_port, secure=True,
                    kafka_passwords=stack.kafka_passwords, topic_prefix=prefix)


@pytest.fixture(scope="module")
def kafka(kafka_settings: Settings) -> KafkaConfig:
    return kafka_settings.kafka()


def _ingest_by_command(settings: Settings, druid_url: str) -> list[str]:
    """``pricestream druid ingest`` on ``settings``: the supervisors log in as the ``druid`` principal."""
    done = subprocess.run([executable(), "druid", "ingest", "--druid-url", druid_url], env=settings_env(settings),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    listed = done.stdout.split("supervisors running:", 1)[1].split("(Druid at", 1)[0]
    return [name.strip() for name in listed.split(",")]


@pytest.fixture(scope="module")
def druid(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DruidSettings]:
    home = druid_stack.assemble(StackConfig().cache_dir)
    settings = DruidSettings(home=home, state_dir=tmp_path_factory.mktemp("druid"), ports=TEST_PORTS)
    try:
        druid_stack.start(settings)
        yield settings
    finally:
        druid_stack.stop(settings.state_dir)


@pytest.fixture(scope="module")
def ingested(
    druid: DruidSettings, kafka_settings: Settings, kafka: KafkaConfig, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, object]]:
    rows = _feature_rows()
    events = _behaviour_events()
    conf: dict[str, str | int | float | bool] = {**kafka.client_conf()}
    admin = AdminClient(conf)
    topics = [
        NewTopic(kafka.topic(name), num_partitions=2, replication_factor=1)
        for name in ("features.v1", "behaviour.events")
    ]
    for future in admin.create_topics(topics).values():
        future.result(timeout=30)
    producer = Producer(conf)
    for row in rows:
        producer.produce(kafka.topic("features.v1"), json.dumps(row).encode(), key=str(row["hotel_id"]))
    for raw in events:
        producer.produce(kafka.topic("behaviour.events"), raw, key=json.loads(raw)["hotel_id"])
    if producer.flush(30) != 0:
        pytest.fail("Kafka did not acknowledge every test record within 30 s")
    ids = _ingest_by_command(kafka_settings, druid.sql_url)
    assert sorted(ids) == ["behaviour_events", "features_v1"]
    _wait_count(druid.sql_url, "features_v1", "COUNT(*)", len(rows))
    _wait_count(druid.sql_url, "behaviour_events", "SUM(events)", len(events))
    offline = tmp_path_factory.mktemp("offline")
    _write_offline(rows, offline)
    yield {"rows": rows, "events": len(events), "offline": offline, "url": druid.sql_url}
    for sup in ids:
        terminate_supervisor(druid.sql_url, sup)


def _wait_count(url: str, table: str, expr: str, expected: int) -> None:
    deadline = time.monotonic() + _INGEST_TIMEOUT_S
    seen: object = None
    while time.monotonic() < deadline:
        try:
            seen = query(f"SELECT {expr} AS n FROM {table}", engine="druid", druid_url=url).frame["n"][0]
        except QueryFailed:  # the datasource is not in the broker's schema yet
            seen = None
        if seen == expected:
            return
        time.sleep(2)
    pytest.fail(f"{table}: {expr} = {seen} after {_INGEST_TIMEOUT_S:.0f}s, expected {expected}")


def test_druid_counts_and_aggregates_match_the_rows_produced(ingested: dict[str, object]) -> None:
    frame = pd.DataFrame(ingested["rows"])
    sql = (
        "SELECT hotel_id, COUNT(*) AS n, SUM(searches_24h) AS s24, MAX(bookings_7d) AS b7, "
        "COUNT(views_24h) AS v24 FROM features_v1 GROUP BY hotel_id ORDER BY hotel_id"
    )
    got = query(sql, engine="druid", druid_url=str(ingested["url"])).frame
    want = frame.groupby("hotel_id").agg(
        n=("hotel_id", "size"), s24=("searches_24h", "sum"), b7=("bookings_7d", "max"), v24=("views_24h", "count")
    )
    assert list(got["hotel_id"]) == list(HOTELS)
    assert list(got["n"]) == list(want["n"])
    assert list(got["s24"]) == list(want["s24"])
    assert list(got["b7"]) == list(want["b7"])
    assert list(got["v24"]) == list(want["v24"])


def test_behaviour_events_are_rolled_up_per_minute(ingested: dict[str, object]) -> None:
    sql = (
        "SELECT event_type, COUNT(*) AS stored, SUM(events) AS n, SUM(price_sum) AS price, "
        "SUM(priced_events) AS priced, SUM(rooms_sum) AS rooms FROM behaviour_events "
        "GROUP BY event_type ORDER BY event_type"
    )
    got = query(sql, engine="druid", druid_url=str(ingested["url"])).frame.set_index("event_type")
    # 2 hotels x 3 minutes: one stored row per bucket, 10 events folded into each.
    assert list(got["stored"]) == [6, 6, 6]
    assert list(got["n"]) == [60, 60, 60]
    assert got.loc["view", "price"] == 6 * sum(100.0 + i for i in range(10))
    assert got.loc["booking", "price"] == 6 * sum(90.0 + i for i in range(10))
    assert got.loc["search", "priced"] == 0
    assert got.loc["booking", "rooms"] == 120


ANALYST_SQL = (
    'SELECT hotel_id, room_type, TIME_FLOOR("__time", \'P1D\') AS "day", COUNT(*) AS n, '
    "SUM(searches_7d) AS searches, AVG(lead_time_mean_days_7d) AS lead_mean, MIN(bookings_7d) AS bmin "
    "FROM features_v1 WHERE \"__time\" >= TIMESTAMP '2026-03-01 12:00:00' AND \"view\" = 'stay_7d' "
    "GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
)


def test_the_same_analyst_query_gives_identical_results_on_druid_and_duckdb(ingested: dict[str, object]) -> None:
    on_druid = query(ANALYST_SQL, druid_url=str(ingested["url"]))
    on_duckdb = query(_duckdb_dialect(ANALYST_SQL), engine="duckdb", offline_root=Path(str(ingested["offline"])))
    assert (on_druid.engine, on_duckdb.engine) == ("druid", "duckdb")
    assert len(on_druid.frame) == len(HOTELS) * len(ROOMS) * 2
    pd.testing.assert_frame_equal(on_druid.frame, on_duckdb.frame, check_exact=False, rtol=1e-12)


def _duckdb_dialect(sql: str) -> str:
    # The one function spelled differently: Druid's TIME_FLOOR(t, 'P1D') is DuckDB's date_trunc.
    return sql.replace("TIME_FLOOR(\"__time\", 'P1D')", "date_trunc('day', \"__time\")")


def test_auto_engine_falls_back_to_duckdb_when_druid_is_unreachable(ingested: dict[str, object]) -> None:
    sql = "SELECT COUNT(*) AS n FROM features_v1"
    res = query(sql, druid_url="http://127.0.0.1:9", offline_root=Path(str(ingested["offline"])))
    assert res.engine == "duckdb"
    assert int(res.frame["n"][0]) == len(ingested["rows"])  # type: ignore[arg-type]


def test_backfill_from_druid_equals_the_offline_rows(ingested: dict[str, object]) -> None:
    start, end = T0 + timedelta(hours=6), T0 + timedelta(days=1, hours=3)
    entities: list[Entity] = ["h2", ("h3", "dlx"), ("h4", "std", "2026-04-02")]
    from_druid = backfill(entities, start, end, druid_url=str(ingested["url"]))
    from_offline = offline_rows(entities, start, end, offline_root=Path(str(ingested["offline"])))
    # h2: 2 rooms x 2 stays x 2 views; h3/dlx: 2 stays x 2 views; h4/std/2026-04-02: 2 views -> 14 series.
    assert len(from_druid) == 14 * 42  # 42 half-hours in [06:00, next day 03:00)
    pd.testing.assert_frame_equal(from_druid, from_offline, check_exact=True)
    assert set(from_druid["version"]) == {1, 2}
    assert from_druid["feature_time"].min() == pd.Timestamp(start)
