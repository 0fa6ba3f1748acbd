"""Decision flip rate: identical inputs that got different prices.

Two inputs are identical when their canonical hash (:func:`input_hash`) agrees:
the request without its identity fields (``event_id``, ``request_id``,
``schema_version``; the request time floored to a resolution, one day by
default, since lead time is in days) plus the feature values. Two prices differ
when ``not math.isclose(a, b, rel_tol=rel_tol)``.

The unit is the *input*, not the event: the flip rate is the share of inputs
seen at least twice (or by both versions) whose prices disagreed at least once.

Example:
    >>> compare({"a": 100.0, "b": 90.0}, {"a": 100.0, "b": 95.0, "c": 1.0}).rate
    0.5
    >>> mon = FlipMonitor()
    >>> mon.update("a", "v1", 100.0), mon.update("a", "v1", 100.0), mon.update("a", "v1", 101.0)
    (False, False, True)
    >>> mon.report().rate
    1.0
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeAlias

import pandas as pd
from pydantic import BaseModel

from events.models import PricingDecision
from feedback.monitors.errors import MonitorInputError

DEFAULT_REL_TOL = 1e-6
"""Float noise (float32 model outputs, JSON round trips) is not a flip; a cent on 100 is."""

_IDENTITY_FIELDS = frozenset({"event_id", "request_id", "schema_version", "event_time"})


def _canonical(value: object) -> object:
    if isinstance(value, float):
        return None if not math.isfinite(value) else format(value, ".12g")
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


def input_hash(
    request: BaseModel | Mapping[str, Any],
    features: Mapping[str, float | None],
    *,
    time_resolution: timedelta | None = timedelta(days=1),
) -> str:
    """Canonical SHA-256 of a pricing request and its feature values.

    Example:
        >>> a = input_hash({"hotel_id": "h1", "request_id": "x"}, {"f": 1.0, "g": None})
        >>> a == input_hash({"request_id": "y", "hotel_id": "h1"}, {"g": float("nan"), "f": 1.0})
        True
    """
    data = request.model_dump(mode="python") if isinstance(request, BaseModel) else dict(request)
    when = data.get("event_time")
    body = {k: v for k, v in data.items() if k not in _IDENTITY_FIELDS}
    if time_resolution is not None and isinstance(when, datetime):
        step = time_resolution.total_seconds()
        body["event_time_floor"] = math.floor(when.astimezone(UTC).timestamp() / step) * step
    payload = json.dumps({"request": _canonical(body), "features": _canonical(dict(features))}, sort_keys=True,
                         default=str, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


DECISION_REQUEST_FIELDS = ("hotel_id", "room_type", "stay_date", "channel")
"""The request fields a decision carries: with its features and day, what makes two inputs identical."""


def decision_input_hash(decision: PricingDecision) -> str:
    """:func:`input_hash` of the request a decision answered and the features it read (its ids and time of day
    left out): two requests priced with identical inputs on one day share it, whoever sent them."""
    request = {name: getattr(decision, name) for name in DECISION_REQUEST_FIELDS} | {"event_time": decision.event_time}
    return input_hash(request, decision.features)


@dataclass(frozen=True)
class FlipReport:
    """Flip counts.

    Attributes:
        n_inputs: inputs compared (seen twice by a version, or by both versions).
        n_flipped: of those, inputs whose prices differed.
        by_version: ``version -> (n_inputs, n_flipped)`` for the same-version monitor.
        flipped: hashes that flipped (``compare`` only; the monitor does not keep them).
        at: time of the report (``FlipMonitor.report``), if given.
    """

    n_inputs: int
    n_flipped: int
    by_version: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    flipped: tuple[str, ...] = ()
    at: datetime | None = None

    @property
    def rate(self) -> float:
        """``n_flipped / n_inputs`` (0.0 when nothing was compared)."""
        return self.n_flipped / self.n_inputs if self.n_inputs else 0.0

    def rate_of(self, version: str) -> float:
        """Same-version flip rate of one version."""
        n, flipped = self.by_version.get(version, (0, 0))
        return flipped / n if n else 0.0


Decisions: TypeAlias = Mapping[str, float] | Iterable[tuple[str, float]] | pd.DataFrame


def _as_prices(decisions: Decisions, name: str) -> dict[str, float]:
    if isinstance(decisions, pd.DataFrame):
        for column in ("input_hash", "price"):
            if column not in decisions.columns:
                raise MonitorInputError(
                    field=f"{name}.{column}",
                    value=list(decisions.columns),
                    expected="a column named " + column,
                )
        return dict(zip(decisions["input_hash"], decisions["price"].astype(float), strict=True))
    if isinstance(decisions, Mapping):
        return {str(k): float(v) for k, v in decisions.items()}
    return {str(k): float(v) for k, v in decisions}


def compare(decisions_a: Decisions, decisions_b: Decisions, *, rel_tol: float = DEFAULT_REL_TOL) -> FlipReport:
    """Flip rate between two versions over the inputs both priced.

    Args:
        decisions_a: ``input_hash -> price`` (a mapping, ``(hash, price)`` pairs, or a frame with
            ``input_hash`` and ``price`` columns; a repeated hash keeps its last price).
        decisions_b: the same for the other version.
        rel_tol: relative tolerance under which two prices are the same.
    """
    a, b = _as_prices(decisions_a, "decisions_a"), _as_prices(decisions_b, "decisions_b")
    common = a.keys() & b.keys()
    flipped = tuple(sorted(h for h in common if not math.isclose(a[h], b[h], rel_tol=rel_tol)))
    return FlipReport(n_inputs=len(common), n_flipped=len(flipped), flipped=flipped)


class _Seen:
    __slots__ = ("price", "repeated", "flipped")

    def __init__(self, price: float) -> None:
        self.price = price
        self.repeated = False
        self.flipped = False


class FlipMonitor:
    """Same-version flip rate over time, with bounded memory.

    Each ``(input_hash, model_version)`` keeps the first price it received; a
    later price outside the tolerance flips the input. At most ``max_inputs``
    pairs are tracked (least recently seen dropped first); counts of dropped
    inputs are kept, and an input seen again after it was dropped counts anew.

    Args:
        rel_tol: relative tolerance under which two prices are the same.
        max_inputs: tracked ``(hash, version)`` pairs.
    """

    def __init__(self, *, rel_tol: float = DEFAULT_REL_TOL, max_inputs: int = 100_000) -> None:
        if rel_tol < 0:
            raise MonitorInputError(field="rel_tol", value=rel_tol, expected="a non-negative float")
        if max_inputs < 1:
            raise MonitorInputError(field="max_inputs", value=max_inputs, expected="an int >= 1")
        self._rel_tol = rel_tol
        self._max = max_inputs
        self._seen: OrderedDict[tuple[str, str], _Seen] = OrderedDict()
        self._counts: dict[str, list[int]] = {}

    @property
    def n_tracked(self) -> int:
        """``(hash, version)`` pairs currently held."""
        return len(self._seen)

    def update(self, input_hash: str, model_version: str | None, price: float) -> bool:
        """Record one decision; True when it flipped an input that had not flipped before."""
        key = (input_hash, model_version or "")
        seen = self._seen.get(key)
        if seen is None:
            self._seen[key] = _Seen(price)
            if len(self._seen) > self._max:
                self._seen.popitem(last=False)
            return False
        self._seen.move_to_end(key)
        counts = self._counts.setdefault(key[1], [0, 0])
        if not seen.repeated:
            seen.repeated = True
            counts[0] += 1
        if seen.flipped or math.isclose(seen.price, price, rel_tol=self._rel_tol):
            return False
        seen.flipped = True
        counts[1] += 1
        return True

    def report(self, *, at: datetime | None = None) -> FlipReport:
        """Counts so far, overall and per version."""
        by_version = {version: (n, f) for version, (n, f) in self._counts.items()}
        n = sum(v[0] for v in by_version.values())
        flipped = sum(v[1] for v in by_version.values())
        return FlipReport(n_inputs=n, n_flipped=flipped, by_version=by_version, at=at)
