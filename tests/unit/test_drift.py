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
    psi_noise_limit,
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
    assert report["price"].psi > report["price"].psi_limit == 0.2  # at 5,000 x 5,000 the material bar decides
    assert report["occupancy"].psi < 0.02


def test_unchanged_window_does_not_alert() -> None:
    report = DriftMonitor(REFERENCE, features=FEATURES).check(draw(2), at=T0)
    assert not report.alert
    assert all(item.psi < 0.02 for item in report)


def _thirty(seed: int, n: int, *, shift: float = 0.0) -> pd.DataFrame:
    """Thirty features of mixed shapes; ``shift`` moves the first by that many stds."""
    rng = np.random.default_rng(seed)
    cols = {f"n{i}": rng.normal(0.0, 1.0 + i / 10, n) for i in range(10)}
    cols |= {f"p{i}": rng.poisson(1.0 + i, n).astype(float) for i in range(10)}  # discrete, with ties
    cols |= {f"g{i}": rng.gamma(1.0 + i / 3, 2.0, n) for i in range(10)}
    cols["n0"] = cols["n0"] + shift
    return pd.DataFrame(cols)


def test_thirty_features_at_ten_thousand_rows_silent_on_one_distribution_fires_on_a_shift() -> None:
    reference = _thirty(1, 10_000)
    mon = DriftMonitor(reference)
    assert len(mon.features) == 30
    quiet = [mon.check(_thirty(100 + i, 10_000), at=T0 + timedelta(hours=i)) for i in range(4)]
    assert not any(report.alert for report in quiet)
    assert max(item.psi for report in quiet for item in report) < 0.01  # noise at this size: far below 0.2
    shifted = mon.check(_thirty(200, 10_000, shift=0.5), at=T0 + timedelta(days=1))
    assert shifted.alerted_features == ("n0",)


def test_false_alarm_rate_over_100_unchanged_windows(record_property: Callable[[str, object], None]) -> None:
    rate = false_alarm_rate(REFERENCE, lambda i: draw([99, i], 2000), n_windows=100, features=FEATURES)
    record_property("false_alarm_rate", rate)
    assert rate <= 0.01


def test_small_windows_raise_the_limit_above_the_noise() -> None:
    """At 60 rows, an unchanged feature's PSI often passes 0.2 by chance: the calibrated limit does not alert."""
    mon = DriftMonitor(REFERENCE, features=FEATURES)
    reports = [mon.check(draw([7, i], 60), at=T0 + timedelta(minutes=i)) for i in range(200)]
    above_material = sum(item.psi > 0.2 for r in reports for item in r)
    alarms = sum(r.alert for r in reports)
    assert above_material > 20  # a fixed PSI threshold would fire on these
    assert alarms <= 0.01 * len(reports)  # alpha, for any of the three features in a check
    # the chi-square law's tail is too thin at 6 values a bin: the simulated limit is far above it
    assert reports[0]["price"].psi_limit > 2 * psi_noise_limit(5000, 60, 10, 0.01 / 3)  # seeded: 0.91 vs 0.42


def test_a_trivial_shift_on_a_huge_window_is_not_material() -> None:
    big_ref = draw(3, 200_000)
    report = DriftMonitor(big_ref, features=("price",)).check(draw(4, 200_000, shift=0.03), at=T0)
    item = report["price"]
    assert item.wasserstein < 0.05 and item.psi < 0.01  # KS would call this significant at p << 0.01
    assert not item.alert


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
    assert not report.alert and np.isnan(report["price"].psi)
    with pytest.raises(MonitorInputError, match="nope"):
        DriftMonitor(REFERENCE, features=("nope",))


def alert_report(at: datetime, *, alert: bool = True) -> DriftReport:
    return DriftReport(at, 100, (FeatureDrift("price", 100, 0.9, 0.8, 0.2, alert),))


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
