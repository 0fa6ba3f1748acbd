"""The capacity-aware DP oracle: exact on hand-solved cases, never below the myopic policy, reacts to inventory."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime

import numpy as np
import pytest

from market import Market, MarketConfig
from market.dp import best_response, solve
from market.errors import SimulatorError
from market.oracle import DPOracle, lead_edges
from market.shoppers import Offer

ONE = {"intent": np.ones(1), "rooms_pmf": np.ones((1, 1)), "nights": np.ones(1), "keep": np.ones(1)}


def test_two_rooms_three_periods_at_a_fixed_price_solved_by_hand() -> None:
    # price pinned to 100 (lo = hi) with P(book) = 1/2 and one shopper per period:
    # V2(x>=1) = 50; V1(2) = 50 + .5 (100 - 0) = 100; V1(1) = 50 + .5 (100 - 50) = 75;
    # V0(2) = 100 + .5 (100 - 25) = 137.5; V0(1) = 75 + .5 (100 - 75) = 87.5.
    a = np.full((3, 1), 2.0 * math.log(100.0))
    v = solve(capacity=2, lam=np.ones((3, 1)), a=a, b=np.array([2.0]), lo=100.0, hi=100.0, **ONE)
    assert v.tolist() == [[0.0, 87.5, 137.5], [0.0, 75.0, 100.0], [0.0, 50.0, 50.0], [0.0, 0.0, 0.0]]


def test_two_rooms_three_periods_free_price_matches_a_brute_force_bellman() -> None:
    lam, b, a0 = 0.8, 2.5, 2.5 * math.log(120.0)
    grid = np.linspace(1.0, 2000.0, 400_001)
    prob = 1.0 / (1.0 + np.exp(b * np.log(grid) - a0))
    hand = np.zeros((4, 3))
    for t in (2, 1, 0):
        for x in (1, 2):
            bid = hand[t + 1, x] - hand[t + 1, x - 1]
            hand[t, x] = hand[t + 1, x] + lam * float(np.max(prob * (grid - bid)))
    v = solve(capacity=2, lam=np.full((3, 1), lam), a=np.full((3, 1), a0), b=np.array([b]), **ONE)
    np.testing.assert_allclose(v, hand, rtol=1e-6)
    # the last period is myopic: P(book) = 1 - 1/b = 0.6 at p = 120 exp(-logit(0.6) / b)
    assert v[2, 1] == pytest.approx(lam * 0.6 * 120.0 * math.exp(-math.log(1.5) / b), rel=1e-6)
    assert v[1, 1] > v[2, 1] and v[0, 2] - v[0, 1] < v[0, 1]


def _random_market(rng: np.random.Generator) -> dict[str, np.ndarray | int]:
    periods, classes = int(rng.integers(1, 9)), int(rng.integers(1, 4))
    k_max = int(rng.integers(1, 4))
    lam = rng.dirichlet(np.ones(classes + 1), periods)[:, :classes]  # at most one arrival per period
    pmf = rng.dirichlet(np.ones(k_max), classes)
    return {
        "capacity": int(rng.integers(1, 6)),
        "lam": lam,
        "a": rng.normal(8.0, 2.0, (periods, classes)),
        "b": rng.uniform(1.3, 4.0, classes),
        "intent": rng.uniform(0.2, 1.0, classes),
        "rooms_pmf": pmf,
        "nights": rng.uniform(1.0, 3.0, classes),
        "keep": rng.uniform(0.6, 1.0, classes),
    }


def test_dp_is_never_below_the_myopic_policy_on_100_random_small_markets() -> None:
    rng = np.random.default_rng(14)
    gaps = []
    for _ in range(100):
        spec = _random_market(rng)
        a, b = spec["a"], spec["b"]
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
        myopic = np.stack([best_response(a[:, j], float(b[j]), np.zeros(len(a))) for j in range(len(b))], axis=1)
        dp = solve(**spec)  # type: ignore[arg-type]
        fixed = solve(**spec, prices=myopic)  # type: ignore[arg-type]
        assert np.all(dp >= fixed - 1e-9 * np.maximum(1.0, fixed))
        gaps.append(float(dp[0, -1] - fixed[0, -1]))
    assert max(gaps) > 0.0  # the bound is not vacuous: somewhere scarcity pays


def test_bid_price_falls_with_rooms_left_and_is_zero_when_no_room_can_be_sold() -> None:
    a = np.full((6, 1), 2.0 * math.log(100.0))
    v = solve(capacity=4, lam=np.ones((6, 1)), a=a, b=np.array([2.0]), **ONE)
    marginal = np.diff(v[1])  # value of the x-th room with five periods left
    assert np.all(np.diff(marginal) <= 1e-12) and marginal[-1] >= 0.0
    assert v[0, 0] == 0.0


def test_solver_refuses_mismatched_shapes_and_flat_demand() -> None:
    with pytest.raises(SimulatorError, match="lam/a"):
        solve(capacity=1, lam=np.ones((2, 1)), a=np.ones((3, 1)), b=np.array([2.0]), **ONE)
    with pytest.raises(SimulatorError, match="slope"):
        best_response(np.array(1.0), 0.9, np.array(0.0))


def test_market_oracle_raises_the_price_as_the_night_fills_and_prices_within_the_grid() -> None:
    market = Market(MarketConfig(hotels=1, horizon_days=30, seed=2))
    oracle = DPOracle(market, first_night=date(2026, 1, 2), last_night=date(2026, 2, 5))
    cap = market.capacity("h0000", "standard")
    at = datetime(2026, 1, 10, 20, tzinfo=UTC)
    offer = Offer("h0000", "standard", date(2026, 1, 14), at, "business", "corporate", 4, cap, cap)
    prices = [oracle.price(offer._replace(rooms_left=x)) for x in (cap, cap // 2, 3, 1)]
    assert prices == sorted(prices) and prices[-1] > prices[0] * 1.05
    ref = market.reference_price("h0000", "standard")
    assert all(0.25 * ref <= p <= 4.0 * ref for p in prices)
    with pytest.raises(SimulatorError, match="stay_date"):
        oracle.price(offer._replace(stay_date=date(2026, 3, 1)))


def test_lead_edges_cover_the_horizon_with_hourly_periods_at_the_end() -> None:
    edges = lead_edges(120.0)
    assert edges[0] == 120.0 and edges[-1] == 0.0 and np.all(np.diff(edges) < 0)
    assert edges[-2] == pytest.approx(1.0 / 24.0)


def test_rooms_held_by_cancelling_bookings_raise_the_bid_price() -> None:
    a = np.full((4, 1), 2.0 * math.log(100.0))
    spec = {"capacity": 2, "lam": np.ones((4, 1)), "a": a, "b": np.array([2.0]), "intent": np.ones(1),
            "rooms_pmf": np.ones((1, 1)), "nights": np.ones(1), "keep": np.array([0.6])}
    free, held = solve(**spec), solve(**spec, consume=np.ones(1))  # type: ignore[arg-type]
    assert np.all(held <= free + 1e-12) and held[0, 1] < free[0, 1]
    np.testing.assert_allclose(held[3], [0.0, 30.0, 30.0])  # the last period has no future to protect
    np.testing.assert_allclose(free[3], held[3])


def test_channel_only_dp_price_also_rises_as_the_night_fills() -> None:
    market = Market(MarketConfig(hotels=1, horizon_days=30, seed=2))
    oracle = DPOracle(market, first_night=date(2026, 1, 2), last_night=date(2026, 2, 5))
    cap = market.capacity("h0000", "standard")
    at = datetime(2026, 1, 10, 20, tzinfo=UTC)
    offer = Offer("h0000", "standard", date(2026, 1, 14), at, "business", "web", 4, cap, cap)
    prices = [oracle.channel_price(offer._replace(rooms_left=x)) for x in (cap, cap // 2, 3, 1)]
    assert prices == sorted(prices) and prices[-1] > prices[0]
    # with every room free and the night far from full the channel price is the myopic oracle's
    myopic = market.optimal_price("h0000", "standard", date(2026, 1, 14), at, channel="web")
    assert prices[0] == pytest.approx(myopic, rel=0.03)
    # the segment is not used: a leisure shopper on the same channel gets the same price
    assert oracle.channel_price(offer._replace(segment="leisure")) == prices[0]
