"""Point-in-time window values from the raw events: the job's windows, as of every event time of every key.

For a key and an instant ``t`` at which it has events, a windowed view's value is the aggregate over
the key's events whose tile starts at or after ``floor(t, tile) - window`` and whose event time is at
or before ``t`` (:mod:`events.catalog`'s semantics: the value the job serves once its newest event is
at ``t``). Rows are keyed by (key, ``t``): one per distinct event time, holding every event of that
time, so no row ever holds part of an instant, and the rows depend on the set of events only (not on
the order or the batches in which they arrived). Read as of any instant ``s`` (Feast's
point-in-time join: the newest row at or before ``s``), they give the value served at ``s``.

The inputs are the job's own columns of each event (``features.raw_events``: ``is_search``,
``n_booked``, ``tile_price_shown`` ...), computed once on the JVM, and the windows, tiles, partials
and aggregations of :data:`events.catalog.VIEW_SPECS`, the declaration the job's tile spec is
generated from. Events of one instant are taken in event-id order (the job breaks the tie of two
rates of one competitor in one millisecond by offset, which a replay in another order changes).
``version`` is ``t`` in epoch milliseconds (a key has one row per instant): it grows with every row
of the key, and a replay, or a rewrite of the rows of one date only, reproduces it.

Example:
    >>> ev = pd.DataFrame({"hotel_id": ["h1"] * 3, "room_type": ["std"] * 3, "stay_date": ["2026-07-01"] * 3,
    ...     "event_time": pd.to_datetime([0, 3_900_000, 3_900_000], unit="ms", utc=True),
    ...     "event_id": ["a", "b", "c"], "event_type": ["search"] * 3, "is_search": [1.0, 1.0, 1.0]})
    >>> rows = asof_rows(ev, SPECS["stay_24h"])
    >>> rows["searches_24h"].tolist(), rows["version"].tolist()
    ([1.0, 3.0], [0, 3900000])
    >>> asof_rows(ev, SPECS["stay_1h"])["searches_1h"].tolist()  # at 01:05 the tile of 00:00 left the hour
    [1.0, 2.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from events.catalog import SPECS, ViewSpec

TIME = "event_time"
"""The raw events' event time (UTC timestamp); rows carry it as ``event_timestamp``."""
_SPAN_BITS = 42
"""Milliseconds of a key's span in the composite sort key (2^42 ms: 139 years)."""
_TILE_INPUTS = {"price_shown": "tile_price_shown", "rate": "tile_rate"}
"""Raw-event column of each tile input column that the contract's field of the same name shadows."""
_INVENTORY = ("rooms_left", "capacity")
_SCALE = 1_000_000
"""Partials are summed in millionths: exact for prices in cents and whole counts and days (a window of a
million events of squares up to 10^6 stays below 2^63)."""


def _ms(frame: pd.DataFrame) -> NDArray[Any]:
    return np.asarray(pd.to_datetime(frame[TIME], utc=True).astype("datetime64[ms, UTC]").astype("int64"))


def _column(events: pd.DataFrame, name: str) -> NDArray[Any]:
    source = _TILE_INPUTS.get(name, name)
    if source not in events:
        return np.full(len(events), np.nan)
    return np.asarray(pd.to_numeric(events[source], errors="coerce").astype("float64"))


def _ordered(events: pd.DataFrame, keys: Sequence[str]) -> tuple[pd.DataFrame, NDArray[Any], NDArray[Any]]:
    """Events sorted by key, time and event id; their key codes and times in ms."""
    out = events.assign(__t=_ms(events))
    out = out.sort_values([*keys, "__t", "event_id"], kind="stable").reset_index(drop=True)
    codes = out.groupby(list(keys), sort=False, dropna=False).ngroup().to_numpy()
    return out, codes.astype("int64"), out["__t"].to_numpy()


def _points(codes: NDArray[Any], times: NDArray[Any]) -> NDArray[Any]:
    """Index of the last event of each (key, time): the rows' positions."""
    if len(codes) == 0:
        return np.zeros(0, dtype="int64")
    last = np.ones(len(codes), dtype=bool)
    last[:-1] = (codes[1:] != codes[:-1]) | (times[1:] != times[:-1])
    return np.flatnonzero(last)


