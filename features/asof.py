"""Point-in-time window values from the raw events: the job's windows, as of any instant of any key.

For a key and an instant ``t`` at which it has events, a windowed view's value is the aggregate over
the key's events whose tile starts at or after ``floor(t, tile) - window`` and whose event time is at
or before ``t`` (:mod:`events.catalog`'s semantics: the value the job serves once its newest event is
at ``t``). Rows are keyed by (key, ``t``): one per distinct event time, holding every event of that
time, so no row ever holds part of an instant, and the rows depend on the set of events only (not on
the order or the batches in which they arrived). Read as of any instant ``s`` (Feast's
point-in-time join: the newest row at or before ``s``), they give the value served at ``s``.

This module is the one Python implementation of the windows. Its drivers: :func:`asof_rows` (the
offline history, a row per event instant), :func:`values_at` (training frames and the skew command:
the values as of arbitrary instants, computed at those instants only) and the benchmarks' incremental
reads (``bench/stream_features.py``), which share :func:`window_start`, :func:`fixed_point`,
:func:`aggregate` and :func:`competitor_aggregate`. The integration tests hold them equal to the
job's (JVM tile) values on the same events.

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
    >>> points = pd.DataFrame({"hotel_id": ["h1", "h1"], "room_type": ["std"] * 2,
    ...     "stay_date": ["2026-07-01"] * 2, "event_time": pd.to_datetime([3_000_000, 9_000_000], unit="ms", utc=True)})
    >>> got, anchor = values_at(sorted_events(ev, SPECS["stay_24h"]), SPECS["stay_24h"], points)
    >>> got["searches_24h"].tolist(), anchor.tolist()  # as of the key's newest instant at or before each point
    ([1.0, 3.0], [0, 3900000])
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
SCALE = 1_000_000
"""Partials are summed in millionths: exact for prices in cents and whole counts and days (a window of a
million events of squares up to 10^6 stays below 2^63)."""
_RATE_CELLS = 4_000_000
"""Most (point, competitor) cells held at once when the competitors' latest rates are gathered."""


def tile_input(column: str) -> str:
    """The raw-event column a view's input ``column`` is read from (prices: the job's plausible copy)."""
    return _TILE_INPUTS.get(column, column)


def window_start(view: ViewSpec, anchor_ms: Any) -> Any:
    """Earliest event time in the window of ``view`` as of ``anchor_ms`` (scalar or array): the tile-rounded start.

    Example:
        >>> window_start(SPECS["stay_1h"], 3_900_000)  # 01:05: the window starts with the tile of 00:05
        300000
    """
    assert view.tile_ms is not None and view.window_ms is not None  # noqa: S101 (windowed views only reach here)
    return anchor_ms - anchor_ms % view.tile_ms - view.window_ms


def fixed_point(partial: str, value: float | None) -> int:
    """One event's contribution to a partial (``n``, ``sum:c``, ``n:c``, ``sq:c``), in millionths.

    The batch drivers compute the same numbers over arrays (:func:`_partial_units`).

    Example:
        >>> fixed_point("sum:price_shown", 80.5), fixed_point("sq:lead_days", 3.0), fixed_point("n:x", None)
        (80500000, 9000000, 0)
    """
    if partial == "n":
        return SCALE
    if value is None or value != value:
        return 0
    if partial.startswith("sum:"):
        return round(value * SCALE)
    return SCALE if partial.startswith("n:") else round(value * value * SCALE)


def _partial_units(partial: str, column: NDArray[Any]) -> NDArray[Any]:
    """:func:`fixed_point` of every event (``column`` holds the partial's input, NaN when missing)."""
    if partial == "n":
        return np.full(len(column), SCALE, dtype="int64")
    kind = partial.partition(":")[0]
    values = {"sum": np.nan_to_num(column), "n": (~np.isnan(column)).astype("float64"),
              "sq": np.nan_to_num(column) * np.nan_to_num(column)}[kind]
    return np.asarray(np.round(values * SCALE), dtype="int64")


