from __future__ import annotations

from typing import Any

import pytest

from routing.errors import RoutingInputError
from routing.health import health_check


def _case() -> dict[str, Any]:
    # 10 requests: 4 heavy, 4 light, 2 rules
    return {
        "scores": [0.9, 0.8, 0.95, 0.7, 0.4, 0.3, 0.5, 0.45, 0.05, 0.1],
        "tiers": ["heavy", "heavy", "heavy", "heavy", "light", "light", "light", "light", "rules", "rules"],
        "light_prices": [100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0],
        #                 FP(0%)  FP(.5%) ok(10%) ok(3%) FN(5%) ok(0) FN(2%)  ok(.9%) rules vs heavy
        "heavy_prices": [100.0, 100.5, 110.0, 103.0, 105.0, 100.0, 102.0, 100.9, 100.0, 100.0],
    }


def test_counts_false_positives_and_negatives() -> None:
    case = _case()
    report = health_check(**case, rules_prices=[100.0, 100, 100, 100, 100, 100, 100, 100, 90.0, 100.0])
    assert report.tier_counts == {"rules": 2, "light": 4, "heavy": 4}
    assert report.false_positives == 2
    assert report.fp_rate == pytest.approx(2 / 4)
    # light rows 5% and 2% off, plus the rules row served at 90 against heavy 100
    assert report.false_negatives == 3
    assert report.fn_rate == pytest.approx(3 / 6)
    assert report.fn_share == pytest.approx(0.3)
    assert report.mean_fn_gap == pytest.approx((5 / 105 + 2 / 102 + 10 / 100) / 3)
    assert report.mean_score_fp == pytest.approx(0.85)


def test_tolerance_is_configurable() -> None:
    report = health_check(**_case(), rel_tolerance=0.04)
    # heavy rows with gaps 0%, 0.5% and 2.9% are within 4%; 9.1% is not
    assert report.false_positives == 3
    assert report.false_negatives == 1  # only the 5% light row


def test_revenue_at_risk_sums_false_negatives_only() -> None:
    case = _case()
    served = [10.0] * 10
    heavy_rev = [11.0, 11.0, 11.0, 11.0, 14.0, 50.0, 12.0, 10.0, 10.0, 10.0]
    report = health_check(**case, served_revenue=served, heavy_revenue=heavy_rev)
    assert report.revenue_at_risk == pytest.approx(4.0 + 2.0)


def test_bad_input_names_the_field() -> None:
    case = _case()
    case["tiers"] = case["tiers"][:-1]
    with pytest.raises(RoutingInputError, match="tiers"):
        health_check(**case)
    case = _case()
    case["tiers"][0] = "medium"
    with pytest.raises(RoutingInputError, match="medium"):
        health_check(**case)
    case = _case()
    case["heavy_prices"][0] = 0.0
    with pytest.raises(RoutingInputError, match="heavy_prices"):
        health_check(**case)
