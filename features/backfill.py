"""Backfill: rebuild the feature rows of a set of entities over a time range, from Druid.

The rows come back in the offline store's shape (:data:`FEATURE_COLUMNS`, sorted by key then
time, fixed dtypes), so a backfill from Druid and a read of the offline parquet for the same
range are equal frames. The same SQL (:func:`backfill_sql`) runs on both engines.

Entities are prefixes of the stay key: ``"h1"`` (every row of hotel h1), ``("h1", "std")``
or ``("h1", "std", "2026-12-24")``.

Example:
    >>> from datetime import UTC, datetime
    >>> sql = backfill_sql([("h1", "std")], datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 8, tzinfo=UTC))
    >>> "(\\"hotel_id\\" = 'h1' AND \\"room_type\\" = 'std')" in sql
    True
    >>> "\\"__time\\" < TIMESTAMP '2026-01-08 00:00:00.000'" in sql
    True
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime
from pathlib import Path

import pandas as pd

from features.analytics import (
    DATASOURCE,
    FEATURE_SCHEMA,
    STORED_FEATURES,
    AnalyticsError,
    query_druid,
    query_duckdb,
)

Entity = str | tuple[str] | tuple[str, str] | tuple[str, str, str | date]

FEATURE_COLUMNS: tuple[str, ...] = (
    "hotel_id",
    "room_type",
    "stay_date",
    "view",
    *STORED_FEATURES,
    "feature_time",
    "version",
)
"""Columns of a backfilled frame, in order: the features.v1 row with ``feature_time`` as a UTC timestamp."""
SORT_KEYS: tuple[str, ...] = ("hotel_id", "room_type", "stay_date", "view", "feature_time", "version")
_KEY_NAMES = ("hotel_id", "room_type", "stay_date")


class BackfillError(AnalyticsError, ValueError):
    """A backfill request is malformed (entity, time range)."""


def backfill(
    entities: Iterable[Entity], start: datetime, end: datetime, *, druid_url: str, timeout: float = 120.0
) -> pd.DataFrame:
    """Feature rows with ``start <= feature_time < end`` for ``entities``, rebuilt from Druid.

    Raises:
        BackfillError: no entity, a malformed entity, naive or inverted times.
        features.analytics.EngineUnavailable: Druid is not reachable.
        features.analytics.QueryFailed: Druid rejected the query.
    """
    frame = query_druid(backfill_sql(entities, start, end), druid_url=druid_url, timeout=timeout)
    return to_feature_frame(frame)


def offline_rows(
    entities: Iterable[Entity], start: datetime, end: datetime, *, offline_root: Path | str
) -> pd.DataFrame:
    """The same rows as :func:`backfill`, read from the offline parquet store with DuckDB."""
    frame = query_duckdb(backfill_sql(entities, start, end), offline_root=offline_root)
    return to_feature_frame(frame)


def backfill_sql(entities: Iterable[Entity], start: datetime, end: datetime) -> str:
    """The SQL (Druid and DuckDB dialects alike) selecting the rows of a backfill.

    Raises:
        BackfillError: see :func:`backfill`.
    """
    start_lit, end_lit = _time_literal("start", start), _time_literal("end", end)
    if start >= end:
        msg = f"start {start.isoformat()} is not before end {end.isoformat()}; expected start < end"
        raise BackfillError(msg)
    clauses = sorted({_entity_clause(e) for e in entities})
    if not clauses:
        msg = "entities is empty; expected at least one hotel_id or (hotel_id, room_type[, stay_date])"
        raise BackfillError(msg)
    columns = ", ".join(f'"{c}"' for c in FEATURE_SCHEMA)
    return (
        f'SELECT "__time" AS "feature_time", {columns} FROM {DATASOURCE} '
        f'WHERE "__time" >= {start_lit} AND "__time" < {end_lit} AND ({" OR ".join(clauses)})'
    )


def to_feature_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Order, sort and type rows as the offline store holds them.

    Example:
        >>> f = to_feature_frame(pd.DataFrame({"hotel_id": ["b", "a"], "version": [1, 2]}))
        >>> list(f["hotel_id"]), str(f["feature_time"].dtype), str(f["bookings_24h"].dtype)
        (['a', 'b'], 'datetime64[ms, UTC]', 'float64')
    """
    out = pd.DataFrame(index=frame.index)
    for col in FEATURE_COLUMNS:
        values = frame[col] if col in frame else pd.Series([None] * len(frame), index=frame.index, dtype=object)
        if col == "feature_time":
            out[col] = pd.to_datetime(values, utc=True).astype("datetime64[ms, UTC]")
        elif col == "version":
            out[col] = pd.to_numeric(values).astype("int64")
        elif col in STORED_FEATURES:
            out[col] = pd.to_numeric(values).astype("float64")
        else:
            out[col] = values.astype(object).where(values.notna(), None)
    out = out.sort_values(list(SORT_KEYS), kind="stable", na_position="first")
    return out.reset_index(drop=True)


def _time_literal(field: str, value: datetime) -> str:
    if not isinstance(value, datetime) or value.tzinfo is None:
        msg = f"{field} {value!r} is not a timezone-aware datetime; expected e.g. datetime(2026, 1, 1, tzinfo=UTC)"
        raise BackfillError(msg)
    utc = value.astimezone(UTC)
    return f"TIMESTAMP '{utc.strftime('%Y-%m-%d %H:%M:%S')}.{utc.microsecond // 1000:03d}'"


def _entity_clause(entity: Entity) -> str:
    parts: tuple[object, ...] = (entity,) if isinstance(entity, str) else tuple(entity)
    if not 1 <= len(parts) <= len(_KEY_NAMES):
        msg = f"entity {entity!r} has {len(parts)} parts; expected hotel_id[, room_type[, stay_date]]"
        raise BackfillError(msg)
    terms = []
    for name, value in zip(_KEY_NAMES, parts, strict=False):
        text = value.isoformat() if isinstance(value, date) else value
        if not isinstance(text, str) or not text:
            msg = f"entity {entity!r}: {name} {value!r} is not a non-empty string"
            raise BackfillError(msg)
        terms.append(f"\"{name}\" = '{text.replace(chr(39), chr(39) * 2)}'")
    return f"({' AND '.join(terms)})"
