"""Complexity score: how hard is this pricing request, on a 0..1 scale.

The router sends easy requests to the rules, ordinary ones to the light model and
hard ones to the heavy model. "Hard" is a weighted mean of seven components, each
squashed to [0, 1] so that one runaway input cannot dominate:

============================  ==========================================================
component                     squash
============================  ==========================================================
features missing share        the share itself (clipped to [0, 1])
feature age (staleness)       ``1 - exp(-age / STALE_SCALE_S)``; no features at all -> 1
cold start                    1 if the hotel was seen fewer than ``COLD_START_MIN_SEEN`` times
volatility                    ``v / (v + VOLATILITY_HALF)``
spike                         1 if the last hour runs far above the 24 h hourly rate
light-model uncertainty       the value itself (clipped to [0, 1])
out-of-distribution distance  ``d / (d + OOD_HALF)``
============================  ==========================================================

Each squash is non-decreasing in its input and the weights are non-negative, so the
score is monotone: making any input "harder" never lowers it. A NaN input means
"unknown" and counts as the hardest value of its component.

Scarcity is not averaged in: a night with at least ``SCARCE_SOLD_SHARE`` of its rooms
sold scores at least ``SCARCE_MIN_SCORE``, above the default rules cut-off, because the
rules price knows no bid price and the value of the last rooms is where a capacity-aware
model earns its keep (issue 14: two thirds of the offers that count went to the rules).

Example:
    >>> easy = ComplexityInputs(features_missing_share=0.0, feature_age_s=5.0, cold_start=False,
    ...                         volatility=0.05, spike=False, light_uncertainty=0.05, ood_distance=0.5)
    >>> hard = ComplexityInputs(features_missing_share=0.5, feature_age_s=3600.0, cold_start=True,
    ...                         volatility=2.0, spike=True, light_uncertainty=0.6, ood_distance=6.0)
    >>> round(complexity_score(easy), 3), round(complexity_score(hard), 3)
    (0.046, 0.763)
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from events.catalog import ALL_FEATURES
from events.models import PricingRequest
from routing.errors import RoutingInputError

STALE_SCALE_S = 900.0
"""Feature age at which staleness reaches 63%: the Flink job refreshes features every few
seconds, so 15 minutes of silence means the job or the key has fallen behind."""

VOLATILITY_HALF = 0.5
"""Volatility at which the component is one half: a booking pace 50% away from normal."""

OOD_HALF = 3.0
"""Distance (RMS z-score) at which the component is one half: three standard deviations."""

COLD_START_MIN_SEEN = 30
"""A hotel priced fewer times than this has too little history for the light model."""

SPIKE_RATIO = 3.0
"""Last-hour searches above this multiple of the 24 h hourly mean count as a spike."""

SPIKE_MIN_COUNT = 5.0
"""...and at least this many searches, so that 2 searches against 0.1/h is not a spike."""

SCARCE_SOLD_SHARE = 0.6
"""Share of a night's rooms sold (occupancy, else ``1 - rooms_left / capacity``) from which it is scarce."""

SCARCE_MIN_SCORE = 0.2
"""Least score of a scarce night: above the default ``rules_below`` (0.10), so a model tier prices it."""

MIN_STD = 1e-6
"""Floor on a training standard deviation, so a constant feature cannot divide by zero."""


@dataclass(frozen=True)
class ComplexityWeights:
    """Non-negative weights of the components; they are normalised by their sum.

    The defaults favour the light model's own uncertainty (it knows best where it is
    unsure) and spread the rest over signs that the light model's training data did not
    cover (missing, stale, cold, volatile, spiking, out-of-distribution inputs).
    """

    missing: float = 0.15
    staleness: float = 0.10
    cold_start: float = 0.15
    volatility: float = 0.15
    spike: float = 0.10
    light_uncertainty: float = 0.20
    ood: float = 0.15

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not (math.isfinite(value) and value >= 0.0):
                raise RoutingInputError(field=f"weights.{f.name}", value=value, expected="a finite number >= 0")
        if self.total <= 0.0:
            raise RoutingInputError(field="weights", value=asdict(self), expected="at least one weight > 0")

    @property
    def total(self) -> float:
        """Sum of the weights."""
        return float(sum(getattr(self, f.name) for f in fields(self)))


DEFAULT_WEIGHTS = ComplexityWeights()


