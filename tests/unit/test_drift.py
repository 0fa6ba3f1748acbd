from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from feedback.monitors.drift import (
    DriftAwareRecalibration,
    DriftMonitor,
    DriftReport,
    FeatureDrift,
    false_alarm_rate,
    holm,
)
from feedback.monitors.errors import MonitorInputError

T0 = datetime(2026, 6, 1, tzinfo=UTC)
FEATURES = ("price", "searches", "occupancy")


def draw(seed: int | list[int], n: int = 5000, *, shift: float = 0.0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "price": rng.normal(120.0 + shift * 20.0, 20.0, n),
            "searches": rng.poisson(12.0, n).astype(float),  # discrete, with ties
            "occupancy": rng.beta(4.0, 2.0, n),
        }
    )


REFERENCE = draw(12345)


def test_shift_of_half_a_std_alerts_and_unchanged_features_do_not() -> None:
    mon = DriftMonitor(REFERENCE, features=FEATURES)
    report = mon.check(draw(1, shift=0.5), at=T0)
    assert report.alerted_features == ("price",)
    assert report["price"].wasserstein == pytest.approx(0.5, abs=0.05)
    assert report["price"].corrected_p < 1e-10
    assert report["price"].psi > 0.15
    assert report["occupancy"].corrected_p > 0.01


def test_unchanged_window_does_not_alert() -> None:
    report = DriftMonitor(REFERENCE, features=FEATURES).check(draw(2), at=T0)
    assert not report.alert
    assert all(item.psi < 0.02 for item in report)


def test_false_alarm_rate_over_100_unchanged_windows(record_property: Callable[[str, object], None]) -> None:
    rate = false_alarm_rate(REFERENCE, lambda i: draw([99, i], 2000), n_windows=100, features=FEATURES)
    record_property("false_alarm_rate", rate)
    assert rate <= 0.05


def test_trivial_shift_on_a_huge_window_is_significant_but_not_material() -> None:
    big_ref = draw(3, 200_000)
    report = DriftMonitor(big_ref, features=("price",)).check(draw(4, 200_000, shift=0.03), at=T0)
    item = report["price"]
    assert item.corrected_p < 0.01  # KS alone would alert
    assert item.wasserstein < 0.05 and item.psi < 0.01
    assert not item.alert


def test_holm_and_bonferroni_corrections() -> None:
    p = np.array([0.001, 0.02, 0.04, 0.5])
    assert holm(p).tolist() == pytest.approx([0.004, 0.06, 0.08, 0.5])
    win = draw(5, shift=0.2)
    h = DriftMonitor(REFERENCE, features=FEATURES).check(win, at=T0)
    b = DriftMonitor(REFERENCE, features=FEATURES, correction="bonferroni").check(win, at=T0)
    for name in FEATURES:
        assert b[name].corrected_p == pytest.approx(min(1.0, 3 * b[name].p_value))
        assert h[name].corrected_p <= b[name].corrected_p + 1e-12


def test_live_window_accumulation_and_history() -> None:
    mon = DriftMonitor(REFERENCE, features=FEATURES, window_capacity=1000)
    shifted = draw(6, 1500, shift=1.0)
    for row in shifted.to_dict("records"):
        mon.update(row)
    assert len(mon.window) == 1000
    first = mon.check(at=T0)
    assert first.n_window == 1000 and first.alerted_features == ("price",)
    mon.check(draw(7, 1000), at=T0 + timedelta(minutes=5))
    frame = mon.history_frame()
    assert len(frame) == 2 * len(FEATURES)
    assert frame.groupby("at")["alert"].sum().tolist() == [1, 0]


def test_too_few_values_are_not_tested() -> None:
    win = draw(8, 20)
    report = DriftMonitor(REFERENCE, features=FEATURES).check(win, at=T0)
    assert not report.alert and np.isnan(report["price"].p_value)
    with pytest.raises(MonitorInputError, match="nope"):
        DriftMonitor(REFERENCE, features=("nope",))


def alert_report(at: datetime, *, alert: bool = True) -> DriftReport:
    return DriftReport(at, 100, (FeatureDrift("price", 100, 0.5, 1e-9, 1e-9, 0.9, 0.8, alert),))


def test_recalibration_only_when_enabled_alerting_and_debounced() -> None:
    calls: list[int] = []
    hook = DriftAwareRecalibration(True, cooldown=timedelta(minutes=30))
    fired = [
        hook.on_report(alert_report(T0 + timedelta(minutes=m), alert=m != 5), lambda: calls.append(1))
        for m in (0, 5, 10, 29, 30, 31, 70)
    ]
    assert fired == [True, False, False, False, True, False, True]
    assert hook.calls == len(calls) == 3
    off = DriftAwareRecalibration(False)
    assert not off.on_report(alert_report(T0), lambda: calls.append(1))
    assert len(calls) == 3
