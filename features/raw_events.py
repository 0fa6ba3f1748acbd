"""The raw behaviour events in the offline store: what the feature job accepted, by date, for analysts and history.

The feature job writes every event it accepts to ``behaviour.events.accepted`` (``AcceptedEvents.java``):
the event's bytes as the producer sent them and the job's own columns of it (``valid``: the tile
operator's inputs, after the contract's rules). The offline writer keeps them here, one row per event:

* ``<root>/events/date=YYYY-MM-DD/part-<id>.parquet`` (the UTC date of ``event_time``), columns
  :data:`EVENTS_SCHEMA`: the contract's field names (``event_type``, ``hotel_id``, ``price_paid`` ...,
  as sent, defaults applied for ``rooms``), then the job's columns (``is_search``, ``n_booked``,
  ``lead_days``, ``tile_price_shown``, ``tile_rate``: what the windows sum; a price outside the hotel's
  range is null there), then where it was read (``source_topic``, ``source_partition``, ``source_offset``).

A record delivered twice (the job's sink is at-least-once) is one row: :func:`read_events` keeps one
row per (source topic, partition, offset), and compaction does the same.

Example:
    >>> rec = parse_accepted(b'{"topic": "behaviour.events", "partition": 0, "valid": {"hotel_id": "h1",'
    ...     b' "room_type": "std", "stay_date": "2026-07-01", "event_time_ms": 1780000000000, "src_offset": 4,'
    ...     b' "publish_ms": 1780000000100, "is_search": 0, "n_booked": 2, "price_shown": null},'
    ...     b' "event": {"event_type": "booking", "event_id": "e1", "event_time": 1780000000000,'
    ...     b' "hotel_id": "h1", "room_type": "std", "stay_date": "2026-07-01", "price_paid": 120.5, "rooms": 2}}')
    >>> rec["event_type"], rec["price_paid"], rec["n_booked"], rec["source_offset"], rec["rooms"]
    ('booking', 120.5, 2.0, 4, 2)
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from features.errors import FeatureRowError

EVENTS = "events"
"""The raw events' dataset under the offline root (and the analysts' table name)."""
_TS_MS = pa.timestamp("ms", tz="UTC")
_CONTRACT_STRINGS = ("event_id", "event_type", "hotel_id", "room_type", "stay_date", "channel", "segment",
                     "competitor_id", "booking_id", "decision_id")
_CONTRACT_INTS = ("schema_version", "nights", "guests", "rooms", "rooms_left", "capacity")
_CONTRACT_REALS = ("price_shown", "price_paid", "rate")
_JOB_REALS = ("is_search", "is_view", "n_booked", "n_cancelled", "lead_days")
_TILE_RENAMED = {"price_shown": "tile_price_shown", "rate": "tile_rate"}
"""The job's columns whose contract namesake holds the value as sent (the job's is null when implausible)."""
EVENTS_SCHEMA = pa.schema([
    ("event_id", pa.string()), ("event_type", pa.string()), ("event_time", _TS_MS), ("schema_version", pa.int64()),
    *[(name, pa.string()) for name in _CONTRACT_STRINGS[2:]],
    *[(name, pa.int64()) for name in _CONTRACT_INTS[1:]],
    *[(name, pa.float64()) for name in _CONTRACT_REALS],
    *[(name, pa.float64()) for name in (*_JOB_REALS, *_TILE_RENAMED.values())],
    ("source_topic", pa.string()), ("source_partition", pa.int64()), ("source_offset", pa.int64()),
    ("publish_time", _TS_MS),
])
SOURCE_KEYS: tuple[str, ...] = ("source_topic", "source_partition", "source_offset")
"""One accepted record: where the job read it (a redelivered copy has the same)."""


def parse_accepted(raw: bytes) -> dict[str, Any]:
    """One ``behaviour.events.accepted`` record as a row of :data:`EVENTS_SCHEMA`.

    Raises:
        FeatureRowError: not the job's envelope (names the field and the value).
    """
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise FeatureRowError(field="<record>", value=raw[:80], expected=f"an accepted-event JSON object ({exc})") \
            from exc
    valid, event = (body.get("valid"), body.get("event")) if isinstance(body, dict) else (None, None)
    if not isinstance(valid, dict) or not isinstance(event, dict):
        raise FeatureRowError(field="valid/event", value=str(raw[:80]), expected="objects from AcceptedEvents.java")
    time = valid.get("event_time_ms")
    if not isinstance(time, int) or isinstance(time, bool):
        raise FeatureRowError(field="valid.event_time_ms", value=time, expected="epoch milliseconds")
    row: dict[str, Any] = {name: _text(event.get(name)) for name in _CONTRACT_STRINGS}
    row.update({name: _whole(event.get(name)) for name in _CONTRACT_INTS})
    row.update({name: _real(event.get(name)) for name in _CONTRACT_REALS})
    row.update({name: _real(valid.get(name)) for name in _JOB_REALS})
    row.update({renamed: _real(valid.get(name)) for name, renamed in _TILE_RENAMED.items()})
    for key in ("hotel_id", "room_type", "stay_date"):
        row[key] = _text(valid.get(key)) or row[key]
    if row["rooms"] is None and row["event_type"] in ("booking", "cancellation"):
        row["rooms"] = int((row["n_booked"] or 0) + (row["n_cancelled"] or 0)) or 1  # the contract's default
    row.update(event_time=time, source_topic=_text(body.get("topic")), source_partition=_whole(body.get("partition")),
               source_offset=_whole(valid.get("src_offset")), publish_time=_whole(valid.get("publish_ms")))
    return row


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _whole(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _real(value: object) -> float | None:
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return None
    return float(value)


def date_of(ms: int) -> str:
    """The UTC date partition of an instant in epoch milliseconds."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).date().isoformat()


def events_table(rows: Sequence[dict[str, Any]]) -> pa.Table:
    """Rows of :func:`parse_accepted` as a table of :data:`EVENTS_SCHEMA`."""
    return pa.Table.from_pylist(list(rows), schema=EVENTS_SCHEMA)


def event_files(root: Path | str, dates: Sequence[str] | None = None) -> list[Path]:
    """The parts of the events dataset, of every date or of ``dates``."""
    base = Path(root) / EVENTS
    if dates is None:
        return sorted(base.glob("date=*/part-*.parquet"))
    return sorted(p for day in dates for p in (base / f"date={day}").glob("part-*.parquet"))


def event_dates(root: Path | str) -> list[str]:
    """The dates that hold events, oldest first."""
    return sorted(p.name.removeprefix("date=") for p in (Path(root) / EVENTS).glob("date=*")
                  if any(p.glob("part-*.parquet")))


def read_events(root: Path | str, dates: Sequence[str] | None = None, *,
                hotels: Collection[str] | None = None) -> pd.DataFrame:
    """The events of ``dates`` (all by default) and ``hotels`` (all by default), one row per accepted record.

    The order (event time, then event id, then where it was read) depends on the events only, not on
    the order in which they arrived or the files they were written to.
    """
    files = event_files(root, dates)
    if not files:
        return EVENTS_SCHEMA.empty_table().to_pandas()
    only = None if hotels is None else [("hotel_id", "in", sorted(hotels))]
    frame = pa.concat_tables([pq.read_table(f, schema=EVENTS_SCHEMA, filters=only) for f in files]).to_pandas()
    frame = frame.drop_duplicates(list(SOURCE_KEYS))
    order = ["event_time", "event_id", *SOURCE_KEYS]
    return frame.sort_values(order, kind="stable", na_position="first").reset_index(drop=True)
