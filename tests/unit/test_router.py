from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from routing.calibration import DEFAULT_THRESHOLDS, route_many, thresholds_for_shares, tier_shares
from routing.curve import TierCosts, best_point, cost_revenue_curve, plot_curve
from routing.errors import CalibrationError, RoutingInputError
from routing.router import Thresholds, TieredRouter, TierShares

TARGET = TierShares(rules=0.35, light=0.5, heavy=0.15)


def _sample() -> np.ndarray:
    # a skewed, realistic-looking score distribution
    return np.random.default_rng(42).beta(2.0, 5.0, size=100_000)


def test_route_uses_strict_cut_offs() -> None:
    router = TieredRouter(Thresholds(rules_below=0.2, heavy_above=0.6))
    assert [router.route(s) for s in (0.1, 0.2, 0.6, 0.61, float("nan"))] == [
        "rules",
        "light",
        "light",
        "heavy",
        "heavy",
    ]


def test_calibration_gives_target_shares_within_one_percent() -> None:
    scores = _sample()
    router = TieredRouter(window=len(scores))
    for s in scores:
        router.learn_one(float(s))
    th = router.calibrate(TARGET)
    assert router.thresholds == th
    tiers = np.array([router.route(float(s)) for s in scores])
    for tier, target in TARGET.model_dump().items():
        assert abs(float(np.mean(tiers == tier)) - target) <= 0.01, tier


def test_ring_buffer_keeps_only_the_recent_window() -> None:
    router = TieredRouter(window=1_000, min_samples=1_000)
    for _ in range(5_000):
        router.learn_one(0.9)
    for s in np.linspace(0.0, 0.5, 1_000):
        router.learn_one(float(s))
    recent = router.recent_scores()
    assert recent.size == 1_000 and router.n_seen == 6_000
    assert recent.max() == pytest.approx(0.5) and recent[0] == 0.0
    th = router.calibrate(TierShares(rules=0.5, light=0.4, heavy=0.1))
    assert th.heavy_above == pytest.approx(0.45, abs=0.001)


def test_calibrate_refuses_too_few_scores_and_keeps_thresholds() -> None:
    router = TieredRouter(min_samples=100)
    for s in range(10):
        router.learn_one(s / 10)
    with pytest.raises(CalibrationError, match="at least 100"):
        router.calibrate()
    assert router.thresholds == DEFAULT_THRESHOLDS


def test_learn_one_is_safe_across_threads() -> None:
    router = TieredRouter(window=100_000)

    def feed() -> None:
        for i in range(5_000):
            router.learn_one(i / 5_000)

    threads = [threading.Thread(target=feed) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert router.n_seen == 20_000
    assert router.recent_scores().size == 20_000


def test_shares_and_thresholds_validation() -> None:
    with pytest.raises(ValueError, match="rules_below"):
        Thresholds(rules_below=0.7, heavy_above=0.2)
    with pytest.raises(ValueError, match="summing to 1"):
        TierShares(rules=0.5, light=0.5, heavy=0.5)
    with pytest.raises(RoutingInputError, match="window"):
        TieredRouter(window=0)


def test_vectorised_routing_matches_scalar() -> None:
    scores = _sample()[:2_000]
    th = thresholds_for_shares(scores, TARGET)
    router = TieredRouter(th)
    assert list(route_many(scores, th)) == [router.route(float(s)) for s in scores]
    assert sum(tier_shares(scores, th).values()) == pytest.approx(1.0)


def test_cost_curve_end_points_and_best_point(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    scores = rng.uniform(size=2_000)
    heavy = np.full(2_000, 100.0)
    light = heavy - np.where(scores > 0.9, 20.0, 0.0)
    rules = heavy - np.where(scores > 0.5, 5.0, 0.0)  # rules only fail on harder requests
    points = cost_revenue_curve(
        scores,
        {"rules": rules, "light": light, "heavy": heavy},
        costs=TierCosts(rules=0.0, light=1.0, heavy=10.0),
        rules_share=0.2,
        steps=11,
    )
    first, last = points[0], points[-1]
    assert last.heavy_share == 1.0 and last.compute_saved == 0.0 and last.revenue_lost == 0.0
    # 0% heavy: 20% rules (cost 0) + 80% light (cost 1) vs 10 per request
    assert first.compute_saved == pytest.approx(1 - 0.8 / 10)
    expected_loss = (np.sum(scores > 0.9) * 20.0) / (2_000 * 100.0)
    assert first.revenue_lost == pytest.approx(expected_loss)
    best = best_point(points, max_revenue_loss=0.001)
    assert best.heavy_share == pytest.approx(0.1)
    png = plot_curve(points, tmp_path / "curve.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
