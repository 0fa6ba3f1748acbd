"""Versioned training snapshots: point-in-time-correct frames from Feast, frozen and content-addressed.

A snapshot is ``<root>/<id>/data.parquet`` plus ``<root>/<id>/manifest.json``, both read-only
(0444). ``id`` is the first 16 hex digits of ``sha256(data sha256 + ":" + definitions hash)``, so
the same data under the same feature definitions is the same snapshot, and loading checks the
bytes against the manifest before returning them.

The frame is built by Feast's ``get_historical_features``, one call per view joined back on a
row id: Feast 0.67's file (dask) offline store drops an entity row from the whole result when a
view holds rows for its key but none inside the TTL (``_filter_ttl`` filters after the left
join), and a per-view call keeps such a row with nulls for that view only.

Example (no Feast needed to freeze, load and compare frames)::

    manifest = freeze(frame, root=root, as_of=as_of, definitions_hash=h)
    frame2 = load_snapshot(root, manifest.id)
    diff(manifest.id, other.id, root=root).rows_changed
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from feast import FeatureStore, FeatureView, FileSource

from events.catalog import ALL_FEATURES, DERIVED_FEATURES, STAY_KEYS, VIEWS, derive
from features.errors import SnapshotError, SnapshotIntegrityError
from features.offline_writer import read_manifests
from features.store import TIMESTAMP_FIELD, definitions_hash
from features.validation import check_frame

ROW_KEYS: tuple[str, ...] = (*STAY_KEYS, TIMESTAMP_FIELD)
_ROW_ID = "__snapshot_row"
_VIEW_ROW = "__view_row"
_READ_ONLY = 0o444
Progress = Callable[[str, int, int], None]
"""``on_progress(step, done, total)``: the library never prints; a CLI may draw a bar."""


@dataclass(frozen=True)
class Manifest:
    """What a snapshot holds and where it came from."""

    id: str
    data_sha256: str
    definitions_hash: str
    as_of: str
    time_range: tuple[str | None, str | None]
    row_count: int
    columns: dict[str, str]
    coverage: dict[str, float]
    sources: tuple[str, ...] = ()
    kafka_offsets: tuple[dict[str, Any], ...] = ()
    project: str | None = None
    created_at: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        body = json.loads(text)
        body["time_range"] = tuple(body["time_range"])
        body["sources"] = tuple(body["sources"])
        body["kafka_offsets"] = tuple(body["kafka_offsets"])
        return cls(**body)


@dataclass(frozen=True)
class SnapshotDiff:
    """How snapshot ``b`` differs from ``a`` (rows matched on hotel_id, room_type, stay_date, event_timestamp)."""

    a: str
    b: str
    rows_added: int
    rows_removed: int
    rows_changed: int
    columns_added: tuple[str, ...]
    columns_removed: tuple[str, ...]
    dtype_changes: dict[str, tuple[str, str]] = field(default_factory=dict)
    coverage_delta: dict[str, float] = field(default_factory=dict)


def normalise(frame: pd.DataFrame) -> pd.DataFrame:
    """Fixed column order and dtypes, rows sorted by key and time: equal data gives equal bytes."""
    missing = [c for c in ROW_KEYS if c not in frame.columns]
    if missing:
        msg = f"snapshot frame lacks columns {missing}; expected {list(ROW_KEYS)} plus features"
        raise SnapshotError(msg)
    out = frame.copy()
    for name in ALL_FEATURES:
        out[name] = pd.to_numeric(out[name], errors="raise").astype("float64") if name in out else float("nan")
    for key in STAY_KEYS:
        out[key] = out[key].astype(str)
    out[TIMESTAMP_FIELD] = pd.to_datetime(out[TIMESTAMP_FIELD], utc=True).astype("datetime64[us, UTC]")
    extra = sorted(c for c in out.columns if c not in ROW_KEYS and c not in ALL_FEATURES and c != _ROW_ID)
    out = out[[*ROW_KEYS, *extra, *ALL_FEATURES]]
    return out.sort_values(list(ROW_KEYS), kind="stable").reset_index(drop=True)


def coverage(frame: pd.DataFrame) -> dict[str, float]:
    """Share of nulls per feature (0.0: always present)."""
    n = max(len(frame), 1)
    return {name: round(float(frame[name].isna().sum()) / n, 6) for name in ALL_FEATURES if name in frame}


def freeze(
    frame: pd.DataFrame,
    *,
    root: Path | str,
    as_of: datetime,
    definitions_hash: str,
    sources: Sequence[str] = (),
    kafka_offsets: Sequence[dict[str, Any]] = (),
    project: str | None = None,
) -> Manifest:
    """Validate, normalise and write a frame as an immutable snapshot; returns its manifest.

    Freezing the same data under the same definitions again returns the existing manifest.

    Raises:
        features.errors.ImpossibleValueError: a feature value breaks its physical bounds.
    """
    data = normalise(frame)
    check_frame(data, keys=ROW_KEYS)
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=root, prefix=".freeze-", suffix=".parquet")
    os.close(fd)
    tmp = Path(tmp_name)
    pq.write_table(pa.Table.from_pandas(data, preserve_index=False), tmp, compression="zstd")
    data_sha = _sha256(tmp)
    snapshot_id = hashlib.sha256(f"{data_sha}:{definitions_hash}".encode()).hexdigest()[:16]
    target = root / snapshot_id
    if (target / "manifest.json").exists():
        tmp.unlink()
        return show(root, snapshot_id)
    times = data[TIMESTAMP_FIELD]
    manifest = Manifest(
        id=snapshot_id,
        data_sha256=data_sha,
        definitions_hash=definitions_hash,
        as_of=as_of.astimezone(UTC).isoformat(),
        time_range=(times.min().isoformat(), times.max().isoformat()) if len(data) else (None, None),
        row_count=len(data),
        columns={c: str(t) for c, t in data.dtypes.items()},
        coverage=coverage(data),
        sources=tuple(sources),
        kafka_offsets=tuple(kafka_offsets),
        project=project,
        created_at=datetime.now(tz=UTC).isoformat(),
    )
    target.mkdir(parents=True, exist_ok=True)
    tmp.replace(target / "data.parquet")
    (target / "manifest.json").write_text(manifest.to_json())
    for name in ("data.parquet", "manifest.json"):
        (target / name).chmod(_READ_ONLY)
    return manifest


def create_snapshot(
    store: FeatureStore,
    *,
    as_of: datetime,
    entities: pd.DataFrame | None = None,
    root: Path | str,
    on_progress: Progress | None = None,
) -> Manifest:
    """Build a point-in-time-correct training frame through Feast and freeze it.

    Args:
        store: the Feast store (its feature views' file sources are the offline store).
        as_of: nothing after this instant is used; entity timestamps must not exceed it.
        entities: rows with ``hotel_id, room_type, stay_date, event_timestamp`` (extra columns,
            labels for instance, are kept). None: every stay key seen up to ``as_of``, at its
            latest feature time.
        root: snapshot directory.
        on_progress: called as ``(view, done, total)`` after each view's join.

    Raises:
        SnapshotError: naive ``as_of``, entity rows after ``as_of``, or no rows at all.
        features.errors.ImpossibleValueError: see :func:`freeze`.
    """
    if as_of.tzinfo is None:
        msg = f"as_of {as_of!r} is naive; expected a timezone-aware datetime"
        raise SnapshotError(msg)
    views = [v for v in store.list_feature_views() if v.name in VIEWS]
    sources, offline_root = _source_files(views)
    entity_df = _entities(views, offline_root, as_of) if entities is None else _checked(entities, as_of)
    frame = entity_df.copy()
    for i, view in enumerate(views):
        present = _with_rows(view, entity_df)  # an entity without rows in the view stays null
        if len(present):
            frame = frame.merge(_join_view(store, view, present), on=_ROW_ID, how="left")
        if on_progress is not None:
            on_progress(view.name, i + 1, len(views))
    _add_derived(frame)
    return freeze(
        frame,
        root=root,
        as_of=as_of,
        definitions_hash=definitions_hash(views),
        sources=sources,
        kafka_offsets=_offsets_of(offline_root, sources),
        project=store.project,
    )


def _view_dir(view: FeatureView) -> Path:
    source = view.batch_source
    if not isinstance(source, FileSource):
        msg = f"feature view {view.name!r} has batch source {type(source).__name__}; expected a FileSource"
        raise SnapshotError(msg)
    return Path(source.path)


def _join_view(store: FeatureStore, view: FeatureView, entity_df: pd.DataFrame) -> pd.DataFrame:
    """``view``'s features as of each entity row, by row id.

    Feast's dask join answers one of several entity rows with the same key and time and leaves the
    others null (which one depends on partitioning): a hotel view's key is shared by every stay of
    the hotel. So each (key, time) is asked once and the answer given to all its rows.
    """
    keys, names = list(view.join_keys), [f.name for f in view.features]
    rows = entity_df[[_ROW_ID, *keys, TIMESTAMP_FIELD]]
    unique = rows.drop_duplicates([*keys, TIMESTAMP_FIELD]).rename(columns={_ROW_ID: _VIEW_ROW})
    link = rows.merge(unique, on=[*keys, TIMESTAMP_FIELD])[[_ROW_ID, _VIEW_ROW]]
    refs = [f"{view.name}:{name}" for name in names]
    joined = store.get_historical_features(entity_df=unique, features=refs).to_df()
    return link.merge(joined[[_VIEW_ROW, *names]], on=_VIEW_ROW)[[_ROW_ID, *names]]


def _with_rows(view: FeatureView, entity_df: pd.DataFrame) -> pd.DataFrame:
    """The entity rows whose key has rows in ``view``: Feast's dask join fails on a key with none.

    (Its created-timestamp column is then null for that entity, and dask cannot sort on it:
    ``NotImplementedError: Divisions calculation failed for non-numeric column 'version_time'``.)
    """
    keys = list(view.join_keys)
    files = sorted(_view_dir(view).glob("date=*/part-*.parquet"))
    if not files:
        return entity_df.iloc[0:0]
    held = pd.concat([pq.read_table(p, columns=keys).to_pandas() for p in files]).drop_duplicates()
    wanted = pd.MultiIndex.from_frame(entity_df[keys].astype(str))
    return entity_df[wanted.isin(pd.MultiIndex.from_frame(held.astype(str)))]


def _source_files(views: list[FeatureView]) -> tuple[list[str], Path]:
    dirs = [_view_dir(v) for v in views]
    offline_root = dirs[0].parent.parent
    files = sorted(p for d in dirs for p in d.glob("date=*/part-*.parquet"))
    return [p.relative_to(offline_root).as_posix() for p in files], offline_root


def _entities(views: list[FeatureView], offline_root: Path, as_of: datetime) -> pd.DataFrame:
    frames = []
    for view in views:
        if tuple(view.join_keys) != STAY_KEYS:
            continue
        for path in sorted(_view_dir(view).glob("date=*/part-*.parquet")):
            frames.append(pq.read_table(path, columns=[*STAY_KEYS, TIMESTAMP_FIELD]).to_pandas())
    rows = pd.concat(frames) if frames else pd.DataFrame(columns=[*STAY_KEYS, TIMESTAMP_FIELD])
    rows = rows[pd.to_datetime(rows[TIMESTAMP_FIELD], utc=True) <= pd.Timestamp(as_of)]
    if rows.empty:
        msg = f"no stay rows at or before as_of {as_of.isoformat()} under {offline_root}; nothing to snapshot"
        raise SnapshotError(msg)
    latest = rows.groupby(list(STAY_KEYS), as_index=False)[TIMESTAMP_FIELD].max()
    return _with_row_id(latest)


def _checked(entities: pd.DataFrame, as_of: datetime) -> pd.DataFrame:
    missing = [c for c in ROW_KEYS if c not in entities.columns]
    if missing:
        msg = f"entities lack columns {missing}; expected {list(ROW_KEYS)}"
        raise SnapshotError(msg)
    times = pd.to_datetime(entities[TIMESTAMP_FIELD], utc=True)
    late = times > pd.Timestamp(as_of)
    if late.any():
        i = int(late.to_numpy().nonzero()[0][0])
        msg = f"entities row {i}: event_timestamp {times.iloc[i].isoformat()} is after as_of {as_of.isoformat()}"
        raise SnapshotError(msg)
    # Feast's dask join keeps one row per (key, timestamp): duplicates would come back empty
    unique = entities.assign(**{TIMESTAMP_FIELD: times}).drop_duplicates(list(ROW_KEYS))
    return _with_row_id(unique.reset_index(drop=True))


def _with_row_id(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.copy()
    out[TIMESTAMP_FIELD] = pd.to_datetime(out[TIMESTAMP_FIELD], utc=True)
    out[_ROW_ID] = range(len(out))
    return out


def _add_derived(frame: pd.DataFrame) -> None:
    stored = ["bookings_7d", "bookings_14d", "views_7d"]
    for name in stored:
        if name not in frame:
            frame[name] = float("nan")
    records = frame[stored].astype(object).where(frame[stored].notna(), None).to_dict("records")
    derived = [derive(r) for r in records]
    for name in DERIVED_FEATURES:
        frame[name] = pd.array([d[name] for d in derived], dtype="Float64").astype("float64")


def _offsets_of(offline_root: Path, sources: Sequence[str]) -> list[dict[str, Any]]:
    wanted = set(sources)
    out: list[dict[str, Any]] = []
    for manifest in read_manifests(offline_root):
        if wanted.intersection(manifest["files"]):
            out.extend({**o, "part_id": manifest["part_id"]} for o in manifest["offsets"])
    return out


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def list_snapshots(root: Path | str) -> list[Manifest]:
    """Every snapshot under ``root``, oldest first."""
    paths = Path(root).glob("*/manifest.json")
    return sorted((Manifest.from_json(p.read_text()) for p in paths), key=lambda m: m.created_at)


def show(root: Path | str, snapshot_id: str) -> Manifest:
    """The manifest of one snapshot.

    Raises:
        SnapshotError: no such snapshot.
    """
    path = Path(root) / snapshot_id / "manifest.json"
    if not path.exists():
        known = [m.id for m in list_snapshots(root)]
        msg = f"snapshot {snapshot_id!r} not found under {root}; known: {known}"
        raise SnapshotError(msg)
    return Manifest.from_json(path.read_text())


def load_snapshot(root: Path | str, snapshot_id: str) -> pd.DataFrame:
    """The frozen frame, after checking its bytes against the manifest.

    Raises:
        SnapshotError: no such snapshot.
        SnapshotIntegrityError: the data file does not hash to the manifest's sha256.
    """
    manifest = show(root, snapshot_id)
    path = Path(root) / snapshot_id / "data.parquet"
    actual = _sha256(path)
    if actual != manifest.data_sha256:
        msg = f"snapshot {snapshot_id!r}: data.parquet has sha256 {actual}, manifest says {manifest.data_sha256}"
        raise SnapshotIntegrityError(msg)
    return pq.read_table(path).to_pandas()


def diff(a: str, b: str, *, root: Path | str) -> SnapshotDiff:
    """Compare two snapshots under ``root``."""
    return diff_frames(load_snapshot(root, a), load_snapshot(root, b), a=a, b=b)


def diff_frames(left: pd.DataFrame, right: pd.DataFrame, *, a: str = "a", b: str = "b") -> SnapshotDiff:
    """Rows added/removed/changed (matched on :data:`ROW_KEYS`), schema and coverage changes."""
    common = [c for c in left.columns if c in right.columns and c not in ROW_KEYS]
    merged = left.merge(right, on=list(ROW_KEYS), how="outer", suffixes=("__a", "__b"), indicator=True)
    both = merged[merged["_merge"] == "both"]
    changed = pd.Series(False, index=both.index)
    for col in common:
        x, y = both[f"{col}__a"], both[f"{col}__b"]
        changed |= ~((x == y) | (x.isna() & y.isna()))
    cov_a, cov_b = coverage(left), coverage(right)
    return SnapshotDiff(
        a=a,
        b=b,
        rows_added=int((merged["_merge"] == "right_only").sum()),
        rows_removed=int((merged["_merge"] == "left_only").sum()),
        rows_changed=int(changed.sum()),
        columns_added=tuple(c for c in right.columns if c not in left.columns),
        columns_removed=tuple(c for c in left.columns if c not in right.columns),
        dtype_changes={c: (str(left[c].dtype), str(right[c].dtype)) for c in common if left[c].dtype != right[c].dtype},
        coverage_delta={k: round(cov_b[k] - cov_a.get(k, 1.0), 6) for k in cov_b if cov_b[k] != cov_a.get(k, 1.0)},
    )
