from __future__ import annotations

import uuid
from datetime import UTC, date, datetime

import pytest

from events.models import OutcomeLabel
from feedback.differences import DifferenceCounter, DifferenceRules, find_differences


def label(y: int, p: float | None, *, tier: str = "light", hotel: str = "h1", price: float = 100.0) -> OutcomeLabel:
    return OutcomeLabel(
        hotel_id=hotel,
        room_type="std",
        stay_date=date(2026, 5, 1),
        event_time=datetime(2026, 4, 1, tzinfo=UTC),
        decision_id=uuid.uuid4(),
        label=y,  # type: ignore[arg-type]
        price=price,
        tier=tier,  # type: ignore[arg-type]
        predicted_prob=p,
    )


def test_rules_fire_only_on_contradictions() -> None:
    assert [d.rule_id for d in find_differences(label(1, 0.1))] == ["booked_low_prob"]
    assert [d.rule_id for d in find_differences(label(0, 0.9))] == ["unbooked_high_prob"]
    assert find_differences(label(1, 0.9)) == [] and find_differences(label(0, 0.1)) == []
    assert find_differences(label(1, 0.5), price_paid=120.0) == []  # 20% < 25%
    assert [d.rule_id for d in find_differences(label(1, 0.5), price_paid=70.0)] == ["price_far"]
    strict = DifferenceRules(price_gap=0.1)
    assert [d.rule_id for d in find_differences(label(1, 0.5), price_paid=120.0, rules=strict)] == ["price_far"]


def test_counter_groups_by_tier_hotel_and_rule() -> None:
    counter = DifferenceCounter()
    counter.update(label(1, 0.1, tier="light", hotel="h1"))
    counter.update(label(0, 0.95, tier="heavy", hotel="h1"))
    counter.update(label(0, 0.95, tier="heavy", hotel="h2"))
    counter.update(label(1, 0.6, tier="rules", hotel="h2"))
    s = counter.summary()
    assert s["total"] == 3 and s["n_labels"] == 4 and s["rate"] == 0.75
    assert s["by_tier"] == {"heavy": 2, "light": 1}
    assert s["by_hotel"] == {"h1": 2, "h2": 1}
    assert counter.count(rule_id="unbooked_high_prob", hotel_id="h2") == 1


def test_rules_must_be_ordered() -> None:
    with pytest.raises(ValueError, match="low_prob"):
        DifferenceRules(low_prob=0.9, high_prob=0.8)
