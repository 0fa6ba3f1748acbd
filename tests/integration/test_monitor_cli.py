"""``pricestream monitor stream`` on the real Kafka: a live run over published decisions, metrics and a dashboard."""

from __future__ import annotations

import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from events.admin import create_topics
from events.config import KafkaConfig
from events.topics import TOPICS
from infra.flink_cluster import free_port
from pricestream.cli import app
from tests.integration.test_monitor_stream import HOTELS, STAYS, draw, publish_decisions

pytestmark = pytest.mark.integration


def _scrape(port: int, seen: list[str], stop: threading.Event) -> None:
    """Keep the latest /metrics page the command serves while it runs."""
    while not stop.is_set():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:  # noqa: S310
                seen.append(resp.read().decode())
        except OSError:
            pass
        time.sleep(0.2)


def test_monitor_stream_reads_the_decisions_serves_metrics_and_draws_the_dashboard(
    kafka_config: KafkaConfig, tmp_path: Path
) -> None:
    create_topics(kafka_config, [TOPICS["pricing.decisions"]])
    rng = np.random.default_rng(5)
    rows = {(h, s): draw(rng) for h in HOTELS for s in STAYS}
    for stay in STAYS:
        rows[("h3", stay)]["rooms_left"] = None  # one broken feed
    n = publish_decisions(kafka_config, rows)
    port, pages, stop = free_port(), [], threading.Event()
    scraper = threading.Thread(target=_scrape, args=(port, pages, stop), daemon=True)
    scraper.start()
    env = {"PRICESTREAM_KAFKA_BOOTSTRAP": kafka_config.bootstrap_servers,
           "PRICESTREAM_TOPIC_PREFIX": kafka_config.topic_prefix, "PRICESTREAM_STATE_DIR": str(tmp_path / "state")}
    out = tmp_path / "live.html"
    try:
        result = CliRunner().invoke(app, ["monitor", "stream", "--metrics-port", str(port), "--until", str(n),
                                          "--max-idle", "30", "--window-hours", "48", "--out", str(out),
                                          "--features", "occupancy,rooms_left,comp_rate_median_24h"], env=env)
    finally:
        stop.set()
        scraper.join()
    assert result.exit_code == 0, result.output
    assert f"{n} decisions read, {n} monitored, tiers {{'rules': 1.0}}" in result.output
    assert "lowest coverage rooms_left at h3: 0.00" in result.output
    assert out.exists() and "coverage" in out.read_text().lower()
    served = [p for p in pages if "pricestream_tier_share" in p]
    assert served, "the command never served its metrics while running"
    assert 'pricestream_coverage_worst_hotel_missing_share{feature="rooms_left"} 1.0' in served[-1]


def test_an_unknown_feature_is_refused_by_name() -> None:
    result = CliRunner().invoke(app, ["monitor", "stream", "--metrics-port", "0", "--features", "occupancy,nope"])
    assert result.exit_code != 0
    assert "--features: got ['nope'], expected names from" in result.output
