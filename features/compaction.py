"""Offline store compaction: the small parquet parts of a date partition merged into files of a target size.

The offline writer writes one part per date partition and layout at each flush, so a historical
replay that spans years leaves thousands of small parts (808k rows became 11,004 files of ~6 kB).
:func:`compact` rewrites each partition's parts smaller than the target into as few files as fit
``target_bytes`` each (parquet sizes on disk; rows are kept as they are, in part order), and
deletes the parts it merged. Snapshots are copies (:mod:`features.snapshots`), so none refers to a
part. A compaction that stops half way is finished by the next one: before it renames a merged
file into place it writes a journal (``_manifests/.compact-<id>.json``: the new file and the parts
it replaces); a journal found at start is completed first (the parts it names are deleted when the
new file exists, else the journal is dropped and the parts stay).

Example:
    >>> import tempfile
    >>> from features.offline_writer import OfflineWriter, read_features_v1
    >>> from features.rows import parse_row
    >>> root = tempfile.mkdtemp()
    >>> for i in range(3):
    ...     _ = OfflineWriter(root).write_rows([parse_row({"hotel_id": "h1", "view": "hotel_stats",
    ...         "feature_time": 1764460800000 + i, "version": i, "publish_time": 1764460800000,
    ...         "features": {"hotel_searches_24h": float(i)}})])
    >>> result = compact(root, target_bytes=64 << 20)
    >>> result.files_before, result.files_after, len(read_features_v1(root))
    (6, 2, 3)
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from features.offline_writer import DATASET, MANIFESTS
from features.raw_events import EVENTS

DEFAULT_TARGET_BYTES = 64 << 20
"""64 MiB: tens of MB per file, the size analysts' engines (DuckDB, Druid) read well."""


@dataclass(frozen=True)
class Compaction:
    """Parts in the partitions compacted before and after, and partitions touched."""

    files_before: int
    files_after: int
    partitions: int


def partitions(root: Path) -> list[Path]:
    """Every date partition of both layouts and of the raw events under ``root`` (the history is one file a date)."""
    layouts = [root / DATASET, *(root / "feast").glob("*"), root / EVENTS]
    return sorted(p for layout in layouts for p in layout.glob("date=*"))


def compact(root: Path | str, *, target_bytes: int = DEFAULT_TARGET_BYTES,
            progress: Callable[[int, int], None] | None = None) -> Compaction:
    """Merge the small parts of every partition under ``root`` into files of up to ``target_bytes``."""
    if target_bytes <= 0:
        msg = f"target_bytes: got {target_bytes}, expected a positive size in bytes"
        raise ValueError(msg)
    root = Path(root)
    _finish_journals(root)
    before = after = touched = 0
    every = partitions(root)
    for i, directory in enumerate(every):
        small = sorted((p for p in directory.glob("part-*.parquet") if p.stat().st_size < target_bytes),
                       key=lambda p: p.name)
        large = len(list(directory.glob("part-*.parquet"))) - len(small)
        bins = _bins(small, target_bytes)
        merged = [b for b in bins if len(b) > 1]
        before += len(small) + large
        after += large + len(small) - sum(len(b) - 1 for b in merged)
        for group in merged:
            _merge(root, directory, group)
        touched += bool(merged)
        if progress is not None:
            progress(i + 1, len(every))
    return Compaction(before, after, touched)


def _bins(parts: list[Path], target_bytes: int) -> list[list[Path]]:
    bins: list[list[Path]] = []
    size = 0
    for part in parts:
        part_size = part.stat().st_size
        if not bins or size + part_size > target_bytes:
            bins.append([])
            size = 0
        bins[-1].append(part)
        size += part_size
    return bins


def _merge(root: Path, directory: Path, parts: list[Path]) -> Path:
    merged_id = uuid.uuid4().hex
    table = pa.concat_tables([pq.read_table(p) for p in parts], promote_options="default")
    tmp = directory / f".part-{merged_id}.tmp"
    target = directory / f"part-{merged_id}.parquet"
    pq.write_table(table, tmp, compression="zstd")
    journal = root / MANIFESTS / f".compact-{merged_id}.json"
    journal.parent.mkdir(parents=True, exist_ok=True)
    journal.write_text(json.dumps({"new": str(target.relative_to(root)),
                                   "old": [str(p.relative_to(root)) for p in parts]}))
    tmp.replace(target)
    for part in parts:
        part.unlink(missing_ok=True)
    journal.unlink()
    return target


def _finish_journals(root: Path) -> None:
    for journal in sorted((root / MANIFESTS).glob(".compact-*.json")):
        body = json.loads(journal.read_text())
        if (root / body["new"]).exists():
            for old in body["old"]:
                (root / old).unlink(missing_ok=True)
        journal.unlink()
