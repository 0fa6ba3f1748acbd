"""Offline store compaction: fewer files, the same rows, and a half-done compaction finished by the next."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from features.compaction import compact, partitions
from features.offline_writer import MANIFESTS, OfflineWriter, read_features_v1
from features.rows import parse_row

DAY_MS = 86_400_000


def _replay(root: Path, flushes: int = 60, days: int = 5) -> None:
    writer = OfflineWriter(root)
    for f in range(flushes):
        at = 1764460800000 + f
        writer.write_rows([parse_row({"hotel_id": f"h{i % 3}", "view": "stay_14d", "room_type": "std",
                                      "stay_date": "2026-12-24", "feature_time": at + (i % days) * DAY_MS,
                                      "version": f * 100 + i, "publish_time": 1764460800000,
                                      "features": {"bookings_14d": float(i)}}) for i in range(20)])


def _frame(root: Path):  # noqa: ANN202
    return read_features_v1(root).sort_values(["version"]).reset_index(drop=True)


def test_a_replay_of_many_flushes_ends_in_one_file_per_partition_with_every_row(tmp_path: Path) -> None:
    _replay(tmp_path)
    before = _frame(tmp_path)
    result = compact(tmp_path, target_bytes=64 << 20)
    assert result.files_before == 60 * 5 * 2 and result.files_after == 5 * 2 == len(partitions(tmp_path))
    assert _frame(tmp_path).equals(before) and len(before) == 60 * 20
    assert compact(tmp_path).files_after == 10  # nothing left to merge


def test_a_small_target_splits_a_partition_into_several_files(tmp_path: Path) -> None:
    _replay(tmp_path, flushes=40, days=1)
    part = next(iter(sorted((tmp_path / "features_v1").glob("date=*/part-*.parquet"))))
    result = compact(tmp_path, target_bytes=part.stat().st_size * 10)
    merged = len(list(part.parent.glob("part-*.parquet")))  # 40 parts of about one size, 10 a file
    assert 4 <= merged <= 5 and result.files_after < 2 * 40
    assert len(_frame(tmp_path)) == 40 * 20


def test_a_compaction_interrupted_after_the_rename_is_finished_by_the_next(tmp_path: Path) -> None:
    _replay(tmp_path, flushes=3, days=1)
    before = _frame(tmp_path)
    directory = next(iter(sorted((tmp_path / "features_v1").glob("date=*"))))
    old = sorted(directory.glob("part-*.parquet"))
    merged = directory / "part-merged.parquet"
    shutil.copy(old[0], merged)  # stands in for the merged file: in place, the parts not yet deleted
    journal = tmp_path / MANIFESTS / ".compact-x.json"
    journal.write_text(json.dumps({"new": str(merged.relative_to(tmp_path)),
                                   "old": [str(p.relative_to(tmp_path)) for p in old[1:]]}))
    compact(tmp_path, target_bytes=1)  # finishes the journal; a 1-byte target merges nothing else
    assert not journal.exists() and sorted(directory.glob("part-*.parquet")) == sorted([old[0], merged])
    assert len(_frame(tmp_path)) == len(before) - 2 * 20 + 20
