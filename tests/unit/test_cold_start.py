"""Cold start: a hotel the stream has never seen gets a valid price from its first request, tier and reason recorded.

The router scores a request with no features as complex (missing features, cold start), so with no heavy
model it goes to the light tier, inside the rules' floor and ceiling; it is not sent to the rules tier.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd

from events.models import PricingRequest
from pricing.feature_source import MemoryFeatureSource
from pricing.models import DemandModelConfig
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from pricing.tiers import load_pricer
from pricing.training import train_bundle
from pricing.vectorize import LIGHT_COLUMNS
from routing.router import TieredRouter

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)
RULES = "min_price: 60\nmax_price: 500\ndefault_base_rate: 150\n"


def test_a_new_hotel_gets_a_valid_price_with_tier_and_reason(tmp_path: object) -> None:
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(rng.uniform(0, 1, size=(1500, len(LIGHT_COLUMNS))), columns=list(LIGHT_COLUMNS))
    frame["price"] = np.exp(rng.uniform(math.log(60.0), math.log(500.0), 1500))
    frame["base_rate"] = 150.0
    frame["booked"] = (rng.random(1500) < 1 / (1 + (frame["price"] / 170.0) ** 2.5)).astype(int)
    bundle = train_bundle(frame, str(tmp_path), tier="light", config=DemandModelConfig(num_trees=30)).path
    scorer = Scorer(ScorerConfig(stale_after_s=None), rules=RuleSet.from_yaml(RULES),
                    feature_source=MemoryFeatureSource(), light=load_pricer(bundle), heavy=None,
                    router=TieredRouter())
    req = PricingRequest(hotel_id="h-new", room_type="std", stay_date=NOW.date() + timedelta(days=30), event_time=NOW)
    decision = scorer.price(req)
    assert 60.0 <= decision.price <= 500.0 and math.isfinite(decision.price)
    assert decision.tier == "light" and decision.model_name == "demand-light"
    assert decision.complexity > 0.45  # the reason it left the rules tier: the cold-start score
    assert decision.bid_price is None and decision.forecast_views is None  # no forecast without features
    assert not decision.degraded and decision.degraded_reason is None


def test_stage_one_a_hotel_with_no_model_yet_gets_the_rules_price_with_the_rules_that_set_it() -> None:
    """Cold start, stage one: no model covers the new hotel, so the rules tier prices it from its base rate."""
    rules = RuleSet.from_yaml(
        RULES + "base_rates:\n  - {hotel: h-new, room_type: std, rate: 180}\n"
        "lead_time_ladder:\n  - {lead_time_at_most_days: 7, factor: 1.1}\n"
    )
    scorer = Scorer(ScorerConfig(stale_after_s=None), rules=rules, feature_source=MemoryFeatureSource(),
                    light=None, heavy=None, router=TieredRouter())
    req = PricingRequest(hotel_id="h-new", room_type="std", stay_date=NOW.date() + timedelta(days=3), event_time=NOW)
    decision = scorer.price(req)
    assert decision.tier == "rules" and decision.model_name is None
    assert abs(decision.price - 198.0) < 1e-6  # its base rate 180 x the lead-time ladder's 1.1
    assert "lead_time_ladder" in decision.rule_ids  # the reason, recorded on the decision
    assert decision.complexity > 0.10  # cold: above the rules cut-off, a model tier would have priced it
