"""One ``features.v1`` row: parsing and validation shared by the online and offline writers.

Every row holds one view's feature values for one entity, as of ``feature_time``: the feature
job's tile operator merges the tiles into window values before it writes (``TileAggregator.java``),
and the inventory view is a state. A feature the row leaves out is null.

Example:
    >>> row = parse_row(b'{"hotel_id": "h1", "view": "stay_1h", "room_type": "std", "stay_date": "2026-11-20",'
    ...                 b' "feature_time": 1761998400000, "version": 7,'
    ...                 b' "publish_time": 1761998400050, "features": {"searches_1h": 3.0}}')
    >>> row.key, row.features["searches_1h"], row.features["views_1h"]
    (('h1', 'std', '2026-11-20'), 3.0, None)
    >>> parse_row(b'{"view": "nope"}')
    Traceback (most recent call last):
    ...
    features.errors.FeatureRowError: field 'view': got 'nope', expected one of ['hotel_stats', 'stay_14d', 'stay_1h', \
'stay_24h', 'stay_7d', 'stay_inventory']
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import orjson

from events.catalog import VIEWS
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

    @property
    def key(self) -> tuple[str, ...]:
        """The view's entity key values, in catalogue order."""
        if self.room_type is None or self.stay_date is None:  # only a hotel view lacks them (parse_row checks)
            return (self.hotel_id,)
        return (self.hotel_id, self.room_type, self.stay_date)

    @property
    def feature_datetime(self) -> datetime:
        return datetime.fromtimestamp(self.feature_time / 1000, tz=UTC)

    def to_json(self) -> bytes:
        """The wire form (inverse of :func:`parse_row`)."""
        body = {f: getattr(self, f) for f in ("hotel_id", "view", "room_type", "stay_date", "feature_time")}
        body.update(version=self.version, publish_time=self.publish_time, features=self.features)
        return orjson.dumps(body)


def parse_row(raw: bytes | str | dict[str, Any]) -> FeatureRow:
    """Parse and validate one row (bytes off Kafka, or an already decoded dict).

    Raises:
        FeatureRowError: naming the field, the value and the expectation.
    """
    try:
        body = raw if isinstance(raw, dict) else orjson.loads(raw)
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
    unknown = [name for name in features if name not in names]
    if unknown:
        raise FeatureRowError(field=f"features.{unknown[0]}", value=features[unknown[0]],
                              expected=f"a feature of {view}: {list(names)}")
    return FeatureRow(
        hotel_id=str(hotel_id),
        view=view,
        room_type=room_type if "room_type" in keys else None,
        stay_date=stay_date if "stay_date" in keys else None,
        feature_time=_int(body, "feature_time", upper=_MS_MAX),
        version=_int(body, "version"),
        publish_time=_int(body, "publish_time", upper=_MS_MAX),
        features={n: _float(n, features.get(n)) for n in names},
    )


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


def _float(name: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise FeatureRowError(field=f"features.{name}", value=value, expected="a finite number or null")
    return float(value)
