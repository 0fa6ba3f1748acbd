from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd
import pytest

from events.catalog import ALL_FEATURES
from events.models import PricingRequest
from routing.complexity import (
    COLD_START_MIN_SEEN,
    ComplexityInputs,
    ComplexityWeights,
    TrainingStats,
    complexity_score,
    inputs_from,
)
from routing.errors import RoutingInputError

T0 = datetime(2026, 5, 1, 12, tzinfo=UTC)
EASY = ComplexityInputs(
    features_missing_share=0.0,
    feature_age_s=1.0,
    cold_start=False,
    volatility=0.0,
    spike=False,
    light_uncertainty=0.0,
    ood_distance=0.0,
)
HARDER: dict[str, Any] = {
    "features_missing_share": 0.4,
    "feature_age_s": 3600.0,
    "cold_start": True,
    "volatility": 1.5,
    "spike": True,
    "light_uncertainty": 0.7,
    "ood_distance": 5.0,
}


def _request() -> PricingRequest:
    return PricingRequest(hotel_id="h1", room_type="std", stay_date=date(2026, 6, 1), event_time=T0)


def test_easy_request_scores_near_zero() -> None:
    assert complexity_score(EASY) == pytest.approx(0.10 * (1 - math.exp(-1 / 900)), abs=1e-9)


def test_all_hard_components_score_near_one() -> None:
    hardest = ComplexityInputs(
        features_missing_share=1.0,
        feature_age_s=None,
        cold_start=True,
        volatility=float("inf"),
        spike=True,
        light_uncertainty=1.0,
        ood_distance=float("nan"),
    )
    assert complexity_score(hardest) == 1.0


@pytest.mark.parametrize("field", sorted(HARDER))
def test_score_is_monotone_in_each_input(field: str) -> None:
    harder = replace(EASY, **{field: HARDER[field]})
    assert complexity_score(harder) > complexity_score(EASY)
    # and every field contributes its own weight when switched fully on
    assert 0.0 < complexity_score(harder) < 0.25


def test_weights_are_normalised() -> None:
    x = replace(EASY, cold_start=True)
    only_cold = ComplexityWeights(
        missing=0, staleness=0, cold_start=2.0, volatility=0, spike=0, light_uncertainty=0, ood=0
    )
    assert complexity_score(x, weights=only_cold) == 1.0


def test_bad_inputs_name_the_field() -> None:
    with pytest.raises(RoutingInputError, match="features_missing_share"):
        replace(EASY, features_missing_share=1.5)
    with pytest.raises(RoutingInputError, match="volatility"):
        replace(EASY, volatility=-0.1)
    with pytest.raises(RoutingInputError, match="weights.spike"):
        ComplexityWeights(spike=-1.0)


def test_training_stats_distance_is_rms_z() -> None:
    frame = pd.DataFrame({"occupancy": [0.4, 0.6], "rooms_left": [10.0, 30.0], "other": [1.0, 2.0]})
    stats = TrainingStats.from_frame(frame)
    assert set(stats.means) == {"occupancy", "rooms_left"}
    # z = (0.8-0.5)/0.1 = 3 and (20-20)/10 = 0 -> sqrt((9+0)/2)
    assert stats.distance({"occupancy": 0.8, "rooms_left": 20.0}) == pytest.approx(math.sqrt(4.5))
    assert stats.distance({"occupancy": None}) == 0.0


def test_inputs_from_derives_every_component() -> None:
    features: dict[str, float | None] = dict.fromkeys(ALL_FEATURES, 1.0)
    features.update({"booking_pace_7d": 0.25, "searches_1h": 2.0, "searches_24h": 240.0, "rooms_left": None})
    stats = TrainingStats(means={"occupancy": 0.0}, stds={"occupancy": 0.5})
    x = inputs_from(
        _request(),
        features,
        feature_time=T0 - timedelta(seconds=90),
        stats=stats,
        hotel_seen=COLD_START_MIN_SEEN,
        light_uncertainty=0.3,
    )
    assert x.features_missing_share == pytest.approx(1 / len(ALL_FEATURES))
    assert x.feature_age_s == 90.0
    assert x.cold_start is False
    assert x.volatility == pytest.approx(0.75)
    assert x.spike is False
    assert x.light_uncertainty == 0.3
    assert x.ood_distance == pytest.approx(2.0)


def test_inputs_from_without_features() -> None:
    x = inputs_from(_request(), {}, feature_time=None, hotel_seen=0)
    assert (x.features_missing_share, x.feature_age_s, x.cold_start) == (1.0, None, True)
    assert complexity_score(x) == pytest.approx(0.15 + 0.10 + 0.15)


def test_inputs_from_refuses_naive_now() -> None:
    with pytest.raises(RoutingInputError, match="now"):
        inputs_from(_request(), {}, feature_time=None, now=datetime(2026, 5, 1))  # noqa: DTZ001


def test_score_stays_in_unit_interval_on_random_inputs() -> None:
    rng = np.random.default_rng(7)
    for _ in range(500):
        x = ComplexityInputs(
            features_missing_share=float(rng.uniform()),
            feature_age_s=float(rng.exponential(600)),
            cold_start=bool(rng.integers(2)),
            volatility=float(rng.exponential(1)),
            spike=bool(rng.integers(2)),
            light_uncertainty=float(rng.uniform()),
            ood_distance=float(rng.exponential(2)),
        )
        assert 0.0 <= complexity_score(x) <= 1.0
