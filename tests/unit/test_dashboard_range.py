"""Every time axis of the dashboard spans the run's own time range when it is given."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import matplotlib.dates as mdates
import numpy as np
import pandas as pd

from feedback.dashboard import drift_figure, flip_figure, stacked_figure, write_dashboard
from feedback.monitors import CoverageMonitor, DriftMonitor, FlipMonitor

START = datetime(2027, 1, 5, 15, tzinfo=UTC)
END = datetime(2027, 4, 20, 17, tzinfo=UTC)
POINTS = [START + timedelta(days=20 * k) for k in range(1, 5)]


def _span(fig: object) -> tuple[datetime, datetime]:
    lo, hi = fig.axes[0].get_xlim()  # type: ignore[attr-defined]
    return mdates.num2date(lo), mdates.num2date(hi)


def _drift() -> list:
    rng = np.random.default_rng(1)
    ref = pd.DataFrame({"a": rng.normal(0, 1, 2000), "b": rng.normal(5, 1, 2000)})
    monitor = DriftMonitor(ref, features=("a", "b"))
    for k, at in enumerate(POINTS):
        monitor.check(pd.DataFrame({"a": rng.normal(0.3 * k, 1, 800), "b": rng.normal(5, 1, 800)}), at=at)
    return list(monitor.history)


def _flips() -> list:
    monitor, out = FlipMonitor(), []
    for k, at in enumerate(POINTS):
        monitor.update(f"x{k}", "v1", 100.0)
        monitor.update(f"x{k}", "v1", 101.0 if k % 2 else 100.0)
        out.append(monitor.report(at=at))
    return out


def test_every_time_axis_spans_the_run() -> None:
    shares = [(at, {"light": 0.7, "rules": 0.3}) for at in POINTS]
    figures = [drift_figure(_drift(), span=(START, END)), flip_figure(_flips(), span=(START, END)),
               stacked_figure(shares, "tiers", "share", span=(START, END))]
    for fig in figures:
        lo, hi = _span(fig)
        assert lo == START and hi == END
    lo, hi = _span(stacked_figure(shares, "tiers", "share"))  # without the run's range: the points' own
    assert lo == POINTS[0] and hi == POINTS[-1]


def test_the_page_names_the_runs_range(tmp_path: Path) -> None:
    cov = CoverageMonitor(timedelta(hours=1), timedelta(minutes=5), features=("a",))
    cov.update("h1", {"a": 1.0}, feature_time=START, now=START)
    page = write_dashboard(tmp_path / "d.html", coverage=cov.report(), drift_history=_drift(), flips=_flips(),
                           tier_shares=[(at, {"light": 1.0}) for at in POINTS], latencies_ms={"light": [1.0, 2.0]},
                           rollout_weights_history=[(POINTS[1], {"candidate": 0.1, "incumbent": 0.9})],
                           time_range=(START, END), generated_at=END)
    assert "run 2027-01-05 15:00 .. 2027-04-20 17:00 UTC" in page.read_text(encoding="utf-8")
