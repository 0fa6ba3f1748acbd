"""Tiles into window values: the merge, once in Python (the reference) and once in Redis (Lua).

A tile row of a windowed view (:data:`events.catalog.VIEW_SPECS`) holds mergeable partials of one
entity's events in one tile: ``n`` (events), ``sum:<c>``, ``n:<c>`` (non-null count), ``sq:<c>``,
and the latest rate per competitor. The value served for a key is the merge, as of the key's
newest event ``t`` (the *anchor*), of its tiles that start at or after ``floor(t, tile) - window``
(see :mod:`events.catalog` for the semantics).

The online writer merges at write time: ``features/tiles.lua`` upserts the tile (skipped unless its
version is newer than the stored one, so a replay changes nothing), keeps the window's running
totals (adds the tile's change, subtracts each tile once as it leaves the window), and rewrites the
view's Feast fields, all in one atomic script on the entity's hash. Feast and the scorer then read
plain values. Why write time, measured (``bench/tile_merge.py``), is in :mod:`features.store`.

Example:
    >>> from events.catalog import SPECS, HOUR_MS
    >>> spec = SPECS["stay_24h"]
    >>> tiles = [Tile(0, {"n": 2, "sum:is_search": 1, "sum:price_shown": 200.0, "n:price_shown": 2},
    ...               {"c1": 80.0, "c2": 90.0}),
    ...          Tile(23 * HOUR_MS, {"n": 1, "sum:is_search": 1}, {"c1": 70.0})]
    >>> values = merge(spec, tiles, anchor_ms=23 * HOUR_MS + 5)
    >>> values["searches_24h"], values["mean_price_shown_24h"], values["comp_rate_median_24h"]
    (2.0, 100.0, 80.0)
    >>> merge(spec, tiles, anchor_ms=25 * HOUR_MS)["searches_24h"]  # the tile at 0 left the window
    1.0
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from events.catalog import SPECS, VIEW_SPECS, ViewSpec
from features.layout import feature_field, ts_field, version_field


@dataclass(frozen=True, slots=True)
class Tile:
    """One tile of one key: its start, partials (None = no value) and the latest rate per competitor."""

    start_ms: int
    partials: Mapping[str, float | None]
    rates: Mapping[str, float] = field(default_factory=dict)


def window_floor(spec: ViewSpec, anchor_ms: int) -> int:
    """Start of the oldest tile in the window as of ``anchor_ms``.

    Example:
        >>> from events.catalog import SPECS
        >>> window_floor(SPECS["stay_1h"], 7_500_000)  # 2 h 5 min: the 5-min tile at 2 h 5, minus 1 h
        3900000
    """
    if spec.tile_ms is None or spec.window_ms is None:
        msg = f"view {spec.name!r} is a state view; expected a windowed view"
        raise ValueError(msg)
    return anchor_ms - anchor_ms % spec.tile_ms - spec.window_ms


def merge(spec: ViewSpec, tiles: Iterable[Tile], *, anchor_ms: int) -> dict[str, float | None]:
    """The view's feature values as of ``anchor_ms`` from the key's tiles (any order)."""
    floor = window_floor(spec, anchor_ms)
    inside = sorted((t for t in tiles if floor <= t.start_ms <= anchor_ms), key=lambda t: t.start_ms)
    totals: dict[str, float | None] = dict.fromkeys(spec.partials)
    rates: dict[str, float] = {}
    for tile in inside:
        for name, value in tile.partials.items():
            if value is not None and name in totals:
                held = totals[name]
                totals[name] = value if held is None else held + value
        rates.update(tile.rates)  # newer tiles come later: each competitor's latest rate wins
    return {f.name: _feature(f.agg, f.column, totals, list(rates.values())) for f in spec.features}


def _feature(agg: str, column: str, totals: Mapping[str, float | None], rates: list[float]) -> float | None:
    total, count, squares = totals.get(f"sum:{column}"), totals.get(f"n:{column}"), totals.get(f"sq:{column}")
    if agg == "sum":
        return float(total or 0.0)
    if agg in ("comp_median", "comp_min"):
        return None if not rates else float(median(rates) if agg == "comp_median" else min(rates))
    if not count or total is None:
        return None
    mean = total / count
    if agg == "mean":
        return float(mean)
    return math.sqrt(max((squares or 0.0) / count - mean * mean, 0.0))  # std, population


# --- the same merge inside Redis -------------------------------------------------------------

LUA_TEMPLATE = Path(__file__).with_name("tiles.lua").read_text()
_OPS = {"sum": "sum", "mean": "mean", "std": "std", "comp_median": "cmed", "comp_min": "cmin"}


def _lua_bytes(raw: bytes) -> str:
    return '"' + "".join(f"\\{b}" for b in raw) + '"'


def _lua_spec(spec: ViewSpec) -> str:
    index = {p: i + 1 for i, p in enumerate(spec.partials)}  # Lua arrays start at 1
    features = []
    for f in spec.features:
        slots = [index.get(f"{kind}:{f.column}", 0) for kind in ("sum", "n", "sq")]
        features.append(f"{{f={_lua_bytes(feature_field(spec.name, f.name))}, op='{_OPS[f.agg]}', "
                        f"s={slots[0]}, n={slots[1]}, q={slots[2]}}}")
    return (f"[{_lua_bytes(spec.name.encode())}] = {{tile={spec.tile_ms}, window={spec.window_ms}, "
            f"np={len(spec.partials)}, ts={_lua_bytes(ts_field(spec.name))}, "
            f"v={_lua_bytes(version_field(spec.name))}, a='_a:{spec.name}', "
            f"sum='_s:{spec.name}', cr={'true' if spec.competitor_rates else 'false'}, "
            f"pre='_t:{spec.name}:', features={{{', '.join(features)}}}}}")


def lua_script() -> str:
    """``features/tiles.lua`` with the views' merge program generated from the catalogue."""
    specs = ",\n  ".join(_lua_spec(s) for s in VIEW_SPECS if s.tile_ms is not None)
    return LUA_TEMPLATE.replace("--@SPECS@", f"local SPECS = {{\n  {specs}\n}}")


def tile_args(view: str, tile_start: int, version: int, feature_time: int,
              partials: Mapping[str, float | None], rates: Mapping[str, float] | None) -> list[str]:
    """ARGV of one tile for ``tiles.lua``: view, start, version, feature time, partials, rates."""
    spec = SPECS[view]
    args = [view, str(tile_start), str(version), str(feature_time)]
    args += ["" if partials.get(p) is None else repr(float(partials[p] or 0.0)) for p in spec.partials]
    rates = rates or {}
    args.append(str(len(rates)))
    for competitor, rate in rates.items():
        args += [competitor, repr(float(rate))]
    return args
