"""One ``features.v1`` row: parsing and validation shared by the online and offline writers.

A windowed view's row from the feature job is a *tile* (``tile_start`` set, ``features`` holding
the partials of :attr:`events.catalog.ViewSpec.partials`, ``rates`` the latest rate per
competitor); the inventory view's row, and a row without ``tile_start``, holds feature values.

Example:
    >>> row = parse_row(b'{"hotel_id": "h1", "view": "stay_1h", "room_type": "std", "stay_date": "2026-11-20",'
    ...                 b' "tile_start": 1761998400000, "feature_time": 1761998400000, "version": 7,'
    ...                 b' "publish_time": 1761998400050, "features": {"n": 4.0, "sum:is_search": 3.0}}')
    >>> row.key, row.tile_start, row.features["sum:is_search"], row.features["sum:is_view"]
    (('h1', 'std', '2026-11-20'), 1761998400000, 3.0, None)
    >>> parse_row(b'{"view": "nope"}')
    Traceback (most recent call last):
    ...
    features.errors.FeatureRowError: field 'view': got 'nope', expected one of ['hotel_stats', 'stay_14d', 'stay_1h', \
'stay_24h', 'stay_7d', 'stay_inventory']
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from events.catalog import SPECS, VIEWS
from features.errors import FeatureRowError

_VIEW_NAMES = sorted(VIEWS)
_INT64_MAX = 2**63 - 1
_MS_MAX = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z, the last instant a datetime can hold


@dataclass(frozen=True, slots=True)
class FeatureRow:
    """A feature-view update for one key; ``features`` holds every feature of the view (None when absent)."""

    hotel_id: str
    view: str
    room_type: str | None
    stay_date: str | None
    feature_time: int
    version: int
    publish_time: int
    features: dict[str, float | None]
    """The view's features; for a tile row (``tile_start`` set) the tile's partials instead."""
    tile_start: int | None = None
    """Start of the tile (ms) of a windowed view's row; None for a state view (inventory)."""
    rates: dict[str, float] | None = None
    """Latest rate per competitor in the tile (views with competitor-rate features)."""

    @property
    def key(self) -> tuple[str, ...]:
        """The view's entity key values, in catalogue order."""
        keys = VIEWS[self.view][0]
        return tuple(str(getattr(self, k)) for k in keys)

    @property
    def feature_datetime(self) -> datetime:
        return datetime.fromtimestamp(self.feature_time / 1000, tz=UTC)

    def to_json(self) -> bytes:
        """The wire form (inverse of :func:`parse_row`)."""
        body = {f: getattr(self, f) for f in ("hotel_id", "view", "room_type", "stay_date", "feature_time")}
        body.update(version=self.version, publish_time=self.publish_time, features=self.features)
        if self.tile_start is not None:
            body.update(tile_start=self.tile_start, rates=self.rates)
        return json.dumps(body, separators=(",", ":")).encode()


def parse_row(raw: bytes | str | dict[str, Any]) -> FeatureRow:
    """Parse and validate one row (bytes off Kafka, or an already decoded dict).

    Raises:
        FeatureRowError: naming the field, the value and the expectation.
    """
    try:
        body = raw if isinstance(raw, dict) else json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise FeatureRowError(field="<record>", value=str(raw)[:80], expected=f"a JSON object ({exc})") from exc
    if not isinstance(body, dict):
        raise FeatureRowError(field="<record>", value=body, expected="a JSON object")
    view = body.get("view")
    if not isinstance(view, str) or view not in VIEWS:
        raise FeatureRowError(field="view", value=view, expected=f"one of {_VIEW_NAMES}")
    keys, names = VIEWS[view]
    hotel_id = _key(body, "hotel_id", required=True)
    room_type = _key(body, "room_type", required="room_type" in keys)
    stay_date = _key(body, "stay_date", required="stay_date" in keys)
    if stay_date is not None:
        try:
            date.fromisoformat(stay_date)
        except ValueError as exc:
            raise FeatureRowError(field="stay_date", value=stay_date, expected="an ISO date YYYY-MM-DD") from exc
    features = body.get("features")
    if not isinstance(features, dict):
        raise FeatureRowError(field="features", value=features, expected=f"an object with the features of {view}")
    # A windowed view's row is a tile when it names its tile; without one it holds window values
    # (rows computed elsewhere, older producers), written as they are.
    tiled = SPECS[view].tile_ms is not None and body.get("tile_start") is not None
    spec = SPECS[view]
    allowed = spec.partials if tiled else names
    unknown = sorted(set(features) - set(allowed))
    if unknown:
        expected = f"a {'partial' if tiled else 'feature'} of {view}: {list(allowed)}"
        raise FeatureRowError(field=f"features.{unknown[0]}", value=features[unknown[0]], expected=expected)
    return FeatureRow(
        hotel_id=str(hotel_id),
        view=view,
        room_type=room_type if "room_type" in keys else None,
        stay_date=stay_date if "stay_date" in keys else None,
        feature_time=_int(body, "feature_time", upper=_MS_MAX),
        version=_int(body, "version"),
        publish_time=_int(body, "publish_time", upper=_MS_MAX),
        features={n: _float(n, features.get(n)) for n in allowed},
        tile_start=_int(body, "tile_start", upper=_MS_MAX) if tiled else None,
        rates=_rates(body.get("rates")) if tiled else None,
    )


def _rates(value: Any) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise FeatureRowError(field="rates", value=value, expected="an object of competitor -> rate, or null")
    out: dict[str, float] = {}
    for competitor, rate in value.items():
        number = _float(f"rates.{competitor}", rate)
        if number is not None:
            out[str(competitor)] = number
    return out


def _key(body: dict[str, Any], name: str, *, required: bool) -> str | None:
    value = body.get(name)
    if (value is None or value == "") and not required:  # the tile sink writes '' for keys a view lacks
        return None
    if not isinstance(value, str) or not value:
        raise FeatureRowError(field=name, value=value, expected="a non-empty string")
    return value


def _int(body: dict[str, Any], name: str, *, upper: int = _INT64_MAX) -> int:
    value = body.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= upper:
        raise FeatureRowError(field=name, value=value, expected=f"an integer in [0, {upper}]")
    return value


def _float(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise FeatureRowError(field=f"features.{name}", value=value, expected="a finite number or null")
    return float(value)
