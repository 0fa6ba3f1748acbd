"""Analyst queries and backfill without services: the DuckDB path, SQL building, normalisation,
and the Druid config/spec rendering they rely on."""

from __future__ import annotations

import re
import socket
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from events.catalog import DERIVED_FEATURES, VIEWS
from features.analytics import (
    FEATURE_SCHEMA,
    STORED_FEATURES,
    EngineUnavailable,
    QueryFailed,
    normalise,
    query,
    write_frame,
)
from features.backfill import FEATURE_COLUMNS, BackfillError, backfill_sql, offline_rows, to_feature_frame
from infra.druid.config import DRUID_VERSION, DruidSettings, common_properties, direct_memory_mb, service_properties
from infra.druid.supervisors import load_spec, spec_columns
from infra.druid_stack import POM, launch_plan

T0 = datetime(2026, 5, 1, tzinfo=UTC)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _write_day(root: Path, day: str, frame: pd.DataFrame) -> None:
    out = root / "features_v1" / f"date={day}"
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), out / "part-0.parquet")


@pytest.fixture
def offline(tmp_path: Path) -> Path:
    """Two days of rows; day two lacks a feature column entirely and stores stay_date as a date."""
    times = pd.to_datetime([T0, T0 + timedelta(hours=1), T0 + timedelta(hours=2)], utc=True)
    day1 = pd.DataFrame(
        {
            "hotel_id": ["h1", "h1", "h2"],
            "room_type": ["std", "std", "dlx"],
            "stay_date": ["2026-06-01"] * 3,
            "view": ["stay_24h"] * 3,
            "searches_24h": [1.5, None, 4.0],
            "views_24h": [10.0, 11.0, 12.0],
            "feature_time": times,
            "version": [1, 1, 2],
        }
    )
    day2 = pd.DataFrame(
        {
            "hotel_id": ["h1"],
            "room_type": ["std"],
            "stay_date": [date(2026, 6, 1)],
            "view": ["stay_24h"],
            "searches_24h": [7.0],
            "feature_time": pd.to_datetime([T0 + timedelta(days=1)], utc=True),
            "version": [3],
        }
    )
    _write_day(tmp_path, "2026-05-01", day1)
    _write_day(tmp_path, "2026-05-02", day2)
    return tmp_path


def test_duckdb_view_has_druids_schema_with_typed_nulls_for_missing_columns(offline: Path) -> None:
    res = query('SELECT * FROM features_v1 ORDER BY "__time"', engine="duckdb", offline_root=offline)
    assert list(res.frame.columns) == ["__time", *FEATURE_SCHEMA]
    assert str(res.frame["__time"].dtype) == "datetime64[ms, UTC]"
    assert res.frame["rooms_left"].isna().all() and str(res.frame["rooms_left"].dtype) == "float64"
    assert list(res.frame["stay_date"]) == ["2026-06-01"] * 4  # a parquet date becomes Druid's string
    assert list(res.frame["views_24h"].fillna(-1)) == [10.0, 11.0, 12.0, -1]


def test_aggregates_on_duckdb_skip_nulls_like_druid(offline: Path) -> None:
    sql = (
        "SELECT hotel_id, COUNT(*) AS n, SUM(searches_24h) AS s, COUNT(searches_24h) AS c "
        "FROM features_v1 GROUP BY 1 ORDER BY 1"
    )
    frame = query(sql, engine="duckdb", offline_root=offline).frame
    assert frame.to_dict("list") == {"hotel_id": ["h1", "h2"], "n": [3, 1], "s": [8.5, 4.0], "c": [2, 1]}
    assert str(frame["n"].dtype) == "int64"


def test_auto_falls_back_to_duckdb_when_druid_does_not_answer(offline: Path) -> None:
    res = query(
        "SELECT COUNT(*) AS n FROM features_v1", druid_url=f"http://127.0.0.1:{_free_port()}", offline_root=offline
    )
    assert (res.engine, int(res.frame["n"][0])) == ("duckdb", 4)


def test_no_engine_and_forced_druid_without_server_raise_engine_unavailable(offline: Path) -> None:
    with pytest.raises(EngineUnavailable, match="offline_root is None"):
        query("SELECT 1", druid_url=f"http://127.0.0.1:{_free_port()}")
    with pytest.raises(EngineUnavailable, match="not reachable"):
        query("SELECT 1", engine="druid", druid_url=f"http://127.0.0.1:{_free_port()}", offline_root=offline)


def test_bad_sql_raises_query_failed_naming_the_store(offline: Path) -> None:
    with pytest.raises(QueryFailed, match="no_such_column"):
        query("SELECT no_such_column FROM features_v1", engine="duckdb", offline_root=offline)


def test_empty_store_still_has_the_view(tmp_path: Path) -> None:
    frame = query(
        "SELECT COUNT(*) AS n, MAX(version) AS v FROM features_v1", engine="duckdb", offline_root=tmp_path
    ).frame
    assert int(frame["n"][0]) == 0
    assert frame["v"].isna().all()


def test_normalise_turns_druid_json_values_into_typed_columns() -> None:
    raw = pd.DataFrame(
        {
            "t": ["2026-05-01T00:00:00.000Z", None],
            "n": [3, 4],
            "x": [1, None],
            "s": ["a", "2026-05-01"],
        }
    )
    out = normalise(raw)
    assert out["t"][0] == pd.Timestamp("2026-05-01", tz="UTC") and pd.isna(out["t"][1])
    assert [str(out[c].dtype) for c in "nxs"] == ["int64", "float64", "object"]


