from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pandas as pd
import pytest

from events.models import PricingRequest
from feedback.monitors.errors import MonitorInputError
from feedback.monitors.flips import FlipMonitor, compare, input_hash

T0 = datetime(2026, 6, 1, 9, 30, tzinfo=UTC)


def test_twenty_of_a_hundred_flipped_between_versions() -> None:
    a = {f"h{i}": 100.0 + i for i in range(100)}
    b = {k: (v * 1.05 if i % 5 == 0 else v) for i, (k, v) in enumerate(a.items())}
    b.update({f"only_b{i}": 1.0 for i in range(7)})  # not priced by a: not compared
    report = compare(a, b)
    assert report.n_inputs == 100
    assert report.n_flipped == 20
    assert report.rate == 0.2
    assert report.flipped[:2] == ("h0", "h10")


def test_relative_tolerance_and_frame_input() -> None:
    a = pd.DataFrame({"input_hash": ["x", "y", "z", "w"], "price": [100.0, 100.0, 100.0, 100.0]})
    b = [("x", 100.001), ("y", 100.5), ("z", 100.0), ("w", 100.00000001)]  # w: float noise
    assert compare(a, b).flipped == ("x", "y")
    assert compare(a, b, rel_tol=1e-3).flipped == ("y",)
    assert compare(a, b, rel_tol=1e-2).n_flipped == 0
    with pytest.raises(MonitorInputError, match="price"):
        compare(pd.DataFrame({"input_hash": ["x"]}), a)


def test_same_version_over_time() -> None:
    mon = FlipMonitor(rel_tol=1e-4)
    for i in range(100):
        mon.update(f"h{i}", "v1", 100.0)
    for i in range(100):  # second sighting: 20 flip
        mon.update(f"h{i}", "v1", 101.0 if i < 20 else 100.001)
    for i in range(10):  # third sighting of a flipped input does not count twice
        assert not mon.update(f"h{i}", "v1", 102.0)
    mon.update("h0", "v2", 90.0)  # other version: own reference
    mon.update("h0", "v2", 90.0)
    report = mon.report(at=T0)
    assert report.by_version == {"v1": (100, 20), "v2": (1, 0)}
    assert report.rate_of("v1") == 0.2
    assert report.rate == pytest.approx(20 / 101)
    assert report.at == T0


def test_memory_bound_drops_least_recently_seen() -> None:
    mon = FlipMonitor(max_inputs=3)
    for key in ("a", "b", "c", "a", "d"):  # "b" is the least recently seen when "d" arrives
        mon.update(key, "v1", 1.0)
    assert mon.n_tracked == 3
    assert not mon.update("b", "v1", 2.0)  # forgotten: a new reference, not a flip
    assert mon.update("a", "v1", 2.0)


def test_input_hash_ignores_identity_and_sub_day_time_but_not_content() -> None:
    stay = date(2026, 7, 1)
    r1 = PricingRequest(hotel_id="h1", room_type="std", stay_date=stay, event_time=T0)
    r2 = PricingRequest(hotel_id="h1", room_type="std", stay_date=stay, event_time=T0 + timedelta(hours=2))
    r3 = PricingRequest(hotel_id="h1", room_type="std", stay_date=stay, event_time=T0 + timedelta(days=1))
    r4 = PricingRequest(hotel_id="h1", room_type="std", stay_date=stay, event_time=T0, nights=2)
    feats = {"occupancy": 0.5, "searches_1h": None}
    assert r1.request_id != r2.request_id
    assert input_hash(r1, feats) == input_hash(r2, feats)
    assert input_hash(r1, feats) != input_hash(r3, feats)
    assert input_hash(r1, feats) != input_hash(r4, feats)
    assert input_hash(r1, feats) != input_hash(r1, {**feats, "occupancy": 0.51})
    assert input_hash(r1, feats, time_resolution=None) == input_hash(r3, feats, time_resolution=None)
