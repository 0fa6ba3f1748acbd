"""Stage one's floor at the bid price: the rules price a new hotel, but not below what its last rooms are worth.

The pooled light pricer gives the bid price (the opportunity cost of a room of the night, from the stream's
demand forecast); on a scarce night it is above the rules' base rate and the price is raised to it, on a
plentiful one it is zero and the rules price stands. Either way the decision records the bid; the rule id
``cold_start_bid_floor`` only when the floor binds.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from events.models import PricingRequest
from pricing.cold_start import BID_FLOOR_RULE, ColdStartConfig, ColdStartScorer, bid_floored
from pricing.feature_source import MemoryFeatureSource
from pricing.models import DemandModelConfig
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from pricing.tiers import load_pricer
from pricing.training import train_bundle
from routing.router import TieredRouter
from tests.unit._light_frame import light_frame

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)
STAY = NOW.date() + timedelta(days=10)
RULES = "min_price: 60\nmax_price: 500\ndefault_base_rate: 150\n"
SCARCE = {"searches_7d": 80.0, "views_7d": 80.0, "rooms_left": 1.0, "occupancy": 0.98}
"""Eighty shoppers a week for the night, ten days out, one room left: the room is worth more than the base rate."""
PLENTIFUL = {"searches_7d": 2.0, "views_7d": 2.0, "rooms_left": 150.0, "occupancy": 0.1}


def _cold(tmp_path: object, *, rules_yaml: str = RULES, floor: bool = True) -> ColdStartScorer:
    source = MemoryFeatureSource()
    source.put("h-new", "std", STAY, SCARCE)
    source.put("h-new", "std", STAY + timedelta(days=1), PLENTIFUL)
    trees = DemandModelConfig(num_trees=30)
    bundle = train_bundle(light_frame(), f"{tmp_path}/pooled", tier="light", config=trees).path
    rules = RuleSet.from_yaml(rules_yaml)

    def scorer(light: object) -> Scorer:
        return Scorer(ScorerConfig(stale_after_s=None), rules=rules, feature_source=source, light=light,  # type: ignore[arg-type]
                      heavy=None, router=TieredRouter())

    return ColdStartScorer(ColdStartConfig(rules_bid_floor=floor), rules=scorer(None),
                           pooled=scorer(load_pricer(bundle)))


def _request(stay: object = STAY) -> PricingRequest:
    return PricingRequest(hotel_id="h-new", room_type="std", stay_date=stay, event_time=NOW)  # type: ignore[arg-type]


def test_the_floor_binds_on_a_scarce_night_and_the_decision_records_the_bid_and_the_rule(tmp_path: object) -> None:
    cold = _cold(tmp_path)
    decision = cold.price(_request())
    assert decision.tier == "rules" and decision.rule_ids[-1] == "cold_start:rules"
    assert BID_FLOOR_RULE in decision.rule_ids
    assert decision.bid_price is not None and decision.bid_price > 150.0  # above the base rate
    assert decision.price == round(decision.bid_price, 2)  # raised to the bid (in cents), not to a model's price
    assert decision.forecast_views is not None and decision.forecast_views > 80.0  # a week's shoppers, scaled up


def test_the_floor_does_not_bind_on_a_plentiful_night(tmp_path: object) -> None:
    decision = _cold(tmp_path).price(_request(STAY + timedelta(days=1)))
    assert decision.tier == "rules" and BID_FLOOR_RULE not in decision.rule_ids
    assert abs(decision.price - 150.0) < 1e-6  # the rules' base rate
    assert decision.bid_price == 0.0  # recorded: the rooms are worth nothing beyond what the shoppers pay


def test_the_rules_ceiling_holds_over_the_bid(tmp_path: object) -> None:
    decision = _cold(tmp_path, rules_yaml=RULES.replace("max_price: 500", "max_price: 170")).price(_request())
    assert BID_FLOOR_RULE in decision.rule_ids and decision.bid_price is not None and decision.bid_price >= 170.0
    assert abs(decision.price - 170.0) < 1e-6  # the bid is searched on the rules band: at most its ceiling


def test_off_the_rules_price_stands_on_a_scarce_night(tmp_path: object) -> None:
    decision = _cold(tmp_path, floor=False).price(_request())
    assert abs(decision.price - 150.0) < 1e-6 and BID_FLOOR_RULE not in decision.rule_ids
    assert decision.bid_price is None


def test_without_a_pricer_or_with_no_forecast_the_decision_is_unchanged(tmp_path: object) -> None:
    cold = _cold(tmp_path)
    decision, _ = cold.rules.price_traced(_request())
    assert bid_floored(decision, _request(), pricer=None, rules=cold.rules.rules) == decision
    bare = _request(STAY + timedelta(days=5))  # a night with no features: no forecast, no bid
    decision, _ = cold.rules.price_traced(bare)
    assert cold.pooled is not None
    assert bid_floored(decision, bare, pricer=cold.pooled.light, rules=cold.rules.rules) == decision
