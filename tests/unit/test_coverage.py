from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from feedback.errors import FeedbackError
from feedback.monitors.coverage import CoverageMonitor
from feedback.monitors.errors import MonitorInputError

T0 = datetime(2026, 6, 1, tzinfo=UTC)
FEATURES = ("a", "b", "c")


def feed(mon: CoverageMonitor, *, hotels: int = 5, rows: int = 200, null_hotel: str | None = None) -> None:
    rng = np.random.default_rng(0)
    for i in range(rows):
        now = T0 + timedelta(seconds=i)
        for h in range(hotels):
            hotel = f"h{h}"
            values: dict[str, float | None] = {name: float(rng.normal()) for name in FEATURES}
            if hotel == null_hotel:
                values["b"] = None
            mon.update(hotel, values, feature_time=now - timedelta(seconds=1), now=now)


def test_feature_forced_to_null_for_one_hotel_shows_full_share_there_only() -> None:
    mon = CoverageMonitor(timedelta(hours=1), timedelta(minutes=5), features=FEATURES)
    feed(mon, null_hotel="h2")
    rep = mon.report()
    assert rep.share("h2", "b") == 1.0
    assert rep.null_share_of("h2", "b") == 1.0
    others = [rep.share(f"h{h}", "b") for h in (0, 1, 3, 4)]
    assert max(others) == 0.0
    assert rep.share("h2", "a") == 0.0
    assert rep.by_feature()["b"] == pytest.approx(0.2)
    assert rep.worst_hotel()["b"] == 1.0


def test_stale_and_missing_and_nan_are_counted() -> None:
    mon = CoverageMonitor(timedelta(hours=1), timedelta(minutes=5), features=FEATURES)
    mon.update("h", {"a": 1.0, "b": float("nan")}, feature_time=T0 - timedelta(minutes=10), now=T0)
    mon.update("h", {"a": 1.0, "b": 2.0, "c": 3.0}, feature_time=T0, now=T0)
    mon.update("h", {"a": 1.0, "b": 2.0, "c": 3.0}, feature_time=None, now=T0)
    rep = mon.report()
    row = rep.to_frame().set_index("feature")
    assert row.loc["a", "stale_share"] == pytest.approx(2 / 3)  # 10 min old, and unknown age
    assert row.loc["b", "null_share"] == pytest.approx(1 / 3)  # NaN
    assert row.loc["c", "null_share"] == pytest.approx(1 / 3)  # missing key
    assert row.loc["b", "missing_share"] == pytest.approx(2 / 3)
    assert int(row.loc["a", "n"]) == 3


def test_window_slides_and_memory_is_bounded() -> None:
    mon = CoverageMonitor(timedelta(minutes=10), timedelta(minutes=5), features=FEATURES, n_buckets=10)
    mon.update("old", {"a": None}, feature_time=T0, now=T0)
    for m in range(1, 30):
        now = T0 + timedelta(minutes=m)
        mon.update("new", {"a": 1.0, "b": 1.0, "c": 1.0}, feature_time=now, now=now)
    rep = mon.report()
    assert rep.hotels == ("new",)
    assert int(rep.counts[0]) == 10  # one read per minute, ten one-minute buckets
    assert mon.n_hotels == 1
    early = mon.report(now=T0 + timedelta(minutes=20))
    assert int(early.counts[0]) == 1  # minutes 20..29 are held; of those only minute 20 is <= now


def test_bad_input_is_named() -> None:
    with pytest.raises(MonitorInputError, match="window"):
        CoverageMonitor(timedelta(0), timedelta(minutes=1))
    mon = CoverageMonitor(timedelta(hours=1), timedelta(minutes=1), features=FEATURES)
    with pytest.raises(FeedbackError, match="now"):
        mon.update("h", {}, feature_time=None, now=datetime(2026, 1, 1))  # noqa: DTZ001
    mon.update("h", {}, feature_time=None, now=T0)
    with pytest.raises(MonitorInputError, match="zzz"):
        mon.report().share("h", "zzz")
