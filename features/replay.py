"""Features of in-process replays (training frames, benchmarks) with the history's logic: as of each read.

A replay that never runs Kafka or Flink (a bootstrap training frame, a benchmark) still needs the
values the deployed job would serve. :func:`events_frame` turns simulated records into the raw-event
rows the offline store keeps (the contract's fields, and the job's columns by the contract's rules:
:func:`events.contract.flags` for prices kept out of price features); :func:`features_at` reads
every catalogue feature as of given (stay key, time) points through :func:`features.asof.asof_rows`,
the computation the offline history uses, with the views' TTLs as the online store applies them.

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

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from events.catalog import ALL_FEATURES, DAY_MS, DERIVED_FEATURES, STAY_KEYS, VIEW_SPECS, derive
from events.contract import HotelProfile, flags
from events.models import Record
from features.asof import asof_rows
from features.config import DEFAULT_TTLS
from features.raw_events import EVENTS_SCHEMA

POINT_COLUMNS: tuple[str, ...] = (*STAY_KEYS, "event_time")
"""Columns of the points :func:`features_at` reads at: the stay key and the instant (UTC)."""


def record_row(record: Record, hotels: Mapping[str, HotelProfile] | None = None) -> dict[str, Any]:
    """One behaviour record as a raw-event row, with the columns the job computes for it."""
    body = record.model_dump(mode="json")
    kind = body.get("event_type")
    marks = flags(record, hotels)
    plausible = "price_outlier" not in marks
    rooms = int(body.get("rooms") or 1)
    t = int(body["event_time"])
    row = {name: body.get(name) for name in EVENTS_SCHEMA.names if name in body}
    row.update(
        event_time=t, is_search=float(kind == "search"), is_view=float(kind == "view"),
        n_booked=float(rooms if kind == "booking" else 0), n_cancelled=float(rooms if kind == "cancellation" else 0),
        tile_price_shown=body.get("price_shown") if plausible else None,
        tile_rate=body.get("rate") if plausible else None, lead_days=None,
    )
    if kind in ("booking", "cancellation"):
        row["rooms"] = rooms
    if kind == "search":  # whole days from the event to the stay date's UTC midnight, truncated (TIMESTAMPDIFF)
        stay = int(datetime.fromisoformat(str(body["stay_date"])).replace(tzinfo=UTC).timestamp() * 1000)
        row["lead_days"] = float(int((stay - t) / DAY_MS))
    return row


def events_frame(records: Iterable[Record], hotels: Mapping[str, HotelProfile] | None = None) -> pd.DataFrame:
    """Raw-event rows of the behaviour records (others skipped), ``event_time`` as a UTC timestamp."""
    rows = [record_row(r, hotels) for r in records if hasattr(r, "stay_date")]
    frame = pd.DataFrame(rows, columns=[c for c in EVENTS_SCHEMA.names if not c.startswith("source_")])
    frame["event_time"] = pd.to_datetime(frame["event_time"], unit="ms", utc=True)
    return frame


def features_at(events: pd.DataFrame, points: pd.DataFrame) -> pd.DataFrame:
    """Every catalogue feature as of each point: the newest as-of row of its key at or before it, within the TTL.

    ``points`` has :data:`POINT_COLUMNS`; the result has :data:`events.catalog.ALL_FEATURES`, in the
    points' order (NaN where the key had no event in the view's TTL, as the online store serves it).
    """
    at = points[list(POINT_COLUMNS)].copy()
    at["stay_date"] = at["stay_date"].astype(str)
    at["event_time"] = pd.to_datetime(at["event_time"], utc=True).astype("datetime64[us, UTC]")
    at["__point"] = np.arange(len(at))
    at = at.sort_values("event_time", kind="stable")
    out = pd.DataFrame(index=at["__point"])
    for view in VIEW_SPECS:
        keys = list(view.keys)
        rows = asof_rows(events, view).sort_values("event_timestamp", kind="stable")
        names = [f.name for f in view.features]
        joined = pd.merge_asof(at, rows[[*keys, "event_timestamp", *names]], left_on="event_time",
                               right_on="event_timestamp", by=keys, direction="backward",
                               tolerance=pd.Timedelta(DEFAULT_TTLS[view.name]))
        for name in names:
            out[name] = joined[name].to_numpy(dtype="float64")
    out = out.sort_index()
    records = out.astype(object).where(out.notna(), None).to_dict("records")
    derived = pd.DataFrame([derive(dict(r)) for r in records], index=out.index)
    for name in DERIVED_FEATURES:
        out[name] = pd.to_numeric(derived[name], errors="coerce").astype("float64")
    return out[list(ALL_FEATURES)].reset_index(drop=True)
