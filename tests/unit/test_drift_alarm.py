"""The drift alarm acts and says what it did; limits calibrated on the reference's own windows.

All randomness is seeded. The monitor tests feed :class:`DecisionMonitor` real decisions, no services.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from prometheus_client import CollectorRegistry

from events.models import PricingDecision
from feedback.monitors.alarms import AlarmConfig, DriftAlarm, UpdateRequests
from feedback.monitors.drift import DriftMonitor, DriftReport, FeatureDrift
from feedback.monitors.drift_calibration import WINDOW_SLACK, window_limits
from feedback.monitors.errors import MonitorInputError
from feedback.monitors.stream import DecisionMonitor, MonitorConfig, request_features
from feedback.services.monitor_service import MonitorStep

T0 = datetime(2026, 9, 1, tzinfo=UTC)


def _report(at: datetime, *, alert: bool = True) -> DriftReport:
    return DriftReport(at, 600, (FeatureDrift("comp_rate_min_24h", 600, 0.9 if alert else 0.01, 0.8, 0.25, alert),))


def test_one_episode_rings_once_and_every_action_says_what_it_did(tmp_path: Path) -> None:
    requests = UpdateRequests(tmp_path / "update_requests.jsonl")

    def broken(_report: DriftReport) -> str:
        msg = "thresholds file is read-only"
        raise OSError(msg)

    alarm = DriftAlarm(AlarmConfig(cooldown=timedelta(hours=6)),
                       actions={"trainer update": requests.request, "router recalibration": broken})
    rung = [alarm.on_report(_report(T0 + timedelta(hours=h), alert=h != 8)) for h in (0, 1, 5, 8, 12)]
    assert [r is not None for r in rung] == [True, False, False, False, True]  # 12 h: a new episode
    first = alarm.history[0]
    assert first.actions == ("trainer update: request 1 written to update_requests.jsonl",
                             "router recalibration: failed: OSError: thresholds file is read-only")
    assert "drift alarm at 2026-09-01T00:00:00+00:00 on comp_rate_min_24h" in first.describe()
    lines = [json.loads(x) for x in requests.path.read_text(encoding="utf-8").splitlines()]
    assert [x["at"] for x in lines] == [T0.isoformat(), (T0 + timedelta(hours=12)).isoformat()]
    assert requests.read(after=1)[0]["features"] == ["comp_rate_min_24h"]


def test_a_torn_last_line_waits_for_its_writer(tmp_path: Path) -> None:
    path = tmp_path / "update_requests.jsonl"
    path.write_text('{"at": "2026-09-01T00:00:00+00:00", "features": ["x"]}\n{"at": "2026-09', encoding="utf-8")
    assert len(UpdateRequests(path).read()) == 1


def _autocorrelated(seed: int, n: int, *, level: float = 0.0) -> pd.DataFrame:
    """A feature that holds a value for 100 rows at a time (a hotel's 24-hour count), plus a little noise."""
    rng = np.random.default_rng(seed)
    plateaus = np.repeat(rng.normal(level, 1.0, n // 100 + 1), 100)[:n]
    return pd.DataFrame({"x": plateaus + rng.normal(0.0, 0.1, n)})


def test_window_limits_silence_an_autocorrelated_feature_and_keep_a_real_shift() -> None:
    reference, window = _autocorrelated(1, 20_000), 1_000
    plain = DriftMonitor(reference, features=["x"])
    limits = window_limits(reference, ["x"], window=window)
    calibrated = DriftMonitor(reference, features=["x"], window_limits=limits)
    same = [_autocorrelated(seed, window) for seed in range(2, 32)]
    assert sum(plain.check(w, at=T0).alert for w in same) > 15  # iid noise limit: alarms on most windows
    assert sum(calibrated.check(w, at=T0).alert for w in same) <= 1
    shifted = _autocorrelated(99, window, level=2.0)
    assert calibrated.check(shifted, at=T0).alert
    assert limits["x"] > 0.2 and limits["x"] / WINDOW_SLACK > plain.check(same[0], at=T0)["x"].psi_limit


def test_window_limits_need_a_window_the_reference_holds() -> None:
    with pytest.raises(MonitorInputError, match="window"):
        window_limits(_autocorrelated(1, 200), ["x"], window=500)


def _decision(at: datetime, comp: float, lead: int) -> PricingDecision:
    return PricingDecision(hotel_id="h1", room_type="std", stay_date=at.date() + timedelta(days=lead),
                           request_id="00000000-0000-0000-0000-000000000001", price=120.0, tier="light",
                           complexity=0.3, latency_ms=2.0, event_time=at, features={"comp_rate_min_24h": comp})


def test_the_monitor_rings_requests_a_trainer_update_and_reports_it(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    reference = pd.DataFrame({"comp_rate_min_24h": rng.normal(100.0, 10.0, 5_000),
                              "lead_time_days": rng.integers(0, 60, 5_000).astype(float)})
    registry = CollectorRegistry()
    config = MonitorConfig(features=("comp_rate_min_24h",), drift_check_every=500, drift_window=500,
                           update_requests=tmp_path / "update_requests.jsonl")
    monitor = DecisionMonitor(config, registry=registry, reference=reference)
    for i in range(1_000):  # same market: no alarm
        monitor.learn_one(_decision(T0 + timedelta(minutes=i), float(rng.normal(100.0, 10.0)), int(rng.integers(60))))
    assert monitor.alarms == ()
    for i in range(500):  # a price war: competitors 20% cheaper
        at = T0 + timedelta(days=1, minutes=i)
        monitor.learn_one(_decision(at, float(rng.normal(80.0, 8.0)), int(rng.integers(60))))
    assert len(monitor.alarms) == 1
    record = monitor.alarms[0]
    assert record.features == ("comp_rate_min_24h",)
    assert record.actions == ("trainer update: request 1 written to update_requests.jsonl",)
    assert registry.get_sample_value("pricestream_drift_alarms_total", {"action": "trainer update"}) == 1.0
    assert len(UpdateRequests(config.update_requests).read()) == 1  # type: ignore[arg-type]
    described = MonitorStep(monitor).describe()  # what the monitor service reports about itself
    assert described["drift_alarms"] == 1 and "trainer update: request 1 written" in described["last_alarm"]
    judged = {f.feature for f in monitor._drift.history[-1]}  # type: ignore[union-attr]
    assert judged == {"comp_rate_min_24h", "lead_time_days"}  # the request's lead time is watched too


def test_request_features_are_lead_time_and_channel() -> None:
    assert request_features(stay_date=date(2026, 9, 20), at=T0, channel="ota", nights=2) == {
        "lead_time_days": 19.0, "channel_code": 2.0, "nights": 2.0}
