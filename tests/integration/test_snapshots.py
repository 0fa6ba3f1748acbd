"""Snapshots through Feast over the offline store written by the offline writer."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from events.catalog import ALL_FEATURES, VIEWS
from features.config import FeaturesConfig
from features.errors import ImpossibleValueError, SnapshotError
from features.offline_writer import OfflineWriter
from features.snapshots import create_snapshot, list_snapshots, load_snapshot, show
from features.store import build_store
from infra.config import StackConfig
from tests.integration._features_helpers import T0_MS, features_config, make_row

pytestmark = pytest.mark.integration
HOUR_MS = 3_600_000


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


@pytest.fixture
def config(stack: StackConfig, key_prefix: str, tmp_path: Path) -> FeaturesConfig:
    return features_config(stack, key_prefix, tmp_path)


def _history(hotels: int, versions: range) -> list:
    return [make_row(v, f"h{h}", version=k, offset_ms=k * HOUR_MS) for v in VIEWS for h in range(hotels)
            for k in versions]


def test_snapshot_survives_appends_bit_for_bit_and_is_point_in_time(config: FeaturesConfig) -> None:
    writer = OfflineWriter(config.offline)
    writer.write_rows(_history(3, range(1, 4)), offsets={"features.v1": {0: (0, 53)}})
    store = build_store(config)
    as_of = _at(T0_MS + 3 * HOUR_MS + 10)
    steps: list[tuple[str, int, int]] = []
    manifest = create_snapshot(store, as_of=as_of, root=config.snapshots, on_progress=lambda *a: steps.append(a))
    frozen = load_snapshot(config.snapshots, manifest.id)
    assert len(steps) == len(VIEWS) and steps[-1][1:] == (6, 6)
    assert manifest.row_count == len(frozen) == 3
    assert set(ALL_FEATURES) <= set(frozen.columns)
    assert frozen["searches_24h"].tolist() == [3.0, 3.0, 3.0]  # latest version at as_of
    assert frozen["booking_pace_7d"].iloc[0] == pytest.approx(3.25 / max(3.0 - 3.25, 1.0))
    assert manifest.kafka_offsets[0]["last"] == 53 and len(manifest.sources) == len(VIEWS)
    assert manifest.coverage["occupancy"] == 0.0

    # later rows (after as_of) and a new key arrive; the frozen snapshot and a rebuild at as_of do not move
    writer.write_rows(_history(4, range(4, 6)))
    again = load_snapshot(config.snapshots, manifest.id)
    pd.testing.assert_frame_equal(again, frozen)
    rebuilt = create_snapshot(store, as_of=as_of, root=config.snapshots)
    assert (rebuilt.id, rebuilt.data_sha256) == (manifest.id, manifest.data_sha256)
    later = create_snapshot(store, as_of=_at(T0_MS + 6 * HOUR_MS), root=config.snapshots)
    assert later.id != manifest.id and later.row_count == 4
    assert [m.id for m in list_snapshots(config.snapshots)] == [manifest.id, later.id]
    assert load_snapshot(config.snapshots, later.id)["searches_24h"].tolist() == [5.0] * 4


def test_a_view_with_only_stale_rows_leaves_nulls_not_a_missing_row(config: FeaturesConfig) -> None:
    # stay_1h (ttl 2h) was last updated 10h before the entity time; the other views are fresh
    rows = [make_row("stay_1h", "h1", version=1)]
    rows += [make_row(v, "h1", version=2, offset_ms=10 * HOUR_MS) for v in VIEWS if v != "stay_1h"]
    OfflineWriter(config.offline).write_rows(rows)
    manifest = create_snapshot(build_store(config), as_of=_at(T0_MS + 11 * HOUR_MS), root=config.snapshots)
    frame = load_snapshot(config.snapshots, manifest.id)
    assert len(frame) == 1
    assert frame["searches_1h"].isna().all() and frame["searches_24h"].tolist() == [2.0]
    assert manifest.coverage["searches_1h"] == 1.0


def test_snapshot_refuses_an_impossible_value_and_late_entities(config: FeaturesConfig) -> None:
    good = make_row("stay_inventory", "h1", version=3)
    bad = dataclasses.replace(make_row("stay_inventory", "h2", version=4),
                              features={"rooms_left": 2.0, "capacity": 10.0, "occupancy": 1.5})
    OfflineWriter(config.offline).write_rows([good, bad])
    store = build_store(config)
    with pytest.raises(ImpossibleValueError) as info:
        create_snapshot(store, as_of=_at(T0_MS + HOUR_MS), root=config.snapshots)
    assert (info.value.feature, info.value.value, info.value.key["hotel_id"]) == ("occupancy", 1.5, "h2")
    assert list_snapshots(config.snapshots) == []

    entities = pd.DataFrame({"hotel_id": ["h1"], "room_type": ["std"], "stay_date": ["2026-12-24"],
                             "event_timestamp": [pd.Timestamp(T0_MS + 2 * HOUR_MS, unit="ms", tz="UTC")],
                             "booked": [1]})
    with pytest.raises(SnapshotError, match="after as_of"):
        create_snapshot(store, as_of=_at(T0_MS + HOUR_MS), entities=entities, root=config.snapshots)
    manifest = create_snapshot(store, as_of=_at(T0_MS + 3 * HOUR_MS), entities=entities, root=config.snapshots)
    frame = load_snapshot(config.snapshots, manifest.id)
    assert frame["booked"].tolist() == [1] and frame["occupancy"].tolist() == [0.03]
    assert show(config.snapshots, manifest.id).row_count == 1
