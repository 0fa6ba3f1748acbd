"""Features of in-process replays (training frames, benchmarks) with the history's logic: as of each read.

A replay that never runs Kafka or Flink (a bootstrap training frame, a benchmark) still needs the
values the deployed job would serve. :func:`events_frame` turns simulated records into the raw-event
rows the offline store keeps (the contract's fields, and the job's columns by the contract's rules:
:func:`events.contract.flags` for prices kept out of price features); :func:`features_at` reads
every catalogue feature as of given (stay key, time) points through :func:`features.asof.values_at`,
the computation the offline history uses, with the views' TTLs as the online store applies them
(:func:`fresh`).

Example:
    >>> from datetime import timedelta
    >>> from market import Market, MarketConfig, simulate
    >>> market = Market(MarketConfig(hotels=1, seed=1))
    >>> events = events_frame(simulate(market, duration=timedelta(hours=6), rng_seed=1))
    >>> points = events.loc[events["event_type"] == "search", ["hotel_id", "room_type", "stay_date", "event_time"]]
    >>> got = features_at(events, points.head(5))
    >>> bool((got["searches_24h"] >= 1).all()), list(got.columns) == list(ALL_FEATURES)
    (True, True)
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime
from operator import attrgetter
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel

from events.catalog import ALL_FEATURES, DAY_MS, DERIVED_FEATURES, STAY_KEYS, VIEW_SPECS, derive
from events.contract import HotelProfile, flags
from events.models import Record
from features.asof import SortedEvents, sorted_events, values_at
from features.config import DEFAULT_TTLS
from features.raw_events import EVENTS_SCHEMA

POINT_COLUMNS: tuple[str, ...] = (*STAY_KEYS, "event_time")
"""Columns of the points :func:`features_at` reads at: the stay key and the instant (UTC)."""
_FIELDS = tuple(c for c in EVENTS_SCHEMA.names if not c.startswith("source_"))
_NOT_JSON = ("event_id", "event_time", "stay_date", "booking_id", "decision_id")
"""The record fields whose Python values are not their JSON values (uuids, times, dates)."""
_CHUNK = 65_536
"""Records of one type turned into rows at once: bounds the records held (a bootstrap reads a million)."""
_PRICED = frozenset({"view", "competitor_rate"})
"""Event types with a price that the windows read (the outlier flag keeps it out of them)."""


def ttl_ms(view: str) -> int:
    """How long after a view's newest event the online store still serves it (ms)."""
    return int(DEFAULT_TTLS[view].total_seconds() * 1000)


def fresh(view: str, anchor_ms: Any, now_ms: Any) -> Any:
    """Whether a view as of ``anchor_ms`` is still served at ``now_ms`` (scalars or arrays; the TTL is inclusive)."""
    return now_ms - anchor_ms <= ttl_ms(view)


def _json(value: Any) -> Any:
    if isinstance(value, datetime):
        return round(value.timestamp() * 1000)
    if isinstance(value, date):
        return value.isoformat()
    return str(value) if isinstance(value, uuid.UUID) else value


def record_row(record: Record, hotels: Mapping[str, HotelProfile] | None = None) -> dict[str, Any]:
    """One behaviour record as a raw-event row, with the columns the job computes for it."""
    body = record.__dict__
    kind = body.get("event_type")
    plausible = kind not in _PRICED or "price_outlier" not in flags(record, hotels)
    rooms = int(body.get("rooms") or 1)
    row = {name: body[name] for name in _FIELDS if name in body}
    for name in _NOT_JSON:
        if name in row:
            row[name] = _json(row[name])
    t = int(row["event_time"])
    row.update(
        is_search=float(kind == "search"), is_view=float(kind == "view"),
        n_booked=float(rooms if kind == "booking" else 0), n_cancelled=float(rooms if kind == "cancellation" else 0),
        tile_price_shown=body.get("price_shown") if plausible else None,
        tile_rate=body.get("rate") if plausible else None, lead_days=None,
    )
    if kind in ("booking", "cancellation"):
        row["rooms"] = rooms
    if kind == "search":  # whole days from the event to the stay date's UTC midnight, truncated (TIMESTAMPDIFF)
        stay = int(datetime.fromisoformat(str(row["stay_date"])).replace(tzinfo=UTC).timestamp() * 1000)
        row["lead_days"] = float(int((stay - t) / DAY_MS))
    return row


