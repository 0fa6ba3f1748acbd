"""The dashboard's drift panel spans the checks' own time range (matplotlib widens one point to +-2 years)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import matplotlib.dates as mdates
import numpy as np
import pandas as pd

from feedback.dashboard import drift_figure
from feedback.monitors.drift import DriftMonitor

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def _span(history: list) -> tuple[datetime, datetime]:
    lo, hi = drift_figure(history).axes[0].get_xlim()
    return mdates.num2date(lo), mdates.num2date(hi)


def test_the_drift_panel_shows_the_run_and_not_years_around_it() -> None:
    rng = np.random.default_rng(0)
    mon = DriftMonitor(pd.DataFrame({"x": rng.normal(size=2000)}))
    one = [mon.check(pd.DataFrame({"x": rng.normal(size=500)}), at=T0)]
    assert _span(one) == (T0 - timedelta(hours=1), T0 + timedelta(hours=1))
    three_days = [mon.check(pd.DataFrame({"x": rng.normal(size=500)}), at=T0 + timedelta(days=d)) for d in range(4)]
    assert _span(three_days) == (T0, T0 + timedelta(days=3))
