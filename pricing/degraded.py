"""What the scorer does when something around a decision fails: reasons, deadlines, clean inputs.

The scorer never raises for a valid request. When the feature store is down, a
model raises or answers garbage, or the deadline is near, it falls back (to the
rules price, or from the heavy to the light quote) and says why in a
:class:`Degradation`. Its ``code`` is a small fixed vocabulary (it labels a
Prometheus counter); its ``detail`` is free text for the decision and the logs.

Example:
    >>> clean = sanitize_features({"occupancy": float("nan"), "rooms_left": 3, "capacity": 1e300})
    >>> clean["occupancy"], clean["rooms_left"], clean["capacity"], clean["bookings_24h"]
    (None, 3.0, None, None)
    >>> Degradation(FEATURE_STORE_UNAVAILABLE, "redis: connection refused").reason
    'feature_store_unavailable: redis: connection refused'

A reason never carries a credential (it is returned to clients and logged):

    >>> Degradation.from_exception(FEATURE_STORE_UNAVAILABLE, OSError("redis://app:s3cret@cache:6379 down")).reason
    'feature_store_unavailable: OSError: redis://app:***@cache:6379 down'
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from events.catalog import ALL_FEATURES
from events.redact import redact, redact_exception

if TYPE_CHECKING:
    from datetime import datetime

    from events.models import PricingRequest
    from pricing.rules import RuleOutcome

FEATURE_STORE_UNAVAILABLE = "feature_store_unavailable"
FEATURE_SOURCE_ERROR = "feature_source_error"
STALE_FEATURES = "stale_features"
DEADLINE = "deadline"
LIGHT_MODEL_ERROR = "light_model_error"
LIGHT_BAD_QUOTE = "light_bad_quote"
NO_LIGHT_MODEL = "no_light_model"
HEAVY_MODEL_ERROR = "heavy_model_error"
HEAVY_BAD_QUOTE = "heavy_bad_quote"
HEAVY_DEADLINE = "heavy_deadline"
BAD_PRICE = "bad_price"
IMPOSSIBLE_INPUT = "impossible_input"
OOD_INPUT = "ood_input"
UNKNOWN_ROOM_TYPE = "unknown_room_type"

REASON_CODES: tuple[str, ...] = (
    FEATURE_STORE_UNAVAILABLE,
    FEATURE_SOURCE_ERROR,
    STALE_FEATURES,
    DEADLINE,
    LIGHT_MODEL_ERROR,
    LIGHT_BAD_QUOTE,
    NO_LIGHT_MODEL,
    HEAVY_MODEL_ERROR,
    HEAVY_BAD_QUOTE,
    HEAVY_DEADLINE,
    BAD_PRICE,
    IMPOSSIBLE_INPUT,
    OOD_INPUT,
    UNKNOWN_ROOM_TYPE,
)
"""Every degradation code; the label values of ``pricestream_degraded_decisions_total``."""

FEATURE_ABS_MAX = 1e12
"""Largest magnitude a stored feature may have. Counts, prices and rates are far below it;
anything larger is corruption and would overflow the models' float32 inputs, so it is
treated as missing rather than passed on."""

_DETAIL_MAX = 200
"""Characters of an exception message kept in ``degraded_reason``."""


@dataclass(frozen=True, slots=True)
class Degradation:
    """Why a decision fell back.

    Attributes:
        code: one of :data:`REASON_CODES`.
        detail: human-readable detail (an exception message, a measured value).
    """

    code: str
    detail: str = ""

    @property
    def reason(self) -> str:
        """``code: detail`` (or just the code), for ``PricingDecision.degraded_reason``; credentials redacted."""
        # Redacted before cutting: a cut could split a URL so that the pattern no longer sees its password.
        return f"{self.code}: {redact(self.detail)[:_DETAIL_MAX]}" if self.detail else self.code

    @classmethod
    def from_exception(cls, code: str, exc: BaseException) -> Degradation:
        """A degradation naming the exception class and message (credentials redacted)."""
        return cls(code, redact_exception(exc))


def clean_value(value: object) -> float | None:
    """A finite float of plausible magnitude, else ``None`` (bools and text are not features).

    Example:
        >>> clean_value("3"), clean_value(True), clean_value(-2), clean_value(float("inf"))
        (None, None, -2.0, None)
    """
    if type(value) is float:  # the common case first: a decoded double (a hot path, ~26 calls per decision)
        number = value
    elif value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    else:
        number = float(value)
    if not math.isfinite(number) or abs(number) > FEATURE_ABS_MAX:
        return None
    return number


def sanitize_features(values: Mapping[str, object]) -> dict[str, float | None]:
    """Features keyed by exactly :data:`~events.catalog.ALL_FEATURES`, each clean or ``None``."""
    return {name: clean_value(values.get(name)) for name in ALL_FEATURES}


def missing_features() -> dict[str, float | None]:
    """All catalogue features, all missing (what a degraded read yields)."""
    return dict.fromkeys(ALL_FEATURES)


class Deadline:
    """A time budget started at construction, read on the monotonic clock.

    Example:
        >>> d = Deadline(50.0)
        >>> 0.0 < d.remaining_fraction() <= 1.0
        True
        >>> Deadline(0.0).remaining_fraction()
        0.0
    """

    __slots__ = ("_budget_s", "_start")

    def __init__(self, budget_ms: float, *, start: float | None = None) -> None:
        if not math.isfinite(budget_ms) or budget_ms < 0:
            msg = f"deadline_ms: got {budget_ms!r}, expected a finite number >= 0"
            raise ValueError(msg)
        self._budget_s = budget_ms / 1000.0
        self._start = time.perf_counter() if start is None else start

    @property
    def start(self) -> float:
        """``time.perf_counter()`` at the start of the budget."""
        return self._start

    def elapsed_ms(self) -> float:
        """Milliseconds since the start."""
        return (time.perf_counter() - self._start) * 1000.0

    def remaining_fraction(self) -> float:
        """Share of the budget left, in [0, 1] (0 for a zero budget)."""
        if self._budget_s <= 0:
            return 0.0
        left = 1.0 - (time.perf_counter() - self._start) / self._budget_s
        return min(1.0, max(0.0, left))


def unknown_room(request: PricingRequest, room_types: Mapping[str, tuple[str, ...]]) -> Degradation | None:
    """A room type the hotel's profile does not list (None: listed, or the hotel lists none)."""
    known = room_types.get(request.hotel_id)
    if known is None or request.room_type in known:
        return None
    return Degradation(UNKNOWN_ROOM_TYPE, f"room_type {request.room_type!r} is not sold by hotel "
                                          f"{request.hotel_id!r} (its room types: {list(known)})")