@dataclass(frozen=True)
class ComplexityInputs:
    """Raw signals behind the complexity score.

    Attributes:
        features_missing_share: share of catalogue features that are missing, in [0, 1].
        feature_age_s: age of the features in seconds; ``None`` means no features at all.
        cold_start: the hotel has been seen fewer than ``COLD_START_MIN_SEEN`` times.
        volatility: >= 0, e.g. ``|booking_pace_7d - 1|`` or a coefficient of variation.
        spike: last-hour activity far above the 24 h hourly rate.
        light_uncertainty: the light model's uncertainty, in [0, 1].
        ood_distance: >= 0, distance from the training distribution (see :class:`TrainingStats`).
        sold_share: share of the night's rooms already sold, in [0, 1] (0.0: unknown or none); from
            ``SCARCE_SOLD_SHARE`` the score is at least ``SCARCE_MIN_SCORE``.
    """

    features_missing_share: float
    feature_age_s: float | None
    cold_start: bool
    volatility: float
    spike: bool
    light_uncertainty: float
    ood_distance: float
    sold_share: float = 0.0

    def __post_init__(self) -> None:
        for name in ("features_missing_share", "light_uncertainty", "sold_share"):
            value = getattr(self, name)
            if value < 0.0 or value > 1.0:  # NaN passes: it means "unknown"
                raise RoutingInputError(field=name, value=value, expected="a number in [0, 1] (NaN for unknown)")
        for name in ("feature_age_s", "volatility", "ood_distance"):
            value = getattr(self, name)
            if value is not None and value < 0.0:
                raise RoutingInputError(field=name, value=value, expected="a number >= 0 (NaN for unknown)")

    def components(self) -> dict[str, float]:
        """Each component squashed to [0, 1], keyed like :class:`ComplexityWeights`."""
        age = self.feature_age_s
        return {
            "missing": _unit(self.features_missing_share),
            "staleness": 1.0 if age is None else _saturate(age, scale=STALE_SCALE_S),
            "cold_start": 1.0 if self.cold_start else 0.0,
            "volatility": _half(self.volatility, half=VOLATILITY_HALF),
            "spike": 1.0 if self.spike else 0.0,
            "light_uncertainty": _unit(self.light_uncertainty),
            "ood": _half(self.ood_distance, half=OOD_HALF),
        }


def _unit(value: float) -> float:
    return 1.0 if math.isnan(value) else min(1.0, max(0.0, value))


def _saturate(value: float, *, scale: float) -> float:
    return 1.0 if math.isnan(value) else 1.0 - math.exp(-value / scale)


def _half(value: float, *, half: float) -> float:
    if math.isnan(value) or math.isinf(value):
        return 1.0
    return value / (value + half)


def complexity_score(inputs: ComplexityInputs, *, weights: ComplexityWeights = DEFAULT_WEIGHTS) -> float:
    """Weighted mean of the squashed components, in [0, 1].

    Example:
        >>> x = ComplexityInputs(features_missing_share=0.0, feature_age_s=None, cold_start=True,
        ...                      volatility=0.0, spike=False, light_uncertainty=0.0, ood_distance=0.0)
        >>> complexity_score(x)  # staleness 1 x 0.10 + cold start 1 x 0.15
        0.25
        >>> from dataclasses import replace
        >>> easy = replace(x, feature_age_s=1.0, cold_start=False)
        >>> complexity_score(easy) < 0.1, complexity_score(replace(easy, sold_share=0.8))  # a scarce night
        (True, 0.2)
    """
    parts = inputs.components()
    total = sum(getattr(weights, name) * value for name, value in parts.items())
    score = min(1.0, max(0.0, round(float(total) / weights.total, 12)))
    if inputs.sold_share >= SCARCE_SOLD_SHARE:
        score = max(score, SCARCE_MIN_SCORE)
    return score


