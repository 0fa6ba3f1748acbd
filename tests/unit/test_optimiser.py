"""Optimiser: finds the known revenue optimum, honours bounds, falls back on NaN, risk adjustment."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from market.synthetic import optimal_price
from pricing.errors import QuoteError
from pricing.optimiser import optimise, price_grid


def logistic(intercept: float, elasticity: float):
    def predict(prices: np.ndarray) -> np.ndarray:
        return (1.0 / (1.0 + np.exp(-(intercept - elasticity * np.log(prices)))))[:, None]

    return predict


def local_step(grid: np.ndarray, price: float) -> float:
    i = int(np.argmin(np.abs(grid - price)))
    return float(max(grid[min(i + 1, len(grid) - 1)] - grid[i], grid[i] - grid[max(i - 1, 0)]))


@settings(max_examples=60, deadline=None)
@given(
    elasticity=st.floats(1.3, 4.0),
    log_opt=st.floats(math.log(60), math.log(500)),
    grid_size=st.sampled_from([9, 41]),
)
def test_grid_search_finds_known_optimum_within_one_step(elasticity: float, log_opt: float, grid_size: int) -> None:
    intercept = elasticity * log_opt + math.log(elasticity - 1.0)
    truth = optimal_price(intercept=intercept, elasticity=elasticity)
    assert truth == pytest.approx(math.exp(log_opt))
    floor, ceiling = 40.0, 800.0
    best = optimise(logistic(intercept, elasticity), floor=floor, ceiling=ceiling, grid_size=grid_size)
    assert abs(best.price - truth) <= local_step(price_grid(floor, ceiling, grid_size), truth) + 1e-9
    assert best.booking_prob is not None
    assert best.expected_revenue == pytest.approx(best.price * best.booking_prob)
    assert not best.fallback and best.uncertainty == 0.0


def test_refinement_pass_narrows_the_error_of_a_coarse_grid() -> None:
    intercept, elasticity = 2.0 * math.log(150.0), 2.0
    truth = optimal_price(intercept=intercept, elasticity=elasticity)
    coarse = optimise(logistic(intercept, elasticity), floor=40.0, ceiling=800.0, grid_size=9)
    refined = optimise(logistic(intercept, elasticity), floor=40.0, ceiling=800.0, grid_size=9, refine_passes=1)
    assert abs(refined.price - truth) < abs(coarse.price - truth)
    assert abs(refined.price - truth) / truth < 0.05
    prices = [c[0] for c in refined.candidates]
    assert len(prices) == 18 and prices == sorted(prices)


def test_optimum_beyond_ceiling_picks_the_ceiling() -> None:
    best = optimise(logistic(2.0 * math.log(900.0), 2.0), floor=50.0, ceiling=300.0, grid_size=9)
    assert best.price == 300.0


def test_nan_model_falls_back_to_clamped_rules_price() -> None:
    def broken(prices: np.ndarray) -> np.ndarray:
        out = np.full((len(prices), 1), 0.3)
        out[3] = np.nan
        return out

    assert optimise(broken, floor=50.0, ceiling=300.0, grid_size=9, fallback_price=120.0).price == 120.0
    high = optimise(broken, floor=50.0, ceiling=300.0, grid_size=9, fallback_price=1e6)
    assert (high.price, high.fallback, high.booking_prob, high.candidates) == (300.0, True, None, ())
    mid = optimise(broken, floor=50.0, ceiling=200.0, grid_size=9)
    assert mid.price == pytest.approx(100.0)


def test_risk_aversion_moves_away_from_disagreement() -> None:
    def members(prices: np.ndarray) -> np.ndarray:
        base = 1.0 / (1.0 + np.exp(-(2 * math.log(200.0) - 2 * np.log(prices))))
        spread = np.clip((prices - 100.0) / 400.0, 0.0, None)  # members disagree more at high prices
        return np.stack([base - spread * base, base + spread * (1 - base)], axis=1)

    neutral = optimise(members, floor=50.0, ceiling=500.0, grid_size=41)
    averse = optimise(members, floor=50.0, ceiling=500.0, grid_size=41, risk_aversion=1.0)
    assert averse.price < neutral.price and averse.uncertainty < neutral.uncertainty
    assert neutral.uncertainty > 0


def test_extra_std_adds_in_quadrature() -> None:
    flat = optimise(
        lambda p: np.full((len(p), 2), [0.2, 0.4]),
        floor=50.0,
        ceiling=60.0,
        grid_size=3,
        extra_std=lambda p: 0.1 + 0 * p,
    )
    assert flat.uncertainty == pytest.approx(math.sqrt(0.1**2 + 0.1**2))


def test_bounds_are_checked() -> None:
    with pytest.raises(QuoteError) as info:
        optimise(logistic(9.0, 2.0), floor=200.0, ceiling=100.0, grid_size=9)
    assert info.value.field == "ceiling"
    with pytest.raises(QuoteError):
        optimise(logistic(9.0, 2.0), floor=0.0, ceiling=100.0, grid_size=9)
    with pytest.raises(QuoteError):
        optimise(logistic(9.0, 2.0), floor=10.0, ceiling=math.inf, grid_size=9)
    single = optimise(logistic(9.0, 2.0), floor=80.0, ceiling=80.0, grid_size=9, refine_passes=1)
    assert single.price == 80.0


@settings(max_examples=100, deadline=None)
@given(
    floor=st.floats(1.0, 1000.0),
    width=st.floats(0.0, 5.0),
    values=st.lists(st.floats(-1.0, 2.0), min_size=41, max_size=41),
)
def test_price_always_finite_positive_and_inside_bounds(floor: float, width: float, values: list[float]) -> None:
    ceiling = floor * (1.0 + width)
    table = np.array(values)
    best = optimise(lambda p: table[: len(p), None], floor=floor, ceiling=ceiling, grid_size=41)
    assert math.isfinite(best.price) and floor <= best.price <= ceiling
    assert best.booking_prob is not None and 0.0 <= best.booking_prob <= 1.0


def test_smoothing_averages_demand_over_neighbouring_prices() -> None:
    calls: list[int] = []

    def demand(prices: np.ndarray) -> np.ndarray:
        calls.append(len(prices))
        return np.column_stack([20.0 / prices, 30.0 / prices])  # two members

    best = optimise(demand, floor=50.0, ceiling=200.0, grid_size=5, smoothing=0.1)
    factor = np.mean(1.0 / np.array([0.9, 1.0, 1.1]))
    assert calls == [15]  # one call, three prices per candidate
    assert [round(p, 6) for _, p in best.candidates] == [round(25.0 / q * factor, 6) for q, _ in best.candidates]
    assert best.uncertainty == pytest.approx(5.0 / best.price * factor)  # member spread of the smoothed demand
    with pytest.raises(QuoteError, match="smoothing"):
        optimise(demand, floor=50.0, ceiling=200.0, grid_size=5, smoothing=1.0)