def stale_features(request: PricingRequest, feature_time: datetime | None, limit: float | None) -> Degradation | None:
    """Features older than ``limit`` seconds at the request (None: fresh, undated, or no limit)."""
    if limit is None or feature_time is None:
        return None
    age = (request.request_time - feature_time).total_seconds()
    if age <= limit:
        return None
    return Degradation(STALE_FEATURES, f"features are {age:.0f}s old, limit {limit:.0f}s")


def unit_or_nan(value: object) -> float:
    """``value`` clipped to [0, 1]; NaN (and non-numbers) stay NaN, which the router reads as "unknown"."""
    number = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan
    return number if math.isnan(number) else min(1.0, max(0.0, number))


def probability(value: object) -> float | None:
    """A probability clipped to [0, 1], or ``None`` when missing or non-finite."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return min(1.0, max(0.0, float(value)))


def share_to_distance(share: float, *, half: float) -> float:
    """The distance ``d`` with ``d / (d + half) == share`` (so a share in [0, 1] maps onto the component).

    Example:
        >>> share_to_distance(0.5, half=3.0), share_to_distance(1.0, half=3.0)
        (3.0, inf)
    """
    if math.isnan(share) or share >= 1.0:
        return math.inf
    share = max(0.0, share)
    return half * share / (1.0 - share)


def quote_problem(quote: object) -> str | None:
    """Why a model quote cannot be used (non-finite or non-positive price, model fallback), else ``None``."""
    price = getattr(quote, "price", None)
    if isinstance(price, bool) or not isinstance(price, int | float) or not math.isfinite(price) or price <= 0:
        return f"price {price!r}, expected a finite number > 0"
    if getattr(quote, "fallback", False):
        return "the model returned non-finite demand; it fell back to the rules price"
    return None


PRICE_DECIMALS = 2
"""Digits after the point of a price that leaves the process: the currency's minor unit (cents)."""


def money(price: float, decimals: int = PRICE_DECIMALS, *, low: float | None = None,
          high: float | None = None) -> float:
    """``price`` rounded to the currency's minor unit: what a guest is quoted, a decision published, audited.

    Rounded to the nearest unit, then inward where that would cross a bound (``low``, ``high``: the
    rules' floor and ceiling), so a rounded price never leaves the band the rules allow.

    Example:
        >>> money(116.39999999999999), money(272.69489028545036), money(1234.5, 0)
        (116.4, 272.69, 1234.0)
        >>> money(52.325, high=52.325), money(49.995, low=49.995)
        (52.32, 50.0)
    """
    unit = 10.0**-decimals
    rounded = round(float(price), decimals)
    if high is not None and rounded > high:
        rounded = round(math.floor(high / unit + 1e-9) * unit, decimals)
    if low is not None and rounded < low:
        rounded = round(math.ceil(low / unit - 1e-9) * unit, decimals)
    return rounded


def final_price(price: float, outcome: RuleOutcome, last_published: float | None) -> float:
    """``price`` clamped to the rules' bounds, else the first usable of rules price, floor, last published.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> out = NS(floor=50.0, ceiling=200.0, rule_price=100.0, clamp=lambda p: min(max(p, 50.0), 200.0))
        >>> final_price(1e9, out, None), final_price(float("nan"), out, None)
        (200.0, 100.0)
    """
    first = outcome.clamp(price) if isinstance(price, int | float) and math.isfinite(price) else None
    for value in (first, outcome.rule_price, outcome.floor, last_published):
        if isinstance(value, int | float) and math.isfinite(value) and value > 0:
            return float(value)
    msg = f"price: got {price!r} and no finite positive fallback from the rules; expected one"
    raise ValueError(msg)
