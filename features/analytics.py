"""Analyst queries: Druid SQL when Druid is up, the same SQL on DuckDB over the offline store when not.

Druid is reached through pydruid's DB-API. The offline store (date-partitioned parquet under
``<offline_root>/features_v1/date=YYYY-MM-DD/*.parquet``) is registered in DuckDB as a view
named like the Druid datasource, ``features_v1``, with Druid's schema: ``__time`` (the
feature time, UTC), string keys, ``version`` as BIGINT and every stored catalogue feature as DOUBLE.
So a query such as ``SELECT hotel_id, COUNT(*) FROM features_v1 WHERE "__time" >= TIMESTAMP
'2026-01-01 00:00:00' GROUP BY hotel_id`` runs unchanged on either engine, and both results
come back with the same column dtypes (timestamps as UTC, integers as int64, reals as float64).

The raw events the feature job accepted (:mod:`features.raw_events`) are the table ``events`` on
DuckDB: one row per event with the contract's field names (``event_type``, ``event_time``,
``hotel_id``, ``room_type``, ``stay_date``, ``price_shown``, ``price_paid``, ``rooms``, ``rate``,
``competitor_id``, ``rooms_left``, ``capacity``, ``channel``, ``segment`` ...), so that "bookings and
mean price paid per hotel" or "cancellations by lead time" are answered without Druid
(:data:`TABLES` describes both tables).

Example:
    >>> import tempfile
    >>> res = query("SELECT COUNT(*) AS n FROM features_v1", engine="duckdb", offline_root=tempfile.mkdtemp())
    >>> res.engine, int(res.frame["n"][0])
    ('duckdb', 0)
    >>> query("SELECT COUNT(*) AS n FROM events", engine="duckdb", offline_root=tempfile.mkdtemp()).frame["n"][0]
    np.int64(0)

Exception tree (until :mod:`features` gets its own ``errors`` module)::

    AnalyticsError
    ├── EngineUnavailable   neither Druid nor the offline store can answer (says which was tried)
    └── QueryFailed         the engine rejected or failed the query (carries its message)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import duckdb
import httpx
import pandas as pd
import requests
from pydruid.db import connect
from pydruid.db import exceptions as druid_exc

from events.catalog import VIEWS
from features.raw_events import EVENTS, EVENTS_SCHEMA, SOURCE_KEYS, event_files

Engine = Literal["druid", "duckdb"]

DATASOURCE = "features_v1"
STORED_FEATURES: tuple[str, ...] = tuple(name for _, names in VIEWS.values() for name in names)
"""Features that ``features.v1`` rows carry (the catalogue's derived ratios are computed by readers)."""
KEY_COLUMNS: tuple[str, ...] = ("hotel_id", "room_type", "stay_date", "view")
FEATURE_SCHEMA: Mapping[str, str] = {
    **dict.fromkeys(KEY_COLUMNS, "VARCHAR"),
    "version": "BIGINT",
    **dict.fromkeys(STORED_FEATURES, "DOUBLE"),
}
"""Columns of the ``features_v1`` datasource besides ``__time``, with their SQL types."""

TABLES: Mapping[str, str] = {
    DATASOURCE: "one row per feature row the job wrote: __time (feature time, UTC), hotel_id, room_type, "
                "stay_date, view, version and every stored feature (Druid and DuckDB)",
    EVENTS: "one row per event the job accepted, with the contract's field names: event_id, event_type, "
            "event_time, hotel_id, room_type, stay_date, channel, segment, nights, guests, rooms, price_shown, "
            "price_paid, rate, competitor_id, rooms_left, capacity, booking_id; and the job's columns is_search, "
            "is_view, n_booked, n_cancelled, lead_days (DuckDB over the offline store)",
}
"""The tables an analyst query can name, and what each holds (``pricestream query --help`` lists them)."""

_ISO_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")
_MAX_ERROR_CHARS = 800  # Calcite lists every token it expected; the head says what went wrong
_HEALTH_TIMEOUT_S = 2.0  # a health probe that takes longer means "not reachable" for auto mode


class AnalyticsError(Exception):
    """Root of the errors raised by analyst queries and backfills."""


class EngineUnavailable(AnalyticsError):
    """No engine that the caller allowed can answer."""


class QueryFailed(AnalyticsError):
    """The engine rejected or failed the query."""


@dataclass(frozen=True)
class QueryResult:
    """Rows of a query and the engine that produced them."""

    frame: pd.DataFrame
    engine: Engine

    def write(self, path: Path | str) -> Path:
        """Write the rows to ``.csv`` or ``.parquet`` (chosen by the suffix); returns the path."""
        return write_frame(self.frame, path)


def write_frame(frame: pd.DataFrame, path: Path | str) -> Path:
    """Write ``frame`` as CSV (ISO-8601 timestamps) or parquet, by the suffix of ``path``.

    Raises:
        ValueError: the suffix is neither ``.csv`` nor ``.parquet``.
    """
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".csv":
        frame.to_csv(out, index=False, date_format="%Y-%m-%dT%H:%M:%S.%fZ")
    elif out.suffix == ".parquet":
        frame.to_parquet(out, index=False)
    else:
        msg = f"path {str(out)!r}: suffix {out.suffix!r} is not supported, expected '.csv' or '.parquet'"
        raise ValueError(msg)
    return out


def druid_available(druid_url: str) -> bool:
    """True if the Druid router or broker at ``druid_url`` answers its health check."""
    try:
        resp = httpx.get(f"{druid_url.rstrip('/')}/status/health", timeout=_HEALTH_TIMEOUT_S)
    except httpx.HTTPError:
        return False
    return resp.status_code == 200 and resp.text.strip() == "true"


def query(
    sql: str,
    *,
    engine: Literal["auto", "druid", "duckdb"] = "auto",
    druid_url: str | None = None,
    offline_root: Path | str | None = None,
    timeout: float = 60.0,
) -> QueryResult:
    """Run ``sql`` on Druid, or on DuckDB over the offline store.

    ``engine="auto"`` asks Druid when ``druid_url`` is given and healthy, and falls back to
    DuckDB over ``offline_root`` otherwise (also when Druid drops the connection mid-query).

    Raises:
        EngineUnavailable: the requested engine, or in auto mode both, cannot be reached.
        QueryFailed: the engine rejected the query (bad SQL, unknown column ...).
    """
    use_druid = engine == "druid" or (engine == "auto" and druid_url is not None and druid_available(druid_url))
    if use_druid:
        if druid_url is None:
            msg = "druid_url is None; engine='druid' needs the router or broker URL"
            raise EngineUnavailable(msg)
        try:
            return QueryResult(query_druid(sql, druid_url=druid_url, timeout=timeout), "druid")
        except EngineUnavailable:
            if engine == "druid" or offline_root is None:
                raise
    if offline_root is None:
        msg = f"Druid at {druid_url!r} is not reachable and offline_root is None; give one of them"
        raise EngineUnavailable(msg)
    return QueryResult(query_duckdb(sql, offline_root=offline_root), "duckdb")


def query_druid(sql: str, *, druid_url: str, timeout: float = 60.0) -> pd.DataFrame:
    """Run ``sql`` on Druid through pydruid's DB-API; returns normalised columns.

    Raises:
        EngineUnavailable: Druid cannot be reached.
        QueryFailed: Druid rejected the query.
    """
    parts = urlsplit(druid_url)
    conn = connect(
        host=parts.hostname or "localhost",
        port=parts.port or (443 if parts.scheme == "https" else 80),
        path="/druid/v2/sql/",
        scheme=parts.scheme or "http",
        header=True,  # column names even when no row comes back
        context={"timeout": int(timeout * 1000)},
    )
    try:
        cursor = conn.cursor()
        cursor.execute(sql)
        rows = cursor.fetchall()
        names = [col[0] for col in cursor.description or []]
    except requests.RequestException as exc:
        msg = f"Druid at {druid_url} is not reachable: {exc}"
        raise EngineUnavailable(msg) from exc
    except druid_exc.Error as exc:
        msg = f"Druid rejected the query: {str(exc)[:_MAX_ERROR_CHARS]}"
        raise QueryFailed(msg) from exc
    finally:
        conn.close()
    return normalise(pd.DataFrame([tuple(r) for r in rows], columns=names))


def query_duckdb(sql: str, *, offline_root: Path | str, parameters: list[Any] | None = None) -> pd.DataFrame:
    """Run ``sql`` on DuckDB with the offline store registered as ``features_v1``.

    Raises:
        QueryFailed: DuckDB rejected the query.
    """
    con = offline_connection(offline_root)
    try:
        frame = con.execute(sql, parameters).df()
    except duckdb.Error as exc:
        msg = f"DuckDB rejected the query over {offline_root}: {str(exc)[:_MAX_ERROR_CHARS]}"
        raise QueryFailed(msg) from exc
    finally:
        con.close()
    return normalise(frame)


def offline_connection(offline_root: Path | str) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the view ``features_v1`` over ``<offline_root>/features_v1``.

    Columns missing from the parquet files come back as typed NULLs, so the view always has
    Druid's schema. Time zone is UTC, as in Druid.
    """
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    _events_view(con, offline_root)
    files = sorted((Path(offline_root) / DATASOURCE).glob("date=*/*.parquet"))
    if not files:
        cols = ", ".join(f'CAST(NULL AS {t}) AS "{c}"' for c, t in FEATURE_SCHEMA.items())
        con.execute(f'CREATE VIEW {DATASOURCE} AS SELECT CAST(NULL AS TIMESTAMP) AS "__time", {cols} WHERE false')
        return con
    source = f"read_parquet({[str(f) for f in files]!r}, hive_partitioning = false, union_by_name = true)"
    present = {row[0]: row[1] for row in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
    time_type = present.get("feature_time", "")
    time_expr = "epoch_ms(feature_time)" if "INT" in time_type else "CAST(feature_time AS TIMESTAMP)"
    cols = ", ".join(
        f'CAST("{c}" AS {t}) AS "{c}"' if c in present else f'CAST(NULL AS {t}) AS "{c}"'
        for c, t in FEATURE_SCHEMA.items()
    )
    con.execute(f'CREATE VIEW {DATASOURCE} AS SELECT {time_expr} AS "__time", {cols} FROM {source}')
    return con


def _events_view(con: duckdb.DuckDBPyConnection, offline_root: Path | str) -> None:
    """The view ``events``: the raw events, one row per accepted record (a redelivered copy counted once)."""
    files = event_files(offline_root)
    if not files:
        con.register("__events_empty", EVENTS_SCHEMA.empty_table())
        con.execute(f"CREATE VIEW {EVENTS} AS SELECT * FROM __events_empty")
        return
    source = f"read_parquet({[str(f) for f in files]!r}, hive_partitioning = false, union_by_name = true)"
    keys = ", ".join(SOURCE_KEYS)
    con.execute(f"CREATE VIEW {EVENTS} AS SELECT * EXCLUDE (__copy) FROM (SELECT *, row_number() OVER "
                f"(PARTITION BY {keys}) AS __copy FROM {source}) WHERE __copy = 1")


def normalise(frame: pd.DataFrame) -> pd.DataFrame:
    """Give both engines' results the same dtypes.

    Druid's JSON brings timestamps as ``...Z`` strings and numbers as Python objects; DuckDB
    brings naive UTC timestamps and sometimes nullable integers. After this, timestamps are
    ``datetime64[ms, UTC]``, integers without nulls ``int64``, other numbers ``float64``.

    Example:
        >>> f = normalise(pd.DataFrame({"t": ["2026-01-01T00:00:00.000Z"], "n": [3]}))
        >>> str(f["t"].dtype), str(f["n"].dtype)
        ('datetime64[ms, UTC]', 'int64')
    """
    out = frame.copy()
    for name in out.columns:
        out[name] = _normalise_column(out[name])
    return out


def _normalise_column(col: pd.Series) -> pd.Series:
    if pd.api.types.is_datetime64_any_dtype(col):
        stamped = col.dt.tz_localize("UTC") if col.dt.tz is None else col.dt.tz_convert("UTC")
        return stamped.astype("datetime64[ms, UTC]")
    if col.dtype == object:
        values = col.dropna()
        if len(values) and all(isinstance(v, str) and _ISO_UTC.match(v) for v in values):
            return pd.to_datetime(col, utc=True, format="ISO8601").astype("datetime64[ms, UTC]")
        if len(values) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            col = pd.to_numeric(col)
        else:
            return col
    if pd.api.types.is_integer_dtype(col):
        return col.astype("float64") if col.isna().any() else col.astype("int64")
    if pd.api.types.is_float_dtype(col):
        return col.astype("float64")
    return col
