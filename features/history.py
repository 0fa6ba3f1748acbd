"""The offline store's point-in-time history: as-of rows of every view, materialised from the raw events.

``<root>/asof`` is an offline root of its own, in the layout Feast reads
(:func:`features.store.view_path`): ``<root>/asof/feast/<view>/date=YYYY-MM-DD/part-asof.parquet``,
one file per view and date, holding the rows of :func:`features.asof.asof_rows` whose event time
falls on that date. A file is rewritten whole (written beside, renamed over), so a reader sees the
old or the new rows of a date, never a mix. Built from the events alone, the files are the same
whatever the order and batching of the events' arrival: a replay gives the same rows, and a
snapshot taken over them the same content hash.

:func:`materialise` recomputes the dates from ``since`` on (a late event changes its own date and the
next :data:`LOOKBACK_DAYS`, the longest window and its tile), reading the events from
:data:`LOOKBACK_DAYS` before it; the offline writer calls it after each flush with the oldest date the
flush wrote events to.

Example:
    >>> import tempfile
    >>> from features.raw_events import EVENTS
    >>> root = Path(tempfile.mkdtemp())
    >>> materialise(root).dates
    0
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from events.catalog import VIEW_SPECS
from features.asof import asof_rows
from features.config import FeaturesConfig
from features.raw_events import event_dates, read_events
from features.store import CREATED_FIELD, build_store, view_path

if TYPE_CHECKING:
    from feast import FeatureStore

ASOF = "asof"
"""The history's offline root, under the offline store's."""
ASOF_FILE = "part-asof.parquet"
StayKey = tuple[str, str, str]
"""``(hotel_id, room_type, stay_date)``."""
LOOKBACK_DAYS = max((v.window_ms or 0) + (v.tile_ms or 0) for v in VIEW_SPECS) // 86_400_000 + 1
"""Days before a date whose events can be in a window of a row of that date (14 d window, 1 d tile, + 1)."""


@dataclass(frozen=True)
class Materialised:
    """What :func:`materialise` did: dates rewritten, rows and files written."""

    dates: int
    rows: int
    files: int


def asof_root(root: Path | str) -> Path:
    """The history's offline root (a Feast offline root: point a store's views here)."""
    return Path(root) / ASOF


def has_history(root: Path | str) -> bool:
    """Whether the offline store holds raw events (and so a history)."""
    return bool(event_dates(root))


def history_store(config: FeaturesConfig) -> FeatureStore:
    """A Feast store whose views read the history (point-in-time joins over it), with a registry of its own.

    Its online side is the deployment's Redis: only its offline sources differ from :func:`build_store`'s.
    """
    staged = config.model_copy(update={
        "offline_root": asof_root(config.offline),
        "registry_path": config.registry.with_name(f"{config.registry.stem}-history{config.registry.suffix}")})
    return build_store(staged, apply=True)


def _shift(day: str, days: int) -> str:
    return (date.fromisoformat(day) + timedelta(days=days)).isoformat()


def materialise(root: Path | str, *, since: str | None = None, keys: Collection[StayKey] | None = None,
                progress: Callable[[int, int], None] | None = None) -> Materialised:
    """Rewrite the as-of rows of every date from ``since`` (every date when None) to the newest event's.

    Args:
        root: the offline store (its ``events`` dataset is read, its ``asof`` root written).
        since: ISO date: the oldest date whose events changed.
        keys: the stay keys whose events changed (None: all). Only their rows, and their hotels', are
            recomputed; the other rows of a date are kept as they are (a key's rows depend on its own
            events only), so a flush costs its keys' events, not the whole store's.
        progress: called as ``(views done, views)``.
    """
    root = Path(root)
    dates = event_dates(root)
    if not dates:
        return Materialised(0, 0, 0)
    start = dates[0] if since is None else max(since, dates[0])
    wanted = [d for d in dates if d >= start]
    reading = [d for d in dates if d >= _shift(start, -LOOKBACK_DAYS)]
    stays = None if keys is None else set(keys)
    # a hotel view reads all the hotel's stays: the events of the changed stays' hotels
    events = read_events(root, reading, hotels=None if stays is None else {k[0] for k in stays})
    rows = files = 0
    for i, view in enumerate(VIEW_SPECS):
        touched = None if stays is None else _touched(view.keys, stays)
        source = events if touched is None else events[_key_index(events, view.keys).isin(touched)]
        table = asof_rows(source, view)
        table[CREATED_FIELD] = pd.to_datetime(table["version"], unit="ns", utc=True)
        day = table["event_timestamp"].dt.strftime("%Y-%m-%d")
        for d in wanted:
            directory = view_path(asof_root(root), view.name) / f"date={d}"
            of_day = _with_kept(directory, table[day == d], view.keys, touched)
            files += _write(directory, of_day)
            rows += len(of_day)
        if progress is not None:
            progress(i + 1, len(VIEW_SPECS))
    return Materialised(len(wanted), rows, files)


def _touched(keys: tuple[str, ...], stays: set[StayKey]) -> pd.Index:
    """The entity keys of a view that the changed stays make (the stays, or their hotels)."""
    if len(keys) == 1:
        return pd.Index(sorted({k[0] for k in stays}))
    return pd.MultiIndex.from_tuples(sorted(stays), names=list(keys))


def _key_index(frame: pd.DataFrame, keys: tuple[str, ...]) -> pd.Index:
    if len(keys) == 1:
        return pd.Index(frame[keys[0]].astype(str))
    return pd.MultiIndex.from_frame(frame[list(keys)].astype(str))


def _with_kept(directory: Path, new: pd.DataFrame, keys: tuple[str, ...], touched: pd.Index | None) -> pd.DataFrame:
    """The date's rows: ``new``, and (when only ``touched`` keys changed) the file's rows of the other keys."""
    target = directory / ASOF_FILE
    if touched is not None and target.exists():
        old = pq.read_table(target).to_pandas()
        new = pd.concat([old[~_key_index(old, keys).isin(touched)], new])
    return new.sort_values([*keys, "event_timestamp"], kind="stable").reset_index(drop=True)


def _write(directory: Path, frame: pd.DataFrame) -> int:
    """Replace the date's file with ``frame``'s rows (remove it when there are none); 1 if a file was written."""
    target = directory / ASOF_FILE
    if frame.empty:
        target.unlink(missing_ok=True)
        return 0
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{ASOF_FILE}.tmp"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), tmp, compression="zstd")
    tmp.replace(target)
    return 1
