"""The monitor service on the real Kafka: decisions of a real scorer -> coverage, drift, flips -> Prometheus."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from prometheus_client import CollectorRegistry

from events.admin import create_topics
from events.config import KafkaConfig
from events.models import PricingRequest
from events.producer import Producer
from events.topics import TOPICS
from feedback.monitors.stream import DecisionMonitor, MonitorConfig, MonitorStream
from pricing.feature_source import MemoryFeatureSource
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from routing.router import Thresholds, TieredRouter

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
HOTELS = ("h0", "h1", "h2", "h3")
STAYS = tuple(date(2026, 12, 10) + timedelta(days=d) for d in range(25))
MONITORED = ("occupancy", "rooms_left", "comp_rate_median_24h", "searches_24h", "bookings_24h")


def draw(rng: np.random.Generator, *, comp_shift: float = 1.0) -> dict[str, float | None]:
    """One stay's features; ``comp_shift`` scales the competitor rate (a market that moved)."""
    return {"occupancy": float(rng.beta(2, 2)), "rooms_left": float(rng.integers(1, 60)),
            "comp_rate_median_24h": float(rng.lognormal(np.log(150.0), 0.15)) * comp_shift,
            "searches_24h": float(rng.poisson(40)), "bookings_24h": float(rng.poisson(3)), "capacity": 80.0}


def publish_decisions(kafka: KafkaConfig, rows: Mapping[tuple[str, date], dict[str, float | None]]) -> int:
    """Price one request per stay key through a real scorer whose decisions go to ``pricing.decisions``."""
    source = MemoryFeatureSource()
    for (hotel, stay), values in rows.items():
        source.put(hotel, "std", stay, values, version=1, event_time=T0)
    with Producer(kafka, topic="pricing.decisions") as producer:
        scorer = Scorer(ScorerConfig(stale_after_s=None, deadline_ms=60_000.0),
                        rules=RuleSet.from_yaml("min_price: 40\nmax_price: 900\ndefault_base_rate: 150\n"),
                        feature_source=source, light=None, heavy=None,
                        router=TieredRouter(thresholds=Thresholds(rules_below=0.0, heavy_above=1.0)),
                        on_decision=lambda _r, d: producer.send(d))
        for i, (hotel, stay) in enumerate(rows):
            scorer.price(PricingRequest(hotel_id=hotel, room_type="std", stay_date=stay,
                                        event_time=T0 + timedelta(seconds=i)))
        producer.flush()
    return len(rows)


def consume(kafka: KafkaConfig, monitor: DecisionMonitor, n: int) -> None:
    with MonitorStream(kafka, monitor, group_id="monitor-stream-test", export_every=100) as stream:
        stream.run(until=n, idle_timeout_s=20.0)
    assert monitor.n_decisions == n


def test_a_feature_forced_to_null_for_one_hotel_has_zero_coverage_there(kafka_config: KafkaConfig) -> None:
    create_topics(kafka_config, [TOPICS["pricing.decisions"]])
    rng = np.random.default_rng(1)
    rows = {(h, s): draw(rng) for h in HOTELS for s in STAYS}
    for stay in STAYS:
        rows[("h2", stay)]["occupancy"] = None  # h2's occupancy feed is broken
    n = publish_decisions(kafka_config, rows)
    registry = CollectorRegistry()
    monitor = DecisionMonitor(MonitorConfig(features=MONITORED, window=timedelta(days=1)), registry=registry)
    consume(kafka_config, monitor, n)

    assert monitor.coverage("h2", "occupancy") == 0.0
    assert monitor.coverage("h0", "occupancy") == 1.0 and monitor.coverage("h2", "rooms_left") == 1.0
    frame = monitor.coverage_report().to_frame().set_index(["hotel_id", "feature"])
    assert frame.loc[("h2", "occupancy"), "n"] == len(STAYS)
    sample = registry.get_sample_value
    assert sample("pricestream_coverage_worst_hotel_missing_share", {"feature": "occupancy"}) == 1.0
    assert sample("pricestream_coverage_null_share", {"feature": "occupancy"}) == pytest.approx(0.25)
    assert sample("pricestream_coverage_worst_hotel_missing_share", {"feature": "rooms_left"}) == 0.0
    assert sample("pricestream_coverage_hotels", {}) == len(HOTELS)
    assert sample("pricestream_tier_share", {"tier": "rules"}) == 1.0  # no light model: the rules priced all
    assert sample("pricestream_flip_rate", {"scope": "same_version", "version": "all"}) == 0.0


def test_a_drifted_feature_alerts_and_the_others_do_not(kafka_config: KafkaConfig, tmp_path: Path) -> None:
    create_topics(kafka_config, [TOPICS["pricing.decisions"]])
    rng = np.random.default_rng(2)
    reference = pd.DataFrame([draw(rng) for _ in range(2000)])
    live = {(h, s): draw(rng, comp_shift=1.4) for h in HOTELS for s in STAYS}  # competitors raised rates 40%
    n = publish_decisions(kafka_config, live)
    registry = CollectorRegistry()
    monitor = DecisionMonitor(MonitorConfig(features=MONITORED, drift_check_every=0), registry=registry,
                              reference=reference)
    consume(kafka_config, monitor, n)
    report = monitor.check_drift()

    assert report is not None and report.n_window == n
    assert report.alerted_features == ("comp_rate_median_24h",)
    assert report["comp_rate_median_24h"].psi > 0.2
    assert registry.get_sample_value("pricestream_drift_alert", {"feature": "comp_rate_median_24h"}) == 1.0
    assert registry.get_sample_value("pricestream_drift_alert", {"feature": "occupancy"}) == 0.0
    assert registry.get_sample_value("pricestream_drift_alerts_total", {"feature": "comp_rate_median_24h"}) == 1.0
    page = monitor.write_dashboard(tmp_path / "dash.html", generated_at=T0)
    assert page.read_text().count("<img") == 6 and "comp_rate_median_24h" in page.read_text()
