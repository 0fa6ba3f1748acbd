"""Snapshots without Feast: freezing, content addressing, integrity, validation and diffs."""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from events.catalog import ALL_FEATURES
from features.errors import ImpossibleValueError, SnapshotError, SnapshotIntegrityError
from features.rows import parse_row
from features.snapshots import diff, diff_frames, freeze, list_snapshots, load_snapshot, normalise, show
from features.validation import check_frame

AS_OF = datetime(2026, 1, 1, tzinfo=UTC)


def _frame(n: int = 20, *, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "hotel_id": [f"h{i % 5}" for i in range(n)],
            "room_type": ["std"] * n,
            "stay_date": [f"2026-02-{1 + i:02d}" for i in range(n)],
            "event_timestamp": pd.date_range("2025-12-01", periods=n, freq="h", tz="UTC"),
        }
    )
    for name in ALL_FEATURES:
        frame[name] = rng.integers(0, 20, n).astype(float)
    frame["occupancy"] = rng.uniform(0, 1, n)
    for price in ("mean_price_shown_24h", "comp_rate_median_24h", "comp_rate_min_24h"):
        frame[price] = rng.uniform(50, 200, n)
    frame.loc[::4, "bookings_1h"] = np.nan
    return frame


def test_freeze_is_content_addressed_and_load_returns_the_same_bits(tmp_path: Path) -> None:
    frame = _frame()
    m1 = freeze(frame, root=tmp_path, as_of=AS_OF, definitions_hash="d1")
    shuffled = frame.sample(frac=1.0, random_state=3)[list(reversed(frame.columns))]
    m2 = freeze(shuffled, root=tmp_path, as_of=AS_OF, definitions_hash="d1")
    assert m1.id == m2.id and m1.data_sha256 == m2.data_sha256 and len(m1.id) == 16
    assert freeze(frame, root=tmp_path, as_of=AS_OF, definitions_hash="d2").id != m1.id  # definitions count
    loaded = load_snapshot(tmp_path, m1.id)
    pd.testing.assert_frame_equal(loaded, normalise(frame))
    assert m1.row_count == 20 and m1.coverage["bookings_1h"] == 0.25 and m1.coverage["occupancy"] == 0.0
    assert m1.time_range == ("2025-12-01T00:00:00+00:00", "2025-12-01T19:00:00+00:00")
    mode = stat.S_IMODE(os.stat(tmp_path / m1.id / "data.parquet").st_mode)
    assert mode == 0o444
    assert [m.id for m in list_snapshots(tmp_path)] == [m1.id, freeze(frame, root=tmp_path, as_of=AS_OF,
                                                                       definitions_hash="d2").id]
    assert show(tmp_path, m1.id) == m1


def test_a_tampered_snapshot_is_refused_on_load(tmp_path: Path) -> None:
    manifest = freeze(_frame(), root=tmp_path, as_of=AS_OF, definitions_hash="d")
    path = tmp_path / manifest.id / "data.parquet"
    path.chmod(0o644)
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(SnapshotIntegrityError, match=manifest.data_sha256):
        load_snapshot(tmp_path, manifest.id)
    with pytest.raises(SnapshotError, match="not found"):
        load_snapshot(tmp_path, "0" * 16)


@pytest.mark.parametrize(
    ("feature", "value", "expected"),
    [
        ("occupancy", 1.2, "a share in [0, 1]"),
        ("bookings_24h", -1.0, "a finite count >= 0"),
        ("mean_price_shown_24h", float("inf"), "a finite price > 0"),
        ("comp_rate_min_24h", 0.0, "a finite price > 0"),
    ],
)
def test_impossible_values_are_refused_with_feature_value_and_key(
    tmp_path: Path, feature: str, value: float, expected: str
) -> None:
    frame = _frame()
    frame.loc[7, feature] = value
    with pytest.raises(ImpossibleValueError) as info:
        freeze(frame, root=tmp_path, as_of=AS_OF, definitions_hash="d")
    err = info.value
    assert (err.feature, err.value, err.expected) == (feature, value, expected)
    assert err.key["stay_date"] == "2026-02-08" and err.key["hotel_id"] == "h2"
    assert not list(tmp_path.glob("*/manifest.json"))  # nothing frozen


def test_check_frame_lets_nulls_through() -> None:
    check_frame(pd.DataFrame({"occupancy": [np.nan, 0.0, 1.0], "rooms_left": [None, 0.0, 3.0]}), keys=())


def test_diff_counts_rows_schema_and_coverage(tmp_path: Path) -> None:
    a = _frame(20)
    b = _frame(20).iloc[2:].copy()  # two rows removed
    b.loc[10, "searches_24h"] = 999.0  # one changed
    extra = _frame(22).iloc[20:].copy()  # two added (new stay dates)
    b = pd.concat([b, extra])
    b.loc[b.index[:6], "views_7d"] = np.nan  # six more changed (rows 2..7)
    ma = freeze(a, root=tmp_path, as_of=AS_OF, definitions_hash="d")
    mb = freeze(b, root=tmp_path, as_of=AS_OF, definitions_hash="d")
    d = diff(ma.id, mb.id, root=tmp_path)
    assert (d.rows_added, d.rows_removed) == (2, 2)
    assert d.rows_changed == 7
    assert d.coverage_delta["views_7d"] == pytest.approx(6 / 20 - 0.0)
    renamed = diff_frames(a, a.rename(columns={"capacity": "cap"}).assign(cap=a["capacity"].astype("float32")))
    assert renamed.columns_added == ("cap",) and renamed.columns_removed == ("capacity",)
    assert renamed.rows_changed == 0


def test_rows_round_trip_through_json() -> None:
    raw = (b'{"hotel_id":"h1","view":"hotel_stats","room_type":null,"stay_date":null,"feature_time":5,'
           b'"version":6,"publish_time":7,"features":{"hotel_views_24h":2}}')
    row = parse_row(raw)
    assert parse_row(row.to_json()) == row and row.key == ("h1",) and row.features["hotel_views_24h"] == 2.0