def aggregate(agg: str, column: str, totals: dict[str, Any]) -> Any:
    """A ``sum``, ``mean`` or population ``std`` from a window's partial totals (fixed point, scalars or arrays).

    Example:
        >>> totals = {"sum:lead_days": 6 * SCALE, "n:lead_days": 3 * SCALE, "sq:lead_days": 14 * SCALE}
        >>> float(aggregate("mean", "lead_days", totals)), round(float(aggregate("std", "lead_days", totals)), 4)
        (2.0, 0.8165)
    """
    total = totals[f"sum:{column}"] / SCALE  # an int or an int64 array: no numpy call on the scalar path
    if agg == "sum":
        return total
    n = np.asarray(totals[f"n:{column}"]) / SCALE
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0.5, total / n, np.nan)
        if agg == "mean":
            return mean
        sq = np.asarray(totals[f"sq:{column}"]) / SCALE
        return np.where(n > 0.5, np.sqrt(np.maximum(sq / n - mean * mean, 0.0)), np.nan)


def competitor_aggregate(agg: str, rates: NDArray[Any]) -> NDArray[Any]:
    """Median or minimum per row of the competitors' latest rates (``[points, competitors]``, NaN: none).

    Example:
        >>> competitor_aggregate("comp_median", np.array([[70.0, np.nan, 90.0], [np.nan] * 3])).tolist()
        [80.0, nan]
    """
    if rates.shape[1] == 0:
        return np.full(len(rates), np.nan)
    ordered = np.sort(rates, axis=1)  # NaN last
    if agg == "comp_min":
        return ordered[:, 0]
    k = (~np.isnan(ordered)).sum(axis=1)
    lower = np.take_along_axis(ordered, np.maximum((k - 1) // 2, 0)[:, None], axis=1)[:, 0]
    upper = np.take_along_axis(ordered, (k // 2)[:, None] % ordered.shape[1], axis=1)[:, 0]
    return np.where(k > 0, (lower + upper) / 2.0, np.nan)


def _ms(frame: pd.DataFrame) -> NDArray[Any]:
    return np.asarray(pd.to_datetime(frame[TIME], utc=True).astype("datetime64[ms, UTC]").astype("int64"))


def _column(events: pd.DataFrame, name: str) -> NDArray[Any]:
    source = tile_input(name)
    if source not in events:
        return np.full(len(events), np.nan)
    return np.asarray(pd.to_numeric(events[source], errors="coerce").astype("float64"))


class SortedEvents:
    """Events in key, time and event-id order: their key codes, times (ms) and composite sort key.

    Sort once, read many views of the same keys (:func:`values_at`). Columns are read in that order
    (:meth:`column`) without copying the frame.
    """

    def __init__(self, events: pd.DataFrame, keys: Sequence[str]) -> None:
        self.keys = list(keys)
        self.frame = events.reset_index(drop=True)
        code = _key_codes(self.frame, self.keys)
        t = _ms(self.frame)
        tie = _tie_rank(self.frame, code, t)
        self.order = np.lexsort((tie, t, code)) if len(t) else np.zeros(0, dtype="int64")
        self.codes, self.times = code[self.order], t[self.order]
        self.base = int(self.times.min()) if len(self.times) else 0
        self.composite = (self.codes << _SPAN_BITS) + (self.times - self.base)

    def column(self, name: str) -> NDArray[Any]:
        """A view input column (:func:`tile_input`) in sorted order, float64, NaN where missing."""
        return np.asarray(_column(self.frame, name)[self.order])

    def raw(self, name: str) -> NDArray[Any]:
        """A raw column in sorted order (None where the events lack it)."""
        if name not in self.frame:
            return np.full(len(self.order), None, dtype=object)
        return np.asarray(self.frame[name].to_numpy()[self.order])

    def position(self, codes: NDArray[Any], at_ms: NDArray[Any]) -> NDArray[Any]:
        """Index of the last event of each key code at or before each time (-1: none; code -1: unknown key)."""
        offset = np.clip(at_ms - self.base, -1, (1 << _SPAN_BITS) - 1)
        found = np.searchsorted(self.composite, (codes << _SPAN_BITS) + offset, side="right") - 1
        ok = (codes >= 0) & (found >= 0)
        ok[ok] &= self.codes[found[ok]] == codes[ok]
        return np.where(ok, found, -1)

    def code_of(self, points: pd.DataFrame) -> NDArray[Any]:
        """The key code of each point's key (-1 where no event has it)."""
        firsts = self.order[np.flatnonzero(np.r_[True, self.codes[1:] != self.codes[:-1]])] if len(self.codes) else []
        known = pd.MultiIndex.from_frame(self.frame.loc[firsts, self.keys].astype(str))
        return np.asarray(known.get_indexer(pd.MultiIndex.from_frame(points[self.keys].astype(str))), dtype="int64")


def _key_codes(frame: pd.DataFrame, keys: list[str]) -> NDArray[Any]:
    """Integer codes of the keys, in the keys' sort order (one factorisation per column: no string sort)."""
    code = np.zeros(len(frame), dtype="int64")
    for name in keys:
        part, uniques = pd.factorize(frame[name].astype(str), sort=True)
        code = code * max(len(uniques), 1) + part
    return np.asarray(np.unique(code, return_inverse=True)[1], dtype="int64").reshape(-1)


def _tie_rank(frame: pd.DataFrame, code: NDArray[Any], t: NDArray[Any]) -> NDArray[Any]:
    """The event-id order among events of one key and one instant (0 for the others, which have no tie)."""
    rank = np.zeros(len(frame), dtype="int64")
    tied = pd.DataFrame({"c": code, "t": t}).duplicated(keep=False).to_numpy()
    if tied.any():
        ids = frame["event_id"].to_numpy()[tied].astype(str)
        rank[tied] = np.argsort(np.argsort(ids, kind="stable"), kind="stable")
    return rank


def _instants(codes: NDArray[Any], times: NDArray[Any]) -> NDArray[Any]:
    """Index of the last event of each (key, time): the rows' positions."""
    if len(codes) == 0:
        return np.zeros(0, dtype="int64")
    last = np.ones(len(codes), dtype=bool)
    last[:-1] = (codes[1:] != codes[:-1]) | (times[1:] != times[:-1])
    return np.flatnonzero(last)


def _latest_rates(data: SortedEvents, anchors: NDArray[Any], lo: NDArray[Any]) -> NDArray[Any]:
    """``[anchors, competitors]``: each competitor's latest rate in each window (later events win), NaN: none."""
    rate, competitor = data.column("rate"), pd.Series(data.raw("competitor_id"))
    has = np.flatnonzero(~np.isnan(rate) & competitor.notna().to_numpy())
    who, ids = pd.factorize(competitor.to_numpy()[has].astype(str))
    out = np.full((len(anchors), len(ids)), np.nan)
    for c in range(len(ids)):
        pos = has[who == c]
        j = np.searchsorted(pos, anchors, side="right") - 1
        ok = j >= 0
        ok[ok] &= pos[j[ok]] >= lo[ok]
        out[ok, c] = rate[pos[j[ok]]]
    return out


def _rates_in_blocks(data: SortedEvents, anchors: NDArray[Any], lo: NDArray[Any]) -> NDArray[Any]:
    """:func:`_latest_rates` a block of anchors at a time, so the matrix stays small (many competitors)."""
    competitors = max(int(pd.Series(data.raw("competitor_id")).nunique()), 1)
    step = max(_RATE_CELLS // competitors, 1)
    blocks = [_latest_rates(data, anchors[i:i + step], lo[i:i + step]) for i in range(0, len(anchors), step)]
    width = max((b.shape[1] for b in blocks), default=0)
    padded = [np.pad(b, ((0, 0), (0, width - b.shape[1])), constant_values=np.nan) for b in blocks]
    return np.vstack(padded) if padded else np.zeros((0, 0))


def _windowed(view: ViewSpec, data: SortedEvents, anchors: NDArray[Any]) -> dict[str, NDArray[Any]]:
    """Every feature of a windowed view as of each anchor (the index of the last event of an instant)."""
    start = np.maximum(window_start(view, data.times[anchors]) - data.base, 0)
    lo = np.searchsorted(data.composite, (data.codes[anchors] << _SPAN_BITS) + start, side="left")
    totals: dict[str, NDArray[Any]] = {}
    for partial in view.partials:
        column = data.column(partial.partition(":")[2]) if partial != "n" else np.zeros(len(data.times))
        # Fixed point: integer sums are exact, so a window's total does not depend on where the
        # cumulative sum started (which events were read), and a replay gives the same bits.
        cum = np.concatenate([[0], np.cumsum(_partial_units(partial, column))])
        totals[partial] = cum[anchors + 1] - cum[lo]
    out: dict[str, NDArray[Any]] = {}
    rates: NDArray[Any] | None = None
    for f in view.features:
        if f.agg in ("comp_median", "comp_min"):
            rates = _rates_in_blocks(data, anchors, lo) if rates is None else rates
            out[f.name] = competitor_aggregate(f.agg, rates)
        else:
            out[f.name] = np.asarray(aggregate(f.agg, f.column, totals), dtype="float64")
    return out


def _state(data: SortedEvents, anchors: NDArray[Any]) -> dict[str, NDArray[Any]]:
    """The inventory view as of each anchor: the newest inventory event's rooms left, capacity, occupancy."""
    left, capacity = (data.column(c)[anchors] for c in _INVENTORY)
    with np.errstate(invalid="ignore", divide="ignore"):
        return {"rooms_left": left, "capacity": capacity, "occupancy": 1.0 - left / capacity}


def _view_values(view: ViewSpec, data: SortedEvents, anchors: NDArray[Any]) -> dict[str, NDArray[Any]]:
    values = _state(data, anchors) if view.tile_ms is None else _windowed(view, data, anchors)
    return {f.name: values[f.name] for f in view.features}


def sorted_events(events: pd.DataFrame, view: ViewSpec) -> SortedEvents:
    """The events a view reads (the inventory view: inventory events only), sorted by its keys."""
    kept = events[events["event_type"] == "inventory"] if view.tile_ms is None else events
    return SortedEvents(kept, view.keys)


def asof_rows(events: pd.DataFrame, view: ViewSpec) -> pd.DataFrame:
    """One row per (key, distinct event time) of ``view``: its keys, ``event_timestamp``, ``version``, features.

    ``events`` holds the raw events (:func:`features.raw_events.read_events`) of every key wanted,
    with every event that can be in a wanted row's window. The inventory view (a state) has a row
    per inventory event time: the newest inventory event's values.
    """
    data = sorted_events(events, view)
    anchors = _instants(data.codes, data.times)
    out = data.frame.loc[data.order[anchors], list(view.keys)].reset_index(drop=True)
    out["event_timestamp"] = pd.to_datetime(data.times[anchors], unit="ms", utc=True).astype("datetime64[us, UTC]")
    out["version"] = data.times[anchors].astype("int64")
    for name, values in _view_values(view, data, anchors).items():
        out[name] = values
    return out


def values_at(data: SortedEvents, view: ViewSpec, points: pd.DataFrame) -> tuple[pd.DataFrame, NDArray[Any]]:
    """``view``'s features as of each point (its keys and ``event_time``), and the instant each is as of.

    ``data`` is :func:`sorted_events` of the view. The value as of a point is the as-of row of its
    key's newest instant at or before it (what :func:`asof_rows` holds, read with a point-in-time
    join), computed at those instants only. The instant is in epoch ms, -1 (and the features NaN)
    where the key has no event by then.
    """
    at = np.asarray(pd.to_datetime(points[TIME], utc=True).astype("datetime64[ms, UTC]").astype("int64"))
    found = data.position(data.code_of(points), at)
    hit = found >= 0
    anchors, back = np.unique(found[hit], return_inverse=True)
    values = _view_values(view, data, anchors)
    out = pd.DataFrame(np.nan, index=range(len(points)), columns=list(values))
    for name, column in values.items():
        out.loc[hit, name] = column[back.reshape(-1)]
    instant = np.full(len(points), -1, dtype="int64")
    instant[hit] = data.times[found[hit]]
    return out, instant


def view_spec(name: str) -> ViewSpec:
    """The catalogue's spec of a view (one declaration for the job and the history)."""
    return SPECS[name]
