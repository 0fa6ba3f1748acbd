"""Cold start in the served scorer: stage two explored with logged propensities (``delivery.cold_start``)."""

from __future__ import annotations

from datetime import timedelta

from delivery.cold_start import MemoryHistoryStore
from pricing.feature_source import MemoryFeatureSource
from tests.unit.test_cold_start import NOW, _request, _staged


def test_the_served_scorer_explores_a_new_hotel_in_stage_two_only_with_its_propensity_logged(
    tmp_path: object,
) -> None:
    from pricestream.app import transfer_exploration
    from pricestream.settings import Settings
    from pricing.exploration import ExplorationConfig

    source, store = MemoryFeatureSource(), MemoryHistoryStore()
    stay = NOW.date() + timedelta(days=30)
    source.put("h-old", "std", stay, {"searches_7d": 40.0, "views_7d": 12.0})
    source.put("h-new", "std", stay, {"searches_7d": 10.0})
    plain = _staged(tmp_path, source, MemoryHistoryStore())
    staged = _staged(tmp_path, source, store)
    staged.explore_transfer = ExplorationConfig(band=0.10, arms=5)
    assert staged.price(_request(NOW)).propensity == 1.0  # stage one: rules, not explored
    at = NOW + timedelta(days=2)
    plain.price(_request(NOW))
    ratios, propensities = set(), set()
    for _ in range(40):
        request = _request(at, days_out=28)
        shown, chosen = staged.price(request), plain.price(request)
        assert shown.rule_ids[-1] == chosen.rule_ids[-1] == "cold_start:transfer"
        ratios.add(round(shown.price / chosen.price, 4))
        propensities.add(shown.propensity)
    assert propensities == {0.2}  # one of five arms, none clipped by the rules' band here
    assert ratios == {0.9091, 0.9535, 1.0, 1.0488, 1.1}  # the five geometric steps within +-10%
    old = _request(at, days_out=28).model_copy(update={"hotel_id": "h-old"})
    assert staged.price(old).rule_ids[-1] == "cold_start:own"  # traded before: mature, not explored
    assert staged.price(old).propensity == 1.0 and staged.price(old).price == plain.price(old).price
    batch = staged.price_batch([old, _request(at, days_out=28)])
    assert [(d.rule_ids[-1], d.propensity) for d in batch] == [("cold_start:own", 1.0), ("cold_start:transfer", 0.2)]
    assert transfer_exploration(Settings()) == ExplorationConfig(band=0.10, arms=5, seed=Settings().seed)
    assert transfer_exploration(Settings(cold_start_explore_band=0.0)) is None


def test_the_served_rules_stage_prices_a_scarce_night_no_lower_than_its_bid_price(tmp_path: object) -> None:
    from pricestream.commands.cold_start import cold_start_config
    from pricestream.settings import Settings
    from pricing.cold_start import BID_FLOOR_RULE
    from tests.unit.test_cold_start_bid_floor import PLENTIFUL, SCARCE

    source = MemoryFeatureSource()
    scarce, plentiful = NOW.date() + timedelta(days=10), NOW.date() + timedelta(days=11)
    source.put("h-new", "std", scarce, SCARCE)
    source.put("h-new", "std", plentiful, PLENTIFUL)
    staged = _staged(tmp_path, source, MemoryHistoryStore())
    first = staged.price(_request(NOW, days_out=40))  # its first request: no behaviour in the store, a new hotel
    assert first.rule_ids[-1] == "cold_start:rules" and BID_FLOOR_RULE not in first.rule_ids
    floored = staged.price(_request(NOW, days_out=10))  # the same day: still stage one, its views since counted
    assert floored.tier == "rules" and floored.rule_ids[-2:] == (BID_FLOOR_RULE, "cold_start:rules")
    assert floored.bid_price is not None and floored.bid_price > 150.0 and floored.price == floored.bid_price
    assert not floored.degraded and floored.forecast_views is not None
    plain = staged.price(_request(NOW, days_out=11))  # rooms to spare: the rules' base rate stands
    assert plain.price == 150.0 and BID_FLOOR_RULE not in plain.rule_ids and plain.bid_price is not None
    staged.cold_start = staged.cold_start.model_copy(update={"rules_bid_floor": False})
    assert staged.price(_request(NOW, days_out=10)).price == 150.0
    assert cold_start_config(Settings()).rules_bid_floor
    assert not cold_start_config(Settings(cold_start_rules_bid_floor=False)).rules_bid_floor
