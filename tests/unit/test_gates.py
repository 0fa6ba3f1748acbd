from __future__ import annotations

import numpy as np
import pytest

from delivery.gates import (
    Evidence,
    GateLimits,
    evaluate_gates,
    flip_rate_gate,
    latency_gate,
    net_value_gate,
    price_ks_gate,
    price_mean_shift_gate,
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


def test_net_value_gate_promotes_aborts_and_waits() -> None:
    rng = np.random.default_rng(1)
    inc = (rng.uniform(size=20_000) < 0.30) * rng.uniform(80, 200, 20_000)
    better = (rng.uniform(size=20_000) < 0.36) * rng.uniform(80, 200, 20_000)
    worse = (rng.uniform(size=20_000) < 0.24) * rng.uniform(80, 200, 20_000)
    same = (rng.uniform(size=20_000) < 0.30) * rng.uniform(80, 200, 20_000)
    up, down, flat = (net_value_gate(inc, c, limits=LIMITS) for c in (better, worse, same))
    assert up.passed and not up.waiting and up.observed > 0
    assert not down.passed and not down.waiting and "candidate worse" in down.message
    assert flat.waiting and not flat.passed and "undecided" in flat.message
    few = net_value_gate(inc[:100], better[:100], limits=LIMITS)
    assert few.waiting and "gathering evidence" in few.message


def test_outcome_gate_prefers_net_value_to_revenue() -> None:
    rng = np.random.default_rng(2)
    prices = _prices(8_000)
    booked = (rng.uniform(size=8_000) < 0.3).astype(float)
    # the candidate books more at the same prices, but sells rooms worth more than it charges
    cand_booked = (rng.uniform(size=8_000) < 0.4).astype(float)
    e = Evidence(incumbent_prices=prices, candidate_prices=prices, candidate_latency_ms=np.full(8_000, 2.0),
                 incumbent_revenue=booked * prices, candidate_revenue=cand_booked * prices,
                 incumbent_net=booked * prices * 0.2, candidate_net=cand_booked * (prices - 1.5 * prices))
    by_gate = {r.gate: r for r in evaluate_gates(e, limits=LIMITS, outcomes=True)}
    assert not by_gate["net_value"].passed and "on net value" in by_gate["net_value"].message
    revenue_only = Evidence(**{**e.__dict__, "incumbent_net": None, "candidate_net": None})
    by_gate = {r.gate: r for r in evaluate_gates(revenue_only, limits=LIMITS, outcomes=True)}
    assert by_gate["net_value"].passed and "on revenue" in by_gate["net_value"].message


def test_latency_gate_on_p99() -> None:
    lat = np.concatenate([np.full(980, 5.0), np.full(20, 120.0)])
    result = latency_gate(lat, limits=LIMITS)
    assert not result.passed and result.observed == 120.0
    assert latency_gate(np.full(1_000, 5.0), limits=LIMITS).passed


def test_missing_evidence_fails_the_gate() -> None:
    inc = _prices()
    results = evaluate_gates(Evidence(incumbent_prices=inc, candidate_prices=inc), limits=LIMITS, outcomes=True)
    failed = {r.gate: r.message for r in results if not r.passed}
    assert set(failed) == {"net_value", "p99_latency"}
    assert "no evidence" in failed["p99_latency"]
    few = flip_rate_gate(inc[:10], inc[:10], limits=LIMITS)
    assert not few.passed and "10 < 30" in few.message
