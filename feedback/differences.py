"""Difference cases: outcomes that contradict the decision that preceded them.

Rules (ids are stable and appear in counters and dashboards):

* ``booked_low_prob``: booked although the model gave ``p < low_prob``;
* ``unbooked_high_prob``: not booked although ``p > high_prob``;
* ``price_far``: booked at a price paid more than ``price_gap`` (a fraction)
  away from the recommended price.

Example:
    >>> import uuid
    >>> from datetime import date, datetime, timezone
    >>> from events.models import OutcomeLabel
    >>> lab = OutcomeLabel(hotel_id="h1", room_type="std", stay_date=date(2026, 2, 1),
    ...                    event_time=datetime(2026, 1, 1, tzinfo=timezone.utc), decision_id=uuid.uuid4(),
    ...                    label=1, price=100.0, tier="light", predicted_prob=0.05)
    >>> counter = DifferenceCounter()
    >>> [d.rule_id for d in counter.update(lab, price_paid=150.0)]
    ['booked_low_prob', 'price_far']
    >>> counter.summary()["by_rule"]
    {'booked_low_prob': 1, 'price_far': 1}
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from events.models import OutcomeLabel
from feedback.errors import require

RuleId = Literal["booked_low_prob", "unbooked_high_prob", "price_far"]


class DifferenceRules(BaseModel):
    """Thresholds of the difference rules."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    low_prob: float = Field(default=0.2, ge=0.0, le=1.0)
    high_prob: float = Field(default=0.8, ge=0.0, le=1.0)
    price_gap: float = Field(default=0.25, gt=0.0)

    @model_validator(mode="after")
    def _ordered(self) -> DifferenceRules:
        require(self.low_prob < self.high_prob, "low_prob", self.low_prob, f"below high_prob={self.high_prob}")
        return self


@dataclass(frozen=True)
class Difference:
    """One contradiction between a decision and its outcome."""

    rule_id: RuleId
    decision_id: str
    hotel_id: str
    tier: str
    detail: str


def find_differences(
    label: OutcomeLabel, *, price_paid: float | None = None, rules: DifferenceRules | None = None
) -> list[Difference]:
    """Differences that ``label`` shows (empty when the outcome agrees with the decision)."""
    rules = rules or DifferenceRules()
    found: list[Difference] = []

    def add(rule_id: RuleId, detail: str) -> None:
        found.append(Difference(rule_id, str(label.decision_id), label.hotel_id, label.tier, detail))

    p = label.predicted_prob
    if p is not None and label.label == 1 and p < rules.low_prob:
        add("booked_low_prob", f"booked with p={p:.3f} < {rules.low_prob}")
    if p is not None and label.label == 0 and p > rules.high_prob:
        add("unbooked_high_prob", f"not booked with p={p:.3f} > {rules.high_prob}")
    if price_paid is not None and label.label == 1:
        gap = abs(price_paid - label.price) / label.price
        if gap > rules.price_gap:
            add("price_far", f"paid {price_paid:.2f} vs recommended {label.price:.2f} ({gap:.0%} away)")
    return found


class DifferenceCounter:
    """Counts difference cases by rule, tier and hotel.

    Every label passed in counts, revisions included: pass only final labels
    (or only revision 0) if a decision should count once.
    """

    def __init__(self, rules: DifferenceRules | None = None) -> None:
        self.rules = rules or DifferenceRules()
        self._n_labels = 0
        self._by_rule: Counter[str] = Counter()
        self._by_tier: Counter[str] = Counter()
        self._by_hotel: Counter[str] = Counter()
        self._by_key: Counter[tuple[str, str, str]] = Counter()

    @property
    def n_labels(self) -> int:
        """Labels seen."""
        return self._n_labels

    def update(self, label: OutcomeLabel, *, price_paid: float | None = None) -> list[Difference]:
        """Check one label and count what it shows; returns the differences found."""
        self._n_labels += 1
        found = find_differences(label, price_paid=price_paid, rules=self.rules)
        for diff in found:
            self._by_rule[diff.rule_id] += 1
            self._by_tier[diff.tier] += 1
            self._by_hotel[diff.hotel_id] += 1
            self._by_key[(diff.rule_id, diff.tier, diff.hotel_id)] += 1
        return found

    def count(self, *, rule_id: str | None = None, tier: str | None = None, hotel_id: str | None = None) -> int:
        """Differences matching every given filter."""
        return sum(
            n
            for (r, t, h), n in self._by_key.items()
            if (rule_id is None or r == rule_id) and (tier is None or t == tier) and (hotel_id is None or h == hotel_id)
        )

    def summary(self) -> dict[str, Any]:
        """Totals, the rate per label, and counts by rule, tier and hotel (sorted, JSON-ready)."""
        total = sum(self._by_rule.values())
        return {
            "n_labels": self._n_labels,
            "total": total,
            "rate": total / self._n_labels if self._n_labels else 0.0,
            "by_rule": dict(sorted(self._by_rule.items())),
            "by_tier": dict(sorted(self._by_tier.items())),
            "by_hotel": dict(sorted(self._by_hotel.items())),
        }
