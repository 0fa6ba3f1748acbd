"""Offline writer: ``features.v1`` rows appended to date-partitioned parquet, in two layouts.

* ``<root>/features_v1/date=YYYY-MM-DD/part-<id>.parquet``: every row, every view, one column per
  stored catalogue feature (null when the row's view does not hold it). Analysts (DuckDB, Druid
  backfill) read this.
* ``<root>/feast/<view>/date=YYYY-MM-DD/part-<id>.parquet``: one directory per view with the
  view's key columns, ``event_timestamp`` (= ``feature_time``), ``version_time`` (``version`` as
  nanoseconds, see :mod:`features.store`), ``version`` and the view's features. Feast's file
  offline store reads these (:func:`features.store.feature_views`).
* ``<root>/events/date=YYYY-MM-DD/part-<id>.parquet``: the raw events the job accepted
  (``behaviour.events.accepted``, :mod:`features.raw_events`), by the date of their event time.
* ``<root>/asof/feast/<view>/...``: the point-in-time history materialised from those events after
  each flush that wrote some (:mod:`features.history`).
* ``<root>/_manifests/part-<id>.json``: the files of one flush, their row count and the Kafka
  offsets they hold (snapshot provenance).

The date partition is the UTC date of ``feature_time``. Parts are never rewritten (compaction merges them).

Example:
    >>> import tempfile
    >>> from features.rows import parse_row
    >>> row = parse_row({"hotel_id": "h1", "view": "stay_14d", "room_type": "std", "stay_date": "2026-12-24",
    ...                  "feature_time": 1764460800000, "version": 1, "publish_time": 1764460800001,
    ...                  "features": {"bookings_14d": 4.0}})
    >>> written = OfflineWriter(tempfile.mkdtemp()).write_rows([row])
    >>> sorted(p.relative_to(written.root).as_posix() for p in written.files)[1]
    'features_v1/date=2025-11-30/part-....parquet'
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from prometheus_client import CollectorRegistry

from events.catalog import VIEWS
from events.runtime import BatchContext, Output, Record, Runtime, RuntimeConfig, Step
from events.runtime.service import run_service, service_config
from features.config import FeaturesConfig
from features.history import materialise
from features.raw_events import EVENTS, date_of, events_table, parse_accepted
from features.rows import FeatureRow, parse_row
from features.store import CREATED_FIELD, TIMESTAMP_FIELD, view_path

STORED_FEATURES: tuple[str, ...] = tuple(name for _, names in VIEWS.values() for name in names)
DATASET = "features_v1"
MANIFESTS = "_manifests"

_TS_MS = pa.timestamp("ms", tz="UTC")
FEATURES_V1_SCHEMA = pa.schema(
    [
        ("hotel_id", pa.string()),
        ("view", pa.string()),
        ("room_type", pa.string()),
        ("stay_date", pa.string()),
        ("feature_time", _TS_MS),
        ("version", pa.int64()),
        ("publish_time", _TS_MS),
        *[(name, pa.float64()) for name in STORED_FEATURES],
    ]
)


def view_schema(view: str) -> pa.Schema:
    """Schema of the Feast-readable parquet of one view."""
    keys, names = VIEWS[view]
    return pa.schema(
        [
            *[(k, pa.string()) for k in keys],
            (TIMESTAMP_FIELD, pa.timestamp("us", tz="UTC")),
            (CREATED_FIELD, pa.timestamp("ns", tz="UTC")),
            ("version", pa.int64()),
            *[(n, pa.float64()) for n in names],
        ]
    )


OffsetRange = tuple[int, int]
"""First and last offset (inclusive) of a partition's records in one flush."""


@dataclass(frozen=True)
class Written:
    """One flush: its id, the files written and the Kafka offsets they hold."""

    root: Path
    part_id: str
    rows: int
    files: tuple[Path, ...]
    offsets: Mapping[str, Mapping[int, OffsetRange]] = field(default_factory=dict)


_date_of = date_of
Event = dict[str, Any]
"""A raw event, as :func:`features.raw_events.parse_accepted` returns it."""


def features_v1_table(rows: Sequence[FeatureRow]) -> pa.Table:
    """All rows in the ``features_v1`` shape."""
    cols: dict[str, list] = {name: [] for name in FEATURES_V1_SCHEMA.names}
    for row in rows:
        cols["hotel_id"].append(row.hotel_id)
        cols["view"].append(row.view)
        cols["room_type"].append(row.room_type)
        cols["stay_date"].append(row.stay_date)
        cols["feature_time"].append(row.feature_time)
        cols["version"].append(row.version)
        cols["publish_time"].append(row.publish_time)
        for name in STORED_FEATURES:
            cols[name].append(row.features.get(name))
    return pa.table(cols, schema=FEATURES_V1_SCHEMA)