def test_write_frame_round_trips_csv_and_parquet(tmp_path: Path, offline: Path) -> None:
    res = query('SELECT hotel_id, "__time" FROM features_v1 ORDER BY 2', engine="duckdb", offline_root=offline)
    back = pd.read_parquet(res.write(tmp_path / "out.parquet"))
    pd.testing.assert_frame_equal(back, res.frame)
    text = res.write(tmp_path / "out.csv").read_text().splitlines()
    assert text[0] == "hotel_id,__time" and text[1] == "h1,2026-05-01T00:00:00.000000Z"
    with pytest.raises(ValueError, match="'.xlsx'"):
        write_frame(res.frame, tmp_path / "out.xlsx")


def test_offline_rows_select_entity_prefixes_and_half_open_range(offline: Path) -> None:
    rows = offline_rows(["h2", ("h1", "std", date(2026, 6, 1))], T0, T0 + timedelta(days=1), offline_root=offline)
    assert list(rows.columns) == list(FEATURE_COLUMNS)
    assert list(zip(rows["hotel_id"], rows["version"], strict=True)) == [("h1", 1), ("h1", 1), ("h2", 2)]
    assert rows["feature_time"].max() < pd.Timestamp(T0 + timedelta(days=1))
    assert rows["searches_24h"].isna().tolist() == [False, True, False]


def test_backfill_sql_escapes_quotes_and_refuses_bad_requests() -> None:
    sql = backfill_sql(["o'hare"], T0, T0 + timedelta(hours=1))
    assert "\"hotel_id\" = 'o''hare'" in sql
    assert re.search(r"\"__time\" >= TIMESTAMP '2026-05-01 00:00:00.000'", sql)
    with pytest.raises(BackfillError, match="timezone-aware"):
        backfill_sql(["h1"], datetime(2026, 5, 1), T0)  # noqa: DTZ001 - the naive time is the point
    with pytest.raises(BackfillError, match="start < end"):
        backfill_sql(["h1"], T0, T0)
    with pytest.raises(BackfillError, match="at least one"):
        backfill_sql([], T0, T0 + timedelta(hours=1))
    with pytest.raises(BackfillError, match="4 parts"):
        backfill_sql([("h1", "std", "2026-06-01", "x")], T0, T0 + timedelta(hours=1))  # type: ignore[list-item]


def test_to_feature_frame_orders_sorts_and_types() -> None:
    raw = pd.DataFrame(
        {
            "hotel_id": ["h2", "h1", "h1"],
            "feature_time": ["2026-05-01T01:00:00.000Z", "2026-05-01T02:00:00.000Z", "2026-05-01T01:00:00.000Z"],
            "version": [1, 2, 1],
            "bookings_24h": [1, 2, 3],
        }
    )
    out = to_feature_frame(raw)
    assert list(out.columns) == list(FEATURE_COLUMNS)
    assert list(out["bookings_24h"]) == [3.0, 2.0, 1.0]
    assert str(out["version"].dtype) == "int64" and str(out["bookings_24h"].dtype) == "float64"


def test_features_spec_stores_every_stored_catalogue_feature_as_a_double() -> None:
    spec = load_spec("features.v1", kafka_bootstrap="k:1", topic_prefix="p-", datasource_prefix="d_")
    dims = spec["spec"]["dataSchema"]["dimensionsSpec"]["dimensions"]
    assert spec_columns("features.v1") == tuple(FEATURE_SCHEMA)
    assert {d["name"] for d in dims if d["type"] == "double"} == {n for _, names in VIEWS.values() for n in names}
    assert not set(DERIVED_FEATURES) & set(STORED_FEATURES)
    assert spec["spec"]["dataSchema"]["dataSource"] == "d_features_v1"
    assert spec["spec"]["ioConfig"]["consumerProperties"]["bootstrap.servers"] == "k:1"
    assert spec["spec"]["dataSchema"]["granularitySpec"]["rollup"] is False


def test_behaviour_spec_rolls_up_per_minute_on_the_event_keys() -> None:
    spec = load_spec("behaviour.events", kafka_bootstrap="k:1")
    gran = spec["spec"]["dataSchema"]["granularitySpec"]
    assert (gran["rollup"], gran["queryGranularity"]) == (True, "MINUTE")
    assert spec_columns("behaviour.events")[:5] == ("hotel_id", "room_type", "stay_date", "event_type", "channel")
    assert spec["spec"]["ioConfig"]["topic"] == "behaviour.events"


def test_druid_config_uses_offset_ports_and_state_dir(tmp_path: Path) -> None:
    s = DruidSettings(home=tmp_path / "home", state_dir=tmp_path / "state", with_router=False)
    common = common_properties(s)
    assert common["druid.metadata.storage.connector.connectURI"].startswith("jdbc:derby://127.0.0.1:11527/")
    assert common["druid.storage.storageDirectory"] == str(tmp_path / "state" / "var" / "segments")
    assert service_properties(s, "coordinator")["druid.coordinator.asOverlord.enabled"] == "true"
    assert service_properties(s, "indexer")["druid.plaintextPort"] == "18091"
    assert s.sql_url == "http://127.0.0.1:18082"
    assert direct_memory_mb(s, "historical") == 3 * 32 + 64
    names = [name for name, _ in launch_plan(s)]
    assert names == ["zookeeper", "coordinator", "broker", "historical", "indexer"]


def test_pom_pins_the_version_the_code_expects() -> None:
    assert f"<druid.version>{DRUID_VERSION}</druid.version>" in POM.read_text()