def _window_sums(view: ViewSpec, events: pd.DataFrame, codes: NDArray[Any], times: NDArray[Any],
                 points: NDArray[Any]) -> tuple[dict[str, NDArray[Any]], NDArray[Any]]:
    """Each partial's total over each point's window, and each window's first event index."""
    assert view.tile_ms is not None and view.window_ms is not None  # noqa: S101 (windowed views only reach here)
    base = times.min() if len(times) else 0
    composite = (codes << _SPAN_BITS) + (times - base)
    at = times[points]
    start = np.maximum(at - np.mod(at, view.tile_ms) - view.window_ms - base, 0)
    lo = np.searchsorted(composite, (codes[points] << _SPAN_BITS) + start, side="left")
    totals: dict[str, NDArray[Any]] = {}
    for partial in view.partials:
        kind, _, name = partial.partition(":")
        if partial == "n":
            values = np.ones(len(events))
        else:
            column = _column(events, name)
            values = {"sum": np.nan_to_num(column), "n": (~np.isnan(column)).astype("float64"),
                      "sq": np.nan_to_num(column) ** 2}[kind]
        # Fixed point: integer sums are exact, so a window's total does not depend on where the
        # cumulative sum started (which events were read), and a replay gives the same bits.
        cum = np.concatenate([[0], np.cumsum(np.round(values * _SCALE).astype("int64"))])
        totals[partial] = (cum[points + 1] - cum[lo]) / _SCALE
    return totals, lo


def _rates(events: pd.DataFrame, codes: NDArray[Any], points: NDArray[Any], lo: NDArray[Any]) -> NDArray[Any]:
    """Per point, the sorted latest rate of each competitor in its window (events in key, time, id order)."""
    rate = _column(events, "rate")
    competitor = events["competitor_id"].to_numpy() if "competitor_id" in events else np.full(len(events), None)
    has = np.flatnonzero(~np.isnan(rate) & pd.notna(competitor))
    out = np.empty(len(points), dtype=object)
    for i, (first, last) in enumerate(zip(lo, points, strict=True)):
        inside = has[np.searchsorted(has, first):np.searchsorted(has, last, side="right")]
        latest = {competitor[j]: rate[j] for j in inside}  # later events overwrite earlier ones
        out[i] = np.sort(np.fromiter(latest.values(), dtype="float64", count=len(latest)))
    return out


def _value(agg: str, column: str, totals: dict[str, NDArray[Any]], rates: NDArray[Any] | None) -> NDArray[Any]:
    if agg == "sum":
        return totals[f"sum:{column}"]
    if agg in ("comp_median", "comp_min"):
        pick = np.median if agg == "comp_median" else np.min
        return np.array([float(pick(r)) if len(r) else np.nan for r in rates], dtype="float64")  # type: ignore[union-attr]
    n = totals[f"n:{column}"]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0.5, totals[f"sum:{column}"] / n, np.nan)
        if agg == "mean":
            return mean
        return np.where(n > 0.5, np.sqrt(np.maximum(totals[f"sq:{column}"] / n - mean * mean, 0.0)), np.nan)


def asof_rows(events: pd.DataFrame, view: ViewSpec) -> pd.DataFrame:
    """One row per (key, distinct event time) of ``view``: its keys, ``event_timestamp``, ``version``, features.

    ``events`` holds the raw events (:func:`features.raw_events.read_events`) of every key wanted,
    with every event that can be in a wanted row's window. The inventory view (a state) has a row
    per inventory event time: the newest inventory event's values.
    """
    keys = list(view.keys)
    if view.tile_ms is None:
        events = events[events["event_type"] == "inventory"]
    ordered, codes, times = _ordered(events, keys)
    points = _points(codes, times)
    out = ordered.loc[points, keys].reset_index(drop=True)
    out["event_timestamp"] = pd.to_datetime(times[points], unit="ms", utc=True).astype("datetime64[us, UTC]")
    out["version"] = times[points].astype("int64")
    if view.tile_ms is None:
        left, capacity = (_column(ordered, c)[points] for c in _INVENTORY)
        with np.errstate(invalid="ignore", divide="ignore"):
            values = {"rooms_left": left, "capacity": capacity, "occupancy": 1.0 - left / capacity}
        for f in view.features:
            out[f.name] = values[f.name]
        return out
    totals, lo = _window_sums(view, ordered, codes, times, points)
    rates = _rates(ordered, codes, points, lo) if view.competitor_rates else None
    for f in view.features:
        out[f.name] = _value(f.agg, f.column, totals, rates)
    return out


def view_spec(name: str) -> ViewSpec:
    """The catalogue's spec of a view (one declaration for the job and the history)."""
    return SPECS[name]