def view_table(view: str, rows: Sequence[FeatureRow]) -> pa.Table:
    """Rows of one view in the Feast shape (``rows`` must all be of ``view``)."""
    keys, names = VIEWS[view]
    cols: dict[str, list] = {
        **{k: [getattr(r, k) for r in rows] for k in keys},
        TIMESTAMP_FIELD: [r.feature_time * 1000 for r in rows],
        CREATED_FIELD: [r.version for r in rows],
        "version": [r.version for r in rows],
        **{n: [r.features[n] for r in rows] for n in names},
    }
    return pa.table(cols, schema=view_schema(view))


class OfflineWriter:
    """Append feature rows to the offline store under ``root`` (the pure-ish core of :func:`run`)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def write_rows(
        self, rows: Sequence[FeatureRow], *, events: Sequence[Event] = (),
        offsets: Mapping[str, Mapping[int, OffsetRange]] | None = None,
    ) -> Written:
        """Write one flush: a part per date partition and layout, then its manifest (last, atomically).

        With ``events``, their parts too, and then the point-in-time history of the dates they change.
        """
        part_id = uuid.uuid4().hex
        files: list[Path] = []
        by_day: dict[str, list[Event]] = {}
        for event in events:
            by_day.setdefault(date_of(event["event_time"]), []).append(event)
        for day, day_events in sorted(by_day.items()):
            files.append(self._write(self.root / EVENTS / f"date={day}", part_id, events_table(day_events)))
        by_date: dict[str, list[FeatureRow]] = {}
        for row in rows:
            by_date.setdefault(_date_of(row.feature_time), []).append(row)
        for day, day_rows in sorted(by_date.items()):
            files.append(self._write(self.root / DATASET / f"date={day}", part_id, features_v1_table(day_rows)))
            for view in VIEWS:
                of_view = [r for r in day_rows if r.view == view]
                if of_view:
                    directory = view_path(self.root, view) / f"date={day}"
                    files.append(self._write(directory, part_id, view_table(view, of_view)))
        written = Written(self.root, part_id, len(rows) + len(events), tuple(files), dict(offsets or {}))
        if rows or events:
            self._manifest(written)
        if by_day:
            changed = {(str(e["hotel_id"]), str(e["room_type"]), str(e["stay_date"])) for e in events}
            materialise(self.root, since=min(by_day), keys=changed)
        return written

    def _write(self, directory: Path, part_id: str, table: pa.Table) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"part-{part_id}.parquet"
        tmp = directory / f".part-{part_id}.tmp"  # dot files are skipped by DuckDB globs and dask
        pq.write_table(table, tmp, compression="zstd")
        tmp.replace(path)
        return path

    def _manifest(self, written: Written) -> None:
        directory = self.root / MANIFESTS
        directory.mkdir(parents=True, exist_ok=True)
        body = {
            "part_id": written.part_id,
            "written_at": datetime.now(tz=UTC).isoformat(),
            "rows": written.rows,
            "files": [p.relative_to(self.root).as_posix() for p in written.files],
            "offsets": [
                {"topic": topic, "partition": part, "first": first, "last": last}
                for topic, parts in sorted(written.offsets.items())
                for part, (first, last) in sorted(parts.items())
            ],
        }
        tmp = directory / f".part-{written.part_id}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(body, indent=1))
        tmp.replace(directory / f"part-{written.part_id}.json")


def read_manifests(root: Path | str) -> list[dict]:
    """Every flush manifest under ``root``, oldest first."""
    paths = sorted((Path(root) / MANIFESTS).glob("part-*.json"))
    return sorted((json.loads(p.read_text()) for p in paths), key=lambda m: m["written_at"])


def read_features_v1(root: Path | str) -> pd.DataFrame:
    """The whole ``features_v1`` dataset as one frame (small stores, tests, snapshots)."""
    files = sorted((Path(root) / DATASET).glob("date=*/part-*.parquet"))
    if not files:
        return FEATURES_V1_SCHEMA.empty_table().to_pandas()
    return pa.concat_tables([pq.read_table(f, schema=FEATURES_V1_SCHEMA) for f in files]).to_pandas()


@dataclass
class OfflineRunStats:
    polled: int = 0
    written: int = 0
    events: int = 0
    dead_lettered: int = 0
    flushes: int = 0


class OfflineWriteStep(Step[FeatureRow | Event]):
    """The offline writer as a runtime step: buffer rows, write parquet and manifest, then let offsets commit.

    :meth:`durable` flushes when ``offline_flush_rows`` are buffered, ``offline_flush_s`` passed since
    the last flush, or the runtime forces it (stop, idle, rebalance); until then the offsets of the
    buffered rows stay uncommitted, so a crash re-appends and never loses.
    """

    def __init__(self, config: FeaturesConfig, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.writer = OfflineWriter(config.offline)
        self.stats = OfflineRunStats()
        self.buffer: list[FeatureRow] = []
        self.events: list[Event] = []
        self.offsets: dict[str, dict[int, OffsetRange]] = {}
        self._clock = clock
        self._flushed_at = clock()

    def parse(self, record: Record[bytes]) -> FeatureRow | Event:
        # tracked before parsing: a flush's manifest accounts for its dead-lettered records too
        _track(self.offsets, self.config.kafka.topic(record.topic), record.partition, record.offset)
        if record.topic == self.config.events_topic:
            return parse_accepted(record.value)
        return parse_row(record.value)

    def process(self, batch: Sequence[Record[FeatureRow | Event]], ctx: BatchContext | None) -> list[Output]:
        for record in batch:
            if isinstance(record.value, FeatureRow):
                self.buffer.append(record.value)
            else:
                self.events.append(record.value)
        return []

    def durable(self, *, force: bool) -> bool:
        now = self._clock()
        full = len(self.buffer) + len(self.events) >= self.config.offline_flush_rows
        due = full or now - self._flushed_at >= self.config.offline_flush_s
        if not (force or due):
            return not self.offsets
        if self.offsets:
            self.writer.write_rows(self.buffer, events=self.events, offsets=self.offsets)
            self.stats.written += len(self.buffer)
            self.stats.events += len(self.events)
            self.stats.flushes += 1
            self.buffer, self.events, self.offsets = [], [], {}
        self._flushed_at = now
        return True

    def health(self) -> dict[str, str | None]:
        root = Path(self.config.offline)
        probe = root if root.exists() else root.parent
        return {"offline_store": None if os.access(probe, os.W_OK) else f"not writable: {root}"}

    def describe(self) -> dict[str, Any]:
        return {"buffered": len(self.buffer) + len(self.events), "written": self.stats.written,
                "events": self.stats.events, "flushes": self.stats.flushes}


def runtime_config(config: FeaturesConfig, **overrides: object) -> RuntimeConfig:
    """The runtime settings of the offline writer (group ``offline_group``, at-least-once) plus ``overrides``.

    It reads ``features.v1`` and, when the topic exists, the accepted events (``events_topic``).
    """
    inputs = (config.topic, config.events_topic) if config.events_topic and _exists(config) else (config.topic,)
    return service_config({"name": "offline-writer", "kafka": config.kafka, "inputs": inputs,
                           "group_id": config.offline_group, "max_batch": config.batch_size}, **overrides)


def run(
    config: FeaturesConfig,
    *,
    max_idle_s: float | None = None,
    stop_event: threading.Event | None = None,
    poll_timeout_s: float = 0.5,
    runtime: RuntimeConfig | None = None,
    registry: CollectorRegistry | None = None,
) -> OfflineRunStats:
    """Consume ``features.v1`` into the offline store until stopped or idle for ``max_idle_s``.

    Rows are buffered until ``offline_flush_rows`` or ``offline_flush_s``; offsets are committed
    only after the flush's files and manifest are on disk (a crash re-appends, never loses).
    Unparseable rows go to ``features.v1.dlq``.
    """
    step = OfflineWriteStep(config)
    rc = runtime or runtime_config(config, max_idle_s=max_idle_s, poll_timeout_s=poll_timeout_s)
    totals = run_service(Runtime(rc, step, registry=registry, stop_event=stop_event))
    step.stats.polled = totals.consumed
    step.stats.dead_lettered = totals.dead_lettered
    return step.stats


def _exists(config: FeaturesConfig) -> bool:
    """Whether the accepted-events topic exists, created with its DLQ if it can be (``pricestream up`` creates it).

    A principal that may not create topics (a secure stack) reads it only once it exists.
    """
    from events.admin import admin_client, create_topics
    from events.errors import TopicError
    from events.topics import TopicSpec

    name = config.events_topic or ""
    try:
        create_topics(config.kafka, [TopicSpec(name=name, partitions=6), TopicSpec(name=f"{name}.dlq", partitions=1)])
    except TopicError:
        pass  # not allowed to create it: read it if it is there
    return config.kafka.topic(name) in admin_client(config.kafka).list_topics(timeout=10.0).topics


def _track(offsets: dict[str, dict[int, OffsetRange]], topic: str, partition: int, offset: int) -> None:
    first, _ = offsets.setdefault(topic, {}).get(partition, (offset, offset))
    offsets[topic][partition] = (min(first, offset), offset)
