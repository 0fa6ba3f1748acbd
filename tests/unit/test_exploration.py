"""Exploration: shown prices stay in the band and the bounds, the logged propensity is the true draw probability."""

from __future__ import annotations

import math
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from events.models import PricingRequest
from pricing.exploration import ExplorationConfig, explore
from pricing.feature_source import MemoryFeatureSource
from pricing.models import DemandModelConfig
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from pricing.tiers import load_pricer
from pricing.training import train_bundle
from pricing.vectorize import LIGHT_COLUMNS
from routing.calibration import Thresholds
from routing.router import TieredRouter

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)


def test_shown_prices_are_uniform_over_the_arms_and_propensities_match_frequencies() -> None:
    cfg = ExplorationConfig(band=0.08, arms=5, seed=3)
    draws = [explore(200.0, floor=100.0, ceiling=400.0, key=uuid.UUID(int=i), config=cfg) for i in range(10_000)]
    counts = Counter(round(p, 6) for p, _ in draws)
    assert len(counts) == 5 and all(abs(c / 10_000 - 0.2) < 0.02 for c in counts.values())
    assert all(q == 0.2 for _, q in draws)
    assert min(counts) == pytest.approx(200.0 / 1.08) and max(counts) == pytest.approx(216.0)


def test_clipped_arms_merge_and_their_propensity_is_the_merged_share() -> None:
    cfg = ExplorationConfig(band=0.2, arms=5)
    draws = {explore(100.0, floor=95.0, ceiling=300.0, key=uuid.UUID(int=i), config=cfg) for i in range(2_000)}
    by_price = dict(draws)
    assert by_price[95.0] == 0.4 and sum(by_price.values()) == pytest.approx(1.0)
    assert explore(100.0, floor=50.0, ceiling=300.0, key=uuid.UUID(int=1), config=ExplorationConfig(band=0.0)) == (
        100.0,
        1.0,
    )


def test_the_draw_is_fixed_by_request_and_seed() -> None:
    key = uuid.UUID(int=12345)
    one = [explore(100.0, floor=1.0, ceiling=1e4, key=key, config=ExplorationConfig(seed=s)) for s in range(20)]
    assert one == [explore(100.0, floor=1.0, ceiling=1e4, key=key, config=ExplorationConfig(seed=s)) for s in range(20)]
    assert len({p for p, _ in one}) > 1  # the seed moves the draw


def test_a_real_pricer_logs_the_propensity_on_the_decision(tmp_path_factory: pytest.TempPathFactory) -> None:
    rng = np.random.default_rng(5)
    frame = pd.DataFrame(rng.uniform(0, 1, size=(1500, len(LIGHT_COLUMNS))), columns=list(LIGHT_COLUMNS))
    frame["price"] = np.exp(rng.uniform(math.log(60.0), math.log(500.0), 1500))
    frame["booked"] = (rng.random(1500) < 1 / (1 + (frame["price"] / 170.0) ** 2.5)).astype(int)
    frame["base_rate"] = 150.0  # the rules' base rate below: the pooled price response is relative to it
    bundle = train_bundle(frame, tmp_path_factory.mktemp("light"), tier="light", config=DemandModelConfig()).path
    plain = load_pricer(bundle)
    band = ExplorationConfig(band=0.1, arms=3)
    scorer = Scorer(
        ScorerConfig(stale_after_s=None),
        rules=RuleSet.from_yaml("min_price: 60\nmax_price: 500\ndefault_base_rate: 150\n"),
        feature_source=MemoryFeatureSource(),
        light=load_pricer(bundle, exploration=band),
        heavy=None,
        router=TieredRouter(thresholds=Thresholds(rules_below=0.0, heavy_above=1.0)),
    )
    shown = []
    for i in range(60):
        req = PricingRequest(hotel_id="h1", room_type="std", stay_date=NOW.date() + timedelta(days=20), event_time=NOW,
                             request_id=uuid.UUID(int=i))
        decision = scorer.price(req)
        base = plain.quote(req, decision.features, floor=60.0, ceiling=500.0).price
        assert decision.tier == "light" and decision.propensity == pytest.approx(1 / 3)
        assert base / 1.1 - 1e-6 <= decision.price <= base * 1.1 + 1e-6
        shown.append(round(decision.price / base, 3))
    assert set(shown) == {round(1 / 1.1, 3), 1.0, 1.1}
