"""The CLI on the real local stack: topics, produce, and a query answered by DuckDB over the offline store."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from events.config import KafkaConfig
from events.topics import TOPICS
from features.offline_writer import OfflineWriter
from features.rows import parse_row
from pricestream.cli import app

pytestmark = pytest.mark.integration
runner = CliRunner()


@pytest.fixture
def env(kafka_config: KafkaConfig, tmp_path: Path) -> dict[str, str]:
    return {
        "PRICESTREAM_KAFKA_BOOTSTRAP": kafka_config.bootstrap_servers,
        "PRICESTREAM_TOPIC_PREFIX": kafka_config.topic_prefix,
        "PRICESTREAM_STATE_DIR": str(tmp_path / "state"),
    }


def test_topics_create_is_idempotent(env: dict[str, str], kafka_config: KafkaConfig) -> None:
    first = runner.invoke(app, ["topics", "create"], env=env)
    second = runner.invoke(app, ["topics", "create"], env=env)
    assert first.exit_code == 0 and second.exit_code == 0
    name = kafka_config.topic("behaviour.events")
    assert re.search(rf"{re.escape(name)}\s+│ created", first.output)
    assert second.output.count("│ exists") == len(TOPICS)
    assert "created" not in second.output


def test_produce_reports_final_counts(env: dict[str, str]) -> None:
    result = runner.invoke(app, ["produce", "--hotels", "2", "--rate", "500", "--duration", "1", "--seed", "3"],
                           env=env)
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("sent "))
    assert line.startswith("sent 500, delivered 500, failed 0, rejected before sending 0, DLQ'd 0")


def _row(hotel: str, view: str, minute: int, value: float) -> dict:
    ms = 1_764_460_800_000 + minute * 60_000  # 2025-11-30T00:00Z
    features = {"searches_1h": value} if view == "stay_1h" else {"occupancy": value / 10}
    return {"hotel_id": hotel, "view": view, "room_type": "std", "stay_date": "2025-12-24", "feature_time": ms,
            "version": minute + 1, "publish_time": ms, "features": features}


def test_query_falls_back_to_duckdb_over_the_offline_store(env: dict[str, str], tmp_path: Path) -> None:
    offline = tmp_path / "offline"
    rows = [_row("h1", "stay_1h", 1, 3.0), _row("h1", "stay_1h", 2, 5.0), _row("h2", "stay_1h", 3, 7.0),
            _row("h2", "stay_inventory", 4, 4.0)]
    OfflineWriter(offline).write_rows([parse_row(r) for r in rows])
    out = tmp_path / "result.csv"
    sql = "SELECT hotel_id, COUNT(*) AS n, SUM(searches_1h) AS s FROM features_v1 GROUP BY hotel_id ORDER BY hotel_id"
    result = runner.invoke(
        app, ["query", sql, "--out", str(out)],
        env={**env, "PRICESTREAM_OFFLINE_ROOT": str(offline), "PRICESTREAM_DRUID_URL": f"http://127.0.0.1:9/{uuid.uuid4()}"},
    )
    assert result.exit_code == 0, result.output
    assert "2 rows (showing 2), answered by duckdb" in result.output
    written = pd.read_csv(out)
    assert written.to_dict("list") == {"hotel_id": ["h1", "h2"], "n": [2, 2], "s": [8.0, 7.0]}
