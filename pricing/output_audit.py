"""Output audit (OWASP ML09): model prices that swing away from a key's recent prices are clamped or held.

Every served decision's price enters a short history per stay key (hotel, room type, stay
date). A decision priced by a model (tier ``light`` or ``heavy``; rules prices are the trusted
baseline and only feed the history) is checked against two bounds:

* **the rules' band**: ``[floor, ceiling]`` of the rule set for that request (reason ``band``);
* **the recent median**: once the key has ``min_history`` prices, a price more than
  ``max_move`` (a share) away from their median (reason ``median``).

A breach is **clamped** to the nearest allowed price (or, with ``action="hold"``, held at the
median), counted in ``pricestream_output_audit_total{action, reason}`` and recorded on the
decision itself: its ``rule_ids`` gain ``output-audit:<action>:<reason>``, so the audit log and
``pricing.decisions`` say so. Served (post-audit) prices enter the history, so a model whose
prices legitimately moved converges within about ``window`` decisions, never in one jump.

Example:
    >>> from datetime import date
    >>> from events.models import PricingDecision
    >>> audit = OutputAudit(OutputAuditConfig(max_move=0.5, min_history=3))
    >>> def decided(price, tier="light"):
    ...     return PricingDecision(hotel_id="h1", room_type="std", stay_date=date(2027, 1, 15),
    ...                            request_id="00000000-0000-0000-0000-000000000001", price=price, tier=tier,
    ...                            complexity=0.1, latency_ms=1.0)
    >>> [audit.check(decided(p, "rules")).price for p in (100.0, 102.0, 98.0)]
    [100.0, 102.0, 98.0]
    >>> d = audit.check(decided(300.0))
    >>> d.price, d.rule_ids
    (150.0, ('output-audit:clamp:median',))
    >>> audit.counts
    {('clamp', 'median'): 1}
"""

from __future__ import annotations

import statistics
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Literal

from prometheus_client import CollectorRegistry, Counter
from pydantic import BaseModel, ConfigDict, Field

from events.models import PricingDecision, PricingRequest
from pricing.degraded import PRICE_DECIMALS, money
from pricing.metrics import registry_counter

if TYPE_CHECKING:
    from pricing.rules import RuleSet

Band = Callable[[PricingRequest, Mapping[str, float | None]], tuple[float, float]]
"""The rules' ``(floor, ceiling)`` for a request and the features its decision read."""

MODEL_TIERS = frozenset({"light", "heavy"})
"""Tiers whose prices are audited (a model decided them)."""

class OutputAuditConfig(BaseModel):
    """Settings of the output audit.

    Attributes:
        max_move: largest share a model price may move from the key's recent median (0.5: +-50%).
        window: recent served prices kept per key.
        min_history: prices a key needs before the median bound applies.
        max_keys: keys remembered (least recently used dropped): bounds the memory one client can cost.
        action: ``clamp`` to the nearest allowed price, or ``hold`` at the median (the band when none).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_move: float = Field(default=0.5, gt=0.0, le=10.0)
    price_decimals: int = Field(default=PRICE_DECIMALS, ge=0, le=4)
    window: int = Field(default=50, ge=1, le=10_000)
    min_history: int = Field(default=5, ge=1)
    max_keys: int = Field(default=100_000, ge=1)
    action: Literal["clamp", "hold"] = "clamp"


def output_audit_counter(registry: CollectorRegistry) -> Counter:
    """``pricestream_output_audit_total{action, reason}`` on ``registry`` (created once per registry)."""
    return registry_counter(registry, "pricestream_output_audit_total",
                            "Model prices clamped or held by the output audit.", ["action", "reason"])


class OutputAudit:
    """Checks served decisions against the rules' band and the key's recent median (thread-safe).

    Args:
        config: the bounds and the action.
        band: the rules' band of a decision (None: no band check).
        counter: a Prometheus counter with ``action`` and ``reason`` labels (None: counted in ``counts`` only).
    """

    def __init__(self, config: OutputAuditConfig | None = None, *, band: Band | None = None,
                 counter: Counter | None = None) -> None:
        self.config = config or OutputAuditConfig()
        self._band = band
        self._counter = counter
        self._history: OrderedDict[tuple[str, str, str], deque[float]] = OrderedDict()
        self._lock = threading.Lock()
        self.counts: dict[tuple[str, str], int] = {}

    def check(self, decision: PricingDecision, request: PricingRequest | None = None) -> PricingDecision:
        """``decision``, clamped or held when its model price breaches a bound; its price enters the history.

        ``request`` (the decision's) is needed for the band check; without it only the median applies.
        """
        key = (decision.hotel_id, decision.room_type, decision.stay_date.isoformat())
        with self._lock:
            recent = self._history.get(key)
            median = statistics.median(recent) if recent and len(recent) >= self.config.min_history else None
        price, reason = decision.price, None
        if decision.tier in MODEL_TIERS:
            band = self._band(request, decision.features) if self._band is not None and request is not None else None
            price, reason = self._bounded(decision.price, median, band)
        if reason is not None:
            action = self.config.action
            self.counts[(action, reason)] = self.counts.get((action, reason), 0) + 1
            if self._counter is not None:
                self._counter.labels(action=action, reason=reason).inc()
            rule = f"output-audit:{action}:{reason}"
            decision = decision.model_copy(
                update={"price": money(price, self.config.price_decimals), "rule_ids": (*decision.rule_ids, rule)})
        self._remember(key, decision.price)
        return decision

    def _bounded(self, price: float, median: float | None, band: tuple[float, float] | None
                 ) -> tuple[float, str | None]:
        floor, ceiling = band if band is not None else (0.0, float("inf"))
        hold = self.config.action == "hold"
        if not floor <= price <= ceiling:
            fallback = median if hold and median is not None and floor <= median <= ceiling else None
            return (fallback if fallback is not None else min(max(price, floor), ceiling)), "band"
        if median is None:
            return price, None
        low, high = median * (1.0 - self.config.max_move), median * (1.0 + self.config.max_move)
        if low <= price <= high:
            return price, None
        allowed = median if hold else min(max(price, low), high)
        return min(max(allowed, floor), ceiling), "median"

    def _remember(self, key: tuple[str, str, str], price: float) -> None:
        with self._lock:
            recent = self._history.get(key)
            if recent is None:
                recent = self._history[key] = deque(maxlen=self.config.window)
                if len(self._history) > self.config.max_keys:
                    self._history.popitem(last=False)
            else:
                self._history.move_to_end(key)
            recent.append(price)


def rules_band(rules: RuleSet) -> Band:
    """The band of a :class:`~pricing.rules.RuleSet`: its ``floor`` and ``ceiling`` for a request."""

    def band(request: PricingRequest, features: Mapping[str, float | None]) -> tuple[float, float]:
        # the same features as the decision: the band (max-change, last-rooms, parity rules) depends on them
        outcome = rules.evaluate(request, features)
        return float(outcome.floor), float(outcome.ceiling)

    return band