@dataclass(frozen=True)
class TrainingStats:
    """Per-feature mean and standard deviation of the light model's training data.

    Example:
        >>> stats = TrainingStats(means={"occupancy": 0.5}, stds={"occupancy": 0.1})
        >>> round(stats.distance({"occupancy": 0.8}), 6)
        3.0
        >>> TrainingStats.from_json(stats.to_json()) == stats
        True
    """

    means: Mapping[str, float]
    stds: Mapping[str, float]

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, *, columns: tuple[str, ...] = ALL_FEATURES) -> TrainingStats:
        """Statistics of the numeric ``columns`` present in ``frame`` (NaN ignored)."""
        present = [c for c in columns if c in frame.columns]
        if not present:
            raise RoutingInputError(
                field="frame.columns", value=list(frame.columns)[:10], expected=f"some of {list(columns)}"
            )
        numeric = frame[present].apply(pd.to_numeric, errors="coerce")
        means = numeric.mean(skipna=True)
        stds = numeric.std(skipna=True, ddof=0)
        keep = [c for c in present if math.isfinite(float(means[c])) and math.isfinite(float(stds[c]))]
        return cls(means={c: float(means[c]) for c in keep}, stds={c: float(stds[c]) for c in keep})

    def distance(self, features: Mapping[str, float | None]) -> float:
        """Root-mean-square z-score over the features that are present (0.0 if none are).

        A diagonal Mahalanobis distance divided by sqrt(k), so that it does not grow with the
        number of features present; missingness is scored by its own component.
        """
        z: list[float] = []
        for name, mean in self.means.items():
            value = features.get(name)
            if value is None or not math.isfinite(value):
                continue
            z.append((value - mean) / max(self.stds[name], MIN_STD))
        if not z:
            return 0.0
        return float(np.sqrt(np.mean(np.square(z))))

    def to_json(self) -> str:
        """JSON text (to store next to a model bundle)."""
        return json.dumps({"means": dict(self.means), "stds": dict(self.stds)}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> TrainingStats:
        """Inverse of :meth:`to_json`."""
        data: dict[str, Any] = json.loads(text)
        return cls(means=dict(data["means"]), stds=dict(data["stds"]))


def _value(features: Mapping[str, float | None], name: str) -> float | None:
    value = features.get(name)
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def volatility_of(features: Mapping[str, float | None]) -> float:
    """``|booking_pace_7d - 1|``, else the relative change of bookings week on week, else 0.0."""
    pace = _value(features, "booking_pace_7d")
    if pace is not None:
        return abs(pace - 1.0)
    week, prev = _value(features, "bookings_7d"), _value(features, "bookings_prev_7d")
    if week is not None and prev is not None:
        return abs(week - prev) / max(prev, 1.0)
    return 0.0


def spike_of(features: Mapping[str, float | None]) -> bool:
    """Last-hour searches above ``SPIKE_RATIO`` x the 24 h hourly mean (and >= ``SPIKE_MIN_COUNT``)."""
    hour, day = _value(features, "searches_1h"), _value(features, "searches_24h")
    if hour is None or day is None:
        return False
    return hour >= SPIKE_MIN_COUNT and hour > SPIKE_RATIO * day / 24.0


def sold_share_of(features: Mapping[str, float | None]) -> float:
    """Share of the night's rooms sold: ``occupancy``, else ``1 - rooms_left / capacity``, else 0.0 (unknown).

    Example:
        >>> sold_share_of({"rooms_left": 2.0, "capacity": 10.0}), sold_share_of({})
        (0.8, 0.0)
    """
    occupancy = _value(features, "occupancy")
    if occupancy is not None:
        return min(max(occupancy, 0.0), 1.0)
    left, cap = _value(features, "rooms_left"), _value(features, "capacity")
    if left is None or cap is None or cap <= 0:
        return 0.0
    return min(max(1.0 - left / cap, 0.0), 1.0)


def inputs_from(
    request: PricingRequest,
    features: Mapping[str, float | None],
    *,
    feature_time: datetime | None,
    now: datetime | None = None,
    stats: TrainingStats | None = None,
    hotel_seen: int = 0,
    light_uncertainty: float = 0.0,
) -> ComplexityInputs:
    """Derive :class:`ComplexityInputs` from a request and its features.

    Args:
        request: the pricing request (its time is ``now`` when ``now`` is not given).
        features: values keyed by :data:`events.catalog.ALL_FEATURES`, ``None`` when missing.
        feature_time: event time of the features; ``None`` when the store had none.
        now: aware "current" time.
        stats: training statistics for the out-of-distribution distance (0.0 without them).
        hotel_seen: how many times this hotel has been priced before.
        light_uncertainty: the light model's uncertainty when it has already quoted.

    Example:
        >>> from datetime import date, datetime, timezone
        >>> t = datetime(2026, 5, 1, 12, tzinfo=timezone.utc)
        >>> req = PricingRequest(hotel_id="h1", room_type="std", stay_date=date(2026, 6, 1), event_time=t)
        >>> x = inputs_from(req, {"booking_pace_7d": 1.4, "searches_1h": 30.0, "searches_24h": 48.0},
        ...                 feature_time=datetime(2026, 5, 1, 11, 59, tzinfo=timezone.utc), hotel_seen=3)
        >>> x.feature_age_s, x.cold_start, round(x.volatility, 2), x.spike
        (60.0, True, 0.4, True)
    """
    now = request.request_time if now is None else now
    for name, value in (("now", now), ("feature_time", feature_time)):
        if value is not None and value.tzinfo is None:
            raise RoutingInputError(field=name, value=value, expected="a timezone-aware datetime")
    present = sum(1 for name in ALL_FEATURES if _value(features, name) is not None)
    missing = 1.0 - present / len(ALL_FEATURES)
    age = None if feature_time is None or present == 0 else max(0.0, (now - feature_time).total_seconds())
    return ComplexityInputs(
        sold_share=sold_share_of(features),
        features_missing_share=missing,
        feature_age_s=age,
        cold_start=hotel_seen < COLD_START_MIN_SEEN,
        volatility=volatility_of(features),
        spike=spike_of(features),
        light_uncertainty=light_uncertainty,
        ood_distance=0.0 if stats is None else stats.distance(features),
    )
