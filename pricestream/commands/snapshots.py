"""``pricestream snapshot ...``: versioned, point-in-time-correct training snapshots.

``create`` joins through Feast over the offline store's point-in-time history (``--source history``,
the default when the store holds raw events: window values as of every event time, computed from
the events, :mod:`features.history`), over the job's rows as they were written (``--source feast``),
or, with ``--source druid``, over feature rows rebuilt from Druid (:func:`features.backfill.backfill`)
and staged in a private offline store, so the same point-in-time join and the same freezing apply.
"""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import pandas as pd
import typer

from pricestream.commands.common import err, fail, iso, kv_table, new_app, out, parse_time, settings, table
from pricestream.progress import progress_bar

if TYPE_CHECKING:
    from features.rows import FeatureRow
    from features.snapshots import Manifest, Progress

app = new_app("Versioned training snapshots (point-in-time joins through Feast).")

DRUID_LOOKBACK = timedelta(days=31)
"""How far before ``--as-of`` a Druid backfill reaches: the longest feature-view TTL (inventory, 30 days) plus a day."""
_SOURCES = ("auto", "history", "feast", "druid")


@app.command("create")
def create(
    as_of: Annotated[str, typer.Option("--as-of", envvar="PRICESTREAM_AS_OF", help="ISO-8601 time with timezone")],
    entities: Annotated[
        Path | None,
        typer.Option(
            envvar="PRICESTREAM_ENTITIES", help="csv/parquet: hotel_id, room_type, stay_date, event_timestamp"),
    ] = None,
    source: Annotated[str, typer.Option(
        envvar="PRICESTREAM_SNAPSHOT_SOURCE",
        help="history (as-of values from the raw events), feast (the job's rows), druid, or auto: history when "
             "the offline store holds raw events, else feast")] = "auto",
    since: Annotated[
        str | None, typer.Option(envvar="PRICESTREAM_SINCE", help="druid: first feature time (default as-of - 31d)")
    ] = None,
) -> None:
    """Freeze a point-in-time-correct training frame as of ``--as-of``; prints its id."""
    from features.snapshots import create_snapshot

    when = parse_time(as_of, option="--as-of")
    if source not in _SOURCES:
        fail(f"--source: got {source!r}, expected one of {list(_SOURCES)}")
    entity_frame = read_entities(entities) if entities is not None else None
    s = settings()
    with progress_bar("joining feature views", total=None) as bar:
        task = bar.task_ids[0]

        def on_progress(view: str, done: int, total: int) -> None:
            bar.update(task, description=f"joined {view}", completed=done, total=total)

        if source == "druid":
            start = parse_time(since, option="--since") if since else when - DRUID_LOOKBACK
            manifest = _from_druid(when, start, entity_frame, on_progress=on_progress)
        else:
            from features.history import has_history, history_store
            from features.store import build_store

            if source == "history" and not has_history(s.offline()):
                fail(f"--source history: the offline store {s.offline()} holds no raw events; run the feature job "
                     "and the offline writer (or `pricestream features history` after a backfill), or use feast")
            history = source == "history" or (source == "auto" and has_history(s.offline()))
            store = history_store(s.features()) if history else build_store(s.features(), apply=True)
            err.print(f"joining over the {'point-in-time history' if history else 'rows of the job'}")
            manifest = create_snapshot(
                store, as_of=when, entities=entity_frame, root=s.snapshots(), on_progress=on_progress
            )
    out.print(f"snapshot {manifest.id}: {manifest.row_count} rows as of {manifest.as_of} ({s.snapshots()})")


_ENTITY_COLUMNS = ("hotel_id", "room_type", "stay_date", "event_timestamp")


