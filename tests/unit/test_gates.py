from __future__ import annotations

import numpy as np
import pytest

from delivery.gates import (
    Evidence,
    GateLimits,
    booking_rate_gate,
    evaluate_gates,
    flip_rate_gate,
    latency_gate,
    price_ks_gate,
    price_mean_shift_gate,
    revenue_gate,
    wilson_lower,
)

LIMITS = GateLimits()


def _prices(n: int = 1_000) -> np.ndarray:
    return np.random.default_rng(9).uniform(80.0, 220.0, n)


def test_twenty_percent_flip_rate_is_stopped_at_the_flip_gate() -> None:
    inc = _prices()
    cand = inc.copy()
    cand[::5] *= 1.05  # every fifth input priced 5% higher
    results = evaluate_gates(
        Evidence(incumbent_prices=inc, candidate_prices=cand, candidate_latency_ms=np.full(1_000, 2.0)),
        limits=LIMITS,
        outcomes=False,
    )
    failed = [r for r in results if not r.passed]
    assert [r.gate for r in failed] == ["flip_rate"]
    assert failed[0].observed == pytest.approx(0.2)
    assert failed[0].message.startswith("gate 'flip_rate' failed: observed 0.2 > limit 0.1")
    assert "over by 0.1" in failed[0].message


def test_small_moves_do_not_count_as_flips() -> None:
    inc = _prices()
    result = flip_rate_gate(inc, inc * 1.009, limits=LIMITS)
    assert result.passed and result.observed == 0.0


def test_price_distribution_shift_is_stopped() -> None:
    inc = _prices()
    cand = inc * 1.2 + 5.0  # everything shifted up
    ks = price_ks_gate(inc, cand, limits=LIMITS)
    shift = price_mean_shift_gate(inc, cand, limits=LIMITS)
    assert not ks.passed and ks.gate == "price_ks" and ks.observed > 0.1
    assert not shift.passed and shift.observed == pytest.approx(np.mean((cand - inc) / inc))
    assert "price_mean_shift" in shift.message


def test_booking_gate_uses_the_lower_confidence_bound() -> None:
    rng = np.random.default_rng(1)
    inc = (rng.uniform(size=20_000) < 0.30).astype(float)
    same = (rng.uniform(size=20_000) < 0.30).astype(float)
    worse = (rng.uniform(size=20_000) < 0.22).astype(float)
    ok = booking_rate_gate(inc, same, limits=LIMITS)
    bad = booking_rate_gate(inc, worse, limits=LIMITS)
    assert ok.passed and ok.limit == pytest.approx(inc.mean() * 0.95)
    assert not bad.passed and bad.observed == pytest.approx(wilson_lower(worse.sum(), 20_000, confidence=0.95))
    assert "short by" in bad.message


def test_revenue_gate() -> None:
    rng = np.random.default_rng(2)
    inc = rng.gamma(2.0, 50.0, 5_000)
    assert revenue_gate(inc, rng.gamma(2.0, 52.0, 5_000), limits=LIMITS).passed
    result = revenue_gate(inc, rng.gamma(2.0, 40.0, 5_000), limits=LIMITS)
    assert not result.passed and result.gate == "revenue_per_request"


def test_latency_gate_on_p99() -> None:
    lat = np.concatenate([np.full(980, 5.0), np.full(20, 120.0)])
    result = latency_gate(lat, limits=LIMITS)
    assert not result.passed and result.observed == 120.0
    assert latency_gate(np.full(1_000, 5.0), limits=LIMITS).passed


def test_missing_evidence_fails_the_gate() -> None:
    inc = _prices()
    results = evaluate_gates(Evidence(incumbent_prices=inc, candidate_prices=inc), limits=LIMITS, outcomes=True)
    failed = {r.gate: r.message for r in results if not r.passed}
    assert set(failed) == {"booking_rate", "revenue_per_request", "p99_latency"}
    assert "no evidence" in failed["p99_latency"]
    few = flip_rate_gate(inc[:10], inc[:10], limits=LIMITS)
    assert not few.passed and "10 < 30" in few.message


def test_wilson_lower_bound_known_value() -> None:
    # 50/100 at 95%: 0.4038 (standard table value)
    assert wilson_lower(50, 100, confidence=0.95) == pytest.approx(0.40383, abs=1e-4)
    assert wilson_lower(0, 0, confidence=0.95) == 0.0