def events_frame(records: Iterable[Record], hotels: Mapping[str, HotelProfile] | None = None) -> pd.DataFrame:
    """Raw-event rows of the behaviour records (others skipped), ``event_time`` as a UTC timestamp.

    The same rows as :func:`record_row`, built a column at a time (a bootstrap frame reads a million events).
    """
    pending: dict[type, tuple[list[Record], list[int]]] = {}
    parts: list[pd.DataFrame] = []
    for i, record in enumerate(r for r in records if hasattr(r, "stay_date")):
        batch, order = pending.setdefault(type(record), ([], []))
        batch.append(record)
        order.append(i)
        if len(batch) >= _CHUNK:
            parts.append(_typed_part(type(record), batch, hotels).set_axis(order))
            del pending[type(record)]
    parts += [_typed_part(kind, batch, hotels).set_axis(order) for kind, (batch, order) in pending.items()]
    frame = pd.concat(parts).sort_index() if parts else pd.DataFrame(columns=list(_FIELDS))
    frame = frame.reindex(columns=list(_FIELDS)).reset_index(drop=True)
    frame["event_time"] = pd.to_datetime(frame["event_time"].astype("int64"), unit="ms", utc=True)
    return frame


def _typed_part(kind: type[BaseModel], batch: list[Record], hotels: Mapping[str, HotelProfile] | None) -> pd.DataFrame:
    """The raw-event rows of records of one type (one set of fields), with the job's columns."""
    fields = [f for f in _FIELDS if f in kind.model_fields]
    part = pd.DataFrame(list(map(attrgetter(*fields), batch)), columns=fields)
    part["event_time"] = pd.to_datetime(part["event_time"], utc=True).dt.round("ms").astype("datetime64[ms, UTC]") \
        .astype("int64")
    for name in ("event_id", "stay_date", "booking_id", "decision_id"):
        if name in part:
            part[name] = [None if v is None else str(v) for v in part[name]]
    event_type = str(kind.model_fields["event_type"].default)
    rooms = part["rooms"].fillna(1).astype(float) if "rooms" in part else pd.Series(1.0, index=part.index)
    part["is_search"], part["is_view"] = float(event_type == "search"), float(event_type == "view")
    part["n_booked"] = rooms if event_type == "booking" else 0.0
    part["n_cancelled"] = rooms if event_type == "cancellation" else 0.0
    plausible = [True] * len(batch) if event_type not in _PRICED else \
        ["price_outlier" not in flags(r, hotels) for r in batch]
    for column, source in (("tile_price_shown", "price_shown"), ("tile_rate", "rate")):
        part[column] = part[source].where(plausible) if source in part else np.nan
    part["lead_days"] = np.nan
    if event_type == "search":  # whole days from the event to the stay date's UTC midnight, truncated (TIMESTAMPDIFF)
        stay = pd.to_datetime(part["stay_date"]).astype("datetime64[ms]").astype("int64")
        part["lead_days"] = np.trunc((stay - part["event_time"]) / DAY_MS).astype(float)
    return part


def features_at(events: pd.DataFrame, points: pd.DataFrame) -> pd.DataFrame:
    """Every catalogue feature as of each point: its key's newest instant at or before it, within the TTL.

    ``points`` has :data:`POINT_COLUMNS`; the result has :data:`events.catalog.ALL_FEATURES`, in the
    points' order (NaN where the key had no event in the view's TTL, as the online store serves it).
    """
    at = points[list(POINT_COLUMNS)].reset_index(drop=True)
    at["stay_date"] = at["stay_date"].astype(str)
    at["event_time"] = pd.to_datetime(at["event_time"], utc=True)
    now = np.asarray(at["event_time"].astype("datetime64[ms, UTC]").astype("int64"))
    out = pd.DataFrame(index=at.index)
    prepared: dict[tuple[tuple[str, ...], bool], SortedEvents] = {}
    for view in VIEW_SPECS:
        shape = (view.keys, view.tile_ms is None)  # the stay views share one sort
        if shape not in prepared:
            prepared[shape] = sorted_events(events, view)
        data = prepared[shape]
        values, anchor = values_at(data, view, at)
        served = (anchor >= 0) & fresh(view.name, anchor, now)
        for name in values.columns:
            out[name] = np.where(served, values[name].to_numpy(dtype="float64"), np.nan)
    records = out.astype(object).where(out.notna(), None).to_dict("records")
    derived = pd.DataFrame([derive(dict(r)) for r in records], index=out.index)
    for name in DERIVED_FEATURES:
        out[name] = pd.to_numeric(derived[name], errors="coerce").astype("float64")
    return out[list(ALL_FEATURES)]