def read_entities(path: Path) -> pd.DataFrame:
    """The entity rows of ``--entities`` (csv or parquet): keys as strings, ``stay_date`` ``YYYY-MM-DD``,
    ``event_timestamp`` aware UTC; what pandas writes is read (its index column, mixed sub-second precision).

    Raises:
        CliInputError: a missing column or value, or a time or date that is not ISO-8601 (names row and value).
    """
    if not path.exists():
        fail(f"--entities: file {str(path)!r} does not exist")
    if path.suffix not in (".csv", ".parquet"):
        fail(f"--entities: got {str(path)!r}, expected a .csv or .parquet file")
    if path.suffix == ".parquet":
        frame = pd.read_parquet(path)
    else:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        if len(frame.columns) and str(frame.columns[0]).startswith("Unnamed: 0"):
            frame = frame.drop(columns=frame.columns[0])  # the index column of DataFrame.to_csv
    missing = [c for c in _ENTITY_COLUMNS if c not in frame.columns]
    if missing:
        fail(f"--entities {path}: missing columns {missing}; expected hotel_id, room_type, stay_date, event_timestamp")
    first = 2 if path.suffix == ".csv" else 0  # a CSV's first row is its line 2
    where = "line" if path.suffix == ".csv" else "row"
    out = frame.copy()
    for column in ("hotel_id", "room_type"):
        out[column] = [_text(v, path, where, first + i, column) for i, v in enumerate(frame[column])]
    out["stay_date"] = [_stay_date(v, path, where, first + i) for i, v in enumerate(frame["stay_date"])]
    out["event_timestamp"] = pd.to_datetime(
        [_timestamp(v, path, where, first + i) for i, v in enumerate(frame["event_timestamp"])], utc=True)
    return out


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and value != value) or value is pd.NaT or str(value) == ""


def _text(value: object, path: Path, where: str, n: int, column: str) -> str:
    if _missing(value):
        fail(f"--entities {path}: {where} {n}: {column} is empty, expected a value")
    return str(value)


def _stay_date(value: object, path: Path, where: str, n: int) -> str:
    """``YYYY-MM-DD`` of a date, or of a midnight date-time (pandas writes a datetime64 date that way)."""
    from datetime import date

    text = _text(value, path, where, n, "stay_date")
    head, _, rest = text.partition(" ")
    try:
        day = date.fromisoformat(head[:10] if "T" in head else head)
    except ValueError:
        day = None
    if day is None or rest.strip() not in ("", "00:00:00") or ("T" in head and not head.endswith("T00:00:00")):
        fail(f"--entities {path}: {where} {n}: stay_date {text!r}, expected a date YYYY-MM-DD")
    return str(day)


def _timestamp(value: object, path: Path, where: str, n: int) -> datetime:
    """An aware time from ISO-8601 text (any sub-second precision, ``Z`` or an offset) or an aware timestamp."""
    if isinstance(value, datetime):
        parsed: datetime | None = value
    else:
        try:
            parsed = datetime.fromisoformat(_text(value, path, where, n, "event_timestamp").strip())
        except ValueError:
            parsed = None
    if parsed is None or parsed.tzinfo is None:
        fail(f"--entities {path}: {where} {n}: event_timestamp {str(value)!r}, expected an ISO-8601 time with a "
             "timezone, e.g. 2026-11-30T12:00:00Z (pandas: Series.dt.tz_localize('UTC') before to_csv)")
    return parsed


def rows_from_backfill(frame: pd.DataFrame) -> list[FeatureRow]:
    """Validated ``features.v1`` rows from a backfilled frame (:data:`features.backfill.FEATURE_COLUMNS`).

    Example:
        >>> from features.backfill import to_feature_frame
        >>> f = to_feature_frame(pd.DataFrame({"hotel_id": ["h1"], "view": ["stay_1h"], "room_type": ["std"],
        ...     "stay_date": ["2026-12-24"], "feature_time": ["2026-12-01T00:00:00Z"], "version": [3],
        ...     "searches_1h": [4.0]}))
        >>> row = rows_from_backfill(f)[0]
        >>> row.key, row.features["searches_1h"], row.features["views_1h"], row.version
        (('h1', 'std', '2026-12-24'), 4.0, None, 3)
    """
    from events.catalog import VIEWS
    from features.rows import parse_row

    rows = []
    for record in frame.astype(object).where(frame.notna(), None).to_dict("records"):
        ms = int(pd.Timestamp(record["feature_time"]).timestamp() * 1000)
        names = VIEWS[str(record["view"])][1]
        rows.append(parse_row({
            **{k: record[k] for k in ("hotel_id", "view", "room_type", "stay_date")},
            "feature_time": ms, "publish_time": ms, "version": int(record["version"]),
            "features": {n: record[n] for n in names},
        }))
    return rows


