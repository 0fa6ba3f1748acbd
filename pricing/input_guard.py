"""Input sanitisation (OWASP ML01): requests a model should not be trusted with are priced by the rules.

Two checks, both pure, run by the scorer before any model quotes (:meth:`InputGuard.check`):

* **impossible combinations**: a negative count, ``rooms_left`` above ``capacity``, a capacity
  of zero or less, an occupancy outside [0, 1], a stay that starts before the request (negative
  lead time). No market produces these; a client or a corrupted feature row does.
* **outside the training distribution**: the model bundle stores each input's 1st-99th percentile
  of its training set (``meta.json`` ``envelope``, :func:`pricing.training.train_bundle`). The guard
  widens that range by ``margin`` times its width on each side (its magnitude when the input was
  constant in training) and flags an input beyond it. A model extrapolating that far has no
  evidence for its price: an adversarial sample aims exactly there.

A flagged request gets a :class:`~pricing.degraded.Degradation` (code ``impossible_input`` or
``ood_input``, the detail naming the input, its value and the allowed range), so the decision is
priced by the rules, says why, and ``pricestream_degraded_decisions_total{reason}`` counts it.

Example:
    >>> from datetime import date, datetime, timezone
    >>> from events.models import PricingRequest
    >>> req = PricingRequest(hotel_id="h1", room_type="std", stay_date=date(2026, 12, 24),
    ...                      event_time=datetime(2026, 12, 1, tzinfo=timezone.utc))
    >>> guard = InputGuard(InputGuardConfig(margin=0.5))
    >>> widened({"base_rate": [150, 150], "rooms_left": [1, 50]}, 0.5)
    {'base_rate': (75.0, 225.0), 'rooms_left': (-23.5, 74.5)}
    >>> envelope = {"price": [50, 500], "rooms_left": [1, 50], "lead_time_days": [0, 100]}
    >>> guard.check(req, {"rooms_left": 30, "capacity": 60}, envelope) is None
    True
    >>> guard.check(req, {"rooms_left": 30, "capacity": 20}, envelope).reason
    'impossible_input: rooms_left=30 is above capacity=20'
    >>> guard.check(req, {"rooms_left": 400, "capacity": 500}, envelope).reason
    'ood_input: rooms_left=400 outside the training range widened by 0.5: [-23.5, 74.5]'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from events.models import PricingRequest
from pricing.degraded import IMPOSSIBLE_INPUT, OOD_INPUT, Degradation
from pricing.vectorize import request_values

COUNT_PREFIXES = ("searches_", "views_", "bookings_", "cancellations_", "hotel_searches_", "hotel_views_",
                  "hotel_bookings_")
"""Features that count events: never negative."""
_PRICE_COLUMNS = ("price", "price_to_")
"""Columns set per candidate price by the pricer itself, not by the request."""


class InputGuardConfig(BaseModel):
    """Settings of the input guard.

    Attributes:
        margin: how far beyond the training range an input may go, as a share of the range's width
            on each side (0: the 1st-99th percentile range itself).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    margin: float = Field(default=1.0, ge=0.0, le=100.0, allow_inf_nan=False)


def impossible(request: PricingRequest, features: Mapping[str, float | None]) -> str | None:
    """What makes this request impossible, or None.

    Example:
        >>> from datetime import date, datetime, timezone
        >>> req = PricingRequest(hotel_id="h1", room_type="std", stay_date=date(2026, 12, 24),
        ...                      event_time=datetime(2026, 12, 1, tzinfo=timezone.utc))
        >>> impossible(req, {"bookings_24h": -2.0})
        'bookings_24h=-2.0 is negative, expected a count >= 0'
    """
    for name, value in features.items():
        if value is not None and value < 0 and (name.startswith(COUNT_PREFIXES) or name == "rooms_left"):
            return f"{name}={value} is negative, expected a count >= 0"
    rooms, capacity, occupancy = features.get("rooms_left"), features.get("capacity"), features.get("occupancy")
    if capacity is not None and capacity <= 0:
        return f"capacity={capacity}, expected > 0"
    if rooms is not None and capacity is not None and rooms > capacity:
        return f"rooms_left={rooms:g} is above capacity={capacity:g}"
    if occupancy is not None and not 0.0 <= occupancy <= 1.0:
        return f"occupancy={occupancy}, expected a share in [0, 1]"
    lead = (request.stay_date - request.request_time.date()).days  # the models' lead time is clipped at 0
    if lead < 0:
        return f"stay_date={request.stay_date} is {-lead} days before the request, expected on or after it"
    return None


def widened(envelope: Mapping[str, Any], margin: float) -> dict[str, tuple[float, float]]:
    """Each request-side input's training range widened by ``margin`` x its width (price columns left out)."""
    out: dict[str, tuple[float, float]] = {}
    for name, bounds in envelope.items():
        if name.startswith(_PRICE_COLUMNS) or not isinstance(bounds, list | tuple) or len(bounds) != 2:
            continue
        lo, hi = bounds
        if lo is None or hi is None:
            continue
        lo, hi = float(lo), float(hi)
        width = hi - lo
        if width <= 0:  # a constant in training (one base rate): widen around its magnitude instead
            width = max(abs(lo), abs(hi), 1.0)
        out[name] = (lo - margin * width, hi + margin * width)
    return out


class InputGuard:
    """Flags impossible and out-of-distribution requests (:func:`impossible`, :func:`widened`)."""

    def __init__(self, config: InputGuardConfig) -> None:
        self.config = config
        self._cache: tuple[int, dict[str, tuple[float, float]]] | None = None

    def bounds(self, envelope: Mapping[str, Any]) -> dict[str, tuple[float, float]]:
        """:func:`widened` of ``envelope``, cached while the same envelope object is passed."""
        if self._cache is None or self._cache[0] != id(envelope):
            self._cache = (id(envelope), widened(envelope, self.config.margin))
        return self._cache[1]

    def check(self, request: PricingRequest, features: Mapping[str, float | None],
              envelope: Mapping[str, Any] | None) -> Degradation | None:
        """A degradation naming the first impossible or out-of-range input, or None."""
        problem = impossible(request, features)
        if problem is not None:
            return Degradation(IMPOSSIBLE_INPUT, problem)
        if not envelope:
            return None
        values: dict[str, Any] = {**features, **request_values(request)}
        for name, (lo, hi) in self.bounds(envelope).items():
            value = values.get(name)
            if value is not None and not lo <= value <= hi:
                return Degradation(OOD_INPUT, f"{name}={value:g} outside the training range widened by "
                                              f"{self.config.margin:g}: [{lo:g}, {hi:g}]")
        return None
