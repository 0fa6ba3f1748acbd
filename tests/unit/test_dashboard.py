from __future__ import annotations

import base64
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from feedback.dashboard import write_dashboard
from feedback.monitors import CoverageMonitor, DriftMonitor, FlipMonitor

T0 = datetime(2026, 6, 1, tzinfo=UTC)
FEATURES = ("occupancy", "searches_24h")


def inputs() -> dict[str, object]:
    rng = np.random.default_rng(0)
    cov = CoverageMonitor(timedelta(hours=1), timedelta(minutes=5), features=FEATURES)
    for i in range(50):
        for hotel in ("h1", "h2", "h3"):
            values = {"occupancy": None if hotel == "h2" else 0.5, "searches_24h": float(i)}
            cov.update(hotel, values, feature_time=T0, now=T0 + timedelta(seconds=i))
    ref = pd.DataFrame({"occupancy": rng.beta(4, 2, 2000), "searches_24h": rng.poisson(10, 2000).astype(float)})
    drift = DriftMonitor(ref, features=FEATURES)
    for k in range(4):
        window = pd.DataFrame(
            {"occupancy": rng.beta(4, 2, 1000) + 0.1 * k, "searches_24h": rng.poisson(10, 1000).astype(float)}
        )
        drift.check(window, at=T0 + timedelta(hours=k))
    flips, reports = FlipMonitor(), []
    for k in range(5):
        flips.update(f"x{k}", "v1", 100.0)
        flips.update(f"x{k}", "v1", 100.0 + (k % 2))
        reports.append(flips.report(at=T0 + timedelta(hours=k)))
    return {
        "coverage": cov.report(),
        "drift_history": drift.history,
        "flips": reports,
        "tier_shares": [(T0 + timedelta(hours=k), {"rules": 0.2, "light": 0.7 - 0.1 * k, "heavy": 0.1 + 0.1 * k})
                        for k in range(4)],
        "latencies_ms": {"rules": [0.5, 0.7, 0.9], "light": [4.0, 5.0, 6.0, 40.0], "heavy": [20.0, 30.0, 95.0]},
        "rollout_weights_history": [(T0 + timedelta(hours=k), {"v1": 1 - 0.25 * k, "v2": 0.25 * k}) for k in range(5)],
    }


def test_dashboard_has_six_embedded_pngs_and_the_numbers(tmp_path: Path) -> None:
    out = write_dashboard(tmp_path / "sub" / "dash.html", **inputs(), generated_at=T0)  # type: ignore[arg-type]
    text = out.read_text(encoding="utf-8")
    assert text.count("<img") == 6
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', text)
    assert len(images) == 6
    assert all(base64.b64decode(img)[:8] == b"\x89PNG\r\n\x1a\n" for img in images)
    assert "generated 2026-06-01 00:00:00 UTC" in text
    assert "<table" in text and text.count("<table") == 6
    assert ">0.3333<" in text  # occupancy pooled null share: one hotel of three
    assert ">0.4<" in text  # flip rate: 2 of 5 inputs flipped
    assert ">30<" in text  # heavy tier p50 latency


def test_empty_inputs_still_render(tmp_path: Path) -> None:
    cov = CoverageMonitor(timedelta(hours=1), timedelta(minutes=5), features=FEATURES)
    out = write_dashboard(
        tmp_path / "empty.html",
        coverage=cov.report(),
        drift_history=[],
        flips=[],
        tier_shares={},
        latencies_ms=[],
        rollout_weights_history=[],
        title="<b>ops</b>",
    )
    text = out.read_text(encoding="utf-8")
    assert text.count("<img") == 6
    assert "&lt;b&gt;ops&lt;/b&gt;" in text and "<b>ops</b>" not in text


def test_prometheus_export_sets_values_on_the_given_registry() -> None:
    from prometheus_client import REGISTRY, CollectorRegistry

    from feedback.monitors.metrics import MonitorMetrics, export

    registry = CollectorRegistry()
    metrics = MonitorMetrics(registry)
    data = inputs()
    history = data["drift_history"]
    export(
        metrics,
        coverage=data["coverage"],  # type: ignore[arg-type]
        drift=history[-1],  # type: ignore[index]
        flips=data["flips"][-1],  # type: ignore[index]
        tier_shares={"rules": 0.25, "light": 0.75},
        rollout_weights={"v1": 0.4, "v2": 0.6},
    )
    metrics.observe_latencies([3.0, 7.0, 700.0], tier="light")

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(f"pricestream_{name}", labels)

    assert value("coverage_missing_share", feature="occupancy") == pytest.approx(1 / 3)
    assert value("coverage_worst_hotel_missing_share", feature="occupancy") == 1.0
    assert value("drift_alert", feature="occupancy") == 1.0
    assert value("drift_alert", feature="searches_24h") == 0.0
    assert value("drift_alerts_total", feature="occupancy") == 1.0
    assert value("flip_rate", scope="same_version", version="v1") == pytest.approx(0.4)
    assert value("tier_share", tier="light") == 0.75
    assert value("rollout_weight", arm="v2") == 0.6
    assert value("decision_latency_seconds_count", tier="light") == 3.0
    assert value("decision_latency_seconds_bucket", tier="light", le="0.005") == 1.0
    assert REGISTRY.get_sample_value("pricestream_tier_share", {"tier": "light"}) is None