def _from_druid(
    as_of: datetime, start: datetime, entities: pd.DataFrame | None, *, on_progress: Progress
) -> Manifest:
    from features.analytics import query_druid
    from features.backfill import backfill
    from features.offline_writer import OfflineWriter
    from features.snapshots import create_snapshot
    from features.store import build_store

    s = settings()
    if entities is not None:
        keys: list[str] = sorted(set(entities["hotel_id"].astype(str)))
    else:
        hotels = query_druid("SELECT DISTINCT hotel_id FROM features_v1", druid_url=s.druid_url)
        keys = sorted(hotels["hotel_id"].astype(str))
    if not keys:
        fail(f"Druid at {s.druid_url} holds no hotel in features_v1; nothing to back-fill")
    frame = backfill(keys, start, as_of + timedelta(milliseconds=1), druid_url=s.druid_url)
    err.print(f"back-filled {len(frame)} feature rows of {len(keys)} hotels from Druid ({iso(start)} .. {iso(as_of)})")
    with tempfile.TemporaryDirectory(prefix="pricestream-druid-snapshot-") as tmp:
        staged = s.features().model_copy(update={"state_dir": Path(tmp), "offline_root": Path(tmp) / "offline",
                                                 "registry_path": None})
        OfflineWriter(staged.offline).write_rows(rows_from_backfill(frame))
        store = build_store(staged, apply=True)
        return create_snapshot(
            store, as_of=as_of, entities=entities, root=s.snapshots(), on_progress=on_progress
        )


@app.command("list")
def list_() -> None:
    """Every snapshot, oldest first."""
    from features.snapshots import list_snapshots

    root = settings().snapshots()
    manifests = list_snapshots(root)
    if not manifests:
        out.print(f"no snapshots under {root}")
        return
    rows = [(m.id, m.as_of, m.row_count, m.time_range[0], m.time_range[1], m.project, m.created_at) for m in manifests]
    out.print(table(("id", "as of", "rows", "first", "last", "project", "created"), rows, title=str(root)))


@app.command("show")
def show(snapshot_id: Annotated[str, typer.Argument(help="snapshot id")]) -> None:
    """A snapshot's manifest: provenance, time range, coverage."""
    from features.snapshots import show as show_manifest

    m = show_manifest(settings().snapshots(), snapshot_id)
    partitions = sorted({(o["topic"], o["partition"]) for o in m.kafka_offsets})
    out.print(kv_table([
        ("id", m.id), ("as of", m.as_of), ("rows", m.row_count), ("first feature time", m.time_range[0]),
        ("last feature time", m.time_range[1]), ("project", m.project), ("created", m.created_at),
        ("data sha256", m.data_sha256), ("definitions hash", m.definitions_hash), ("source files", len(m.sources)),
        ("kafka partitions", ", ".join(f"{t}[{p}]" for t, p in partitions) or "-"),
    ], title=f"snapshot {m.id}"))
    worst = sorted(m.coverage.items(), key=lambda kv: -kv[1])
    out.print(table(("feature", "null share"), worst, title="coverage (worst first)"))


@app.command("diff")
def diff(
    a: Annotated[str, typer.Argument(help="older snapshot id")],
    b: Annotated[str, typer.Argument(help="newer snapshot id")],
) -> None:
    """How snapshot B differs from A: rows, schema and coverage."""
    from features.snapshots import diff as diff_snapshots

    d = diff_snapshots(a, b, root=settings().snapshots())
    out.print(kv_table([
        ("rows added", d.rows_added), ("rows removed", d.rows_removed), ("rows changed", d.rows_changed),
        ("columns added", ", ".join(d.columns_added) or "-"), ("columns removed", ", ".join(d.columns_removed) or "-"),
        ("dtype changes", ", ".join(f"{c}: {x} -> {y}" for c, (x, y) in d.dtype_changes.items()) or "-"),
    ], title=f"{a} -> {b}"))
    if d.coverage_delta:
        out.print(table(("feature", "null share change"), sorted(d.coverage_delta.items()), title="coverage"))
