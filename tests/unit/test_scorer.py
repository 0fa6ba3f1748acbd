"""Routed scorer: bounds always hold, rules that decide win, failures degrade to rules, routing fills every field."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit.log import AuditLog
from audit.verify import verify
from events.catalog import ALL_FEATURES
from events.models import CHANNELS, PricingDecision, PricingRequest
from feedback.registry import ModelRegistry
from market.synthetic import training_frame
from pricing.degraded import sanitize_features
from pricing.errors import FeatureStoreUnavailable
from pricing.feature_source import FeatureRead, MemoryFeatureSource
from pricing.models import DemandModelConfig
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from pricing.tiers import HeavyPricer, LightPricer, Quote, load_pricer
from pricing.training import train_bundle
from routing.router import Thresholds, TieredRouter

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
STAY = date(2026, 12, 20)
RULES_YAML = """
min_price: 40
max_price: 600
default_base_rate: 150
occupancy_ladder:
  - {occupancy_at_least: 0.0, factor: 0.9}
  - {occupancy_at_least: 0.8, factor: 1.2}
rules:
  - {id: floor-all, kind: floor, price: 50}
  - {id: ceil-all, kind: ceiling, price: 500}
  - {id: closed-nye, kind: closed_dates, ranges: [{start: 2026-12-31, end: 2026-12-31}]}
  - {id: last-room, kind: last_rooms, rooms_left_at_most: 1, action: ceiling}
  - {id: max-change, kind: max_change, max_pct: 0.3}
"""
FRESH = {name: 3.0 for name in ALL_FEATURES} | {"occupancy": 0.6, "rooms_left": 20.0, "capacity": 50.0}
ALWAYS_LIGHT = Thresholds(rules_below=0.0, heavy_above=1.0)
ALWAYS_HEAVY = Thresholds(rules_below=0.0, heavy_above=0.0)
ALWAYS_RULES = Thresholds(rules_below=1.0, heavy_above=1.0)


@pytest.fixture(scope="session")
def pricers(tmp_path_factory: pytest.TempPathFactory) -> tuple[LightPricer | HeavyPricer, LightPricer | HeavyPricer]:
    """A tiny light and heavy model trained once on the seeded synthetic demand."""
    frame = training_frame(800, seed=0)
    root = tmp_path_factory.mktemp("bundles")
    light = train_bundle(frame, root / "light", tier="light", config=DemandModelConfig(num_trees=15))
    heavy = train_bundle(
        frame, root / "heavy", tier="heavy", config=DemandModelConfig(n_members=3, num_trees=15, bootstrap=True)
    )
    return load_pricer(light.path), load_pricer(heavy.path)


@dataclass
class FixedPricer:
    """A TierPricer that quotes a fixed price (or raises) and counts its calls."""

    name: str
    version: str = "1"
    price: float = 123.0
    uncertainty: float = 0.0
    error: Exception | None = None
    calls: int = 0

    def quote(self, request: PricingRequest, features: Mapping[str, float | None], **bounds: Any) -> Quote:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return Quote(self.price, self.price * 0.4, 0.4, self.uncertainty, ((self.price, 0.4),), self.name, self.version)


class DownSource:
    """A FeatureSource whose store is down."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def read(self, hotel_id: str, room_type: str, stay_date: date) -> FeatureRead:
        raise self.error


class CountingSource(MemoryFeatureSource):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def read_many(self, keys: Sequence[tuple[str, str, date]]) -> list[FeatureRead]:
        self.batches.append(len(keys))
        return super().read_many(keys)


def _request(stay: date = STAY, **kwargs: Any) -> PricingRequest:
    return PricingRequest(hotel_id="h1", room_type="std", stay_date=stay, event_time=T0, **kwargs)


def _source(features: Mapping[str, Any] = FRESH, *, stay: date = STAY, age_s: float = 30.0) -> MemoryFeatureSource:
    source = MemoryFeatureSource()
    source.put("h1", "std", stay, features, version=7, event_time=T0 - timedelta(seconds=age_s))
    return source


def _scorer(light: Any, heavy: Any, *, thresholds: Thresholds = ALWAYS_LIGHT, source: Any = None, **kw: Any) -> Scorer:
    config = kw.pop("config", ScorerConfig(snapshot_id="snap-3", stale_after_s=3600.0))
    return Scorer(
        config,
        rules=RuleSet.from_yaml(RULES_YAML),
        feature_source=source if source is not None else _source(),
        light=light,
        heavy=heavy,
        router=TieredRouter(thresholds),
        **kw,
    )


feature_values = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.just(1e300),
    st.integers(min_value=-10, max_value=10**7),
    st.floats(min_value=0.0, max_value=1.0),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    features=st.dictionaries(st.sampled_from(ALL_FEATURES), feature_values, max_size=len(ALL_FEATURES)),
    offset=st.integers(min_value=0, max_value=400),
    nights=st.integers(min_value=1, max_value=60),
    channel=st.sampled_from(CHANNELS),
    last=st.one_of(st.none(), st.floats(min_value=1.0, max_value=5000.0)),
    tiers=st.sampled_from([ALWAYS_LIGHT, ALWAYS_HEAVY, Thresholds(rules_below=0.2, heavy_above=0.5)]),
)
def test_every_price_is_finite_positive_and_inside_the_rules_bounds(
    pricers: tuple[Any, Any],
    features: dict[str, Any],
    offset: int,
    nights: int,
    channel: str,
    last: float | None,
    tiers: Thresholds,
) -> None:
    stay = date(2026, 12, 1) + timedelta(days=offset)
    request = _request(stay, nights=nights, channel=channel, last_published_price=last)
    scorer = _scorer(*pricers, thresholds=tiers, source=_source(features, stay=stay))
    decision = scorer.price(request)
    outcome = scorer.rules.evaluate(request, sanitize_features(features))
    assert math.isfinite(decision.price) and decision.price > 0
    assert outcome.floor <= decision.price <= outcome.ceiling
    assert 40.0 <= decision.price <= 600.0
    assert 0.0 <= decision.complexity <= 1.0
    if outcome.decided_price is not None:
        assert (decision.tier, decision.price) == ("rules", outcome.decided_price)


def test_rules_that_decide_outright_are_never_overridden() -> None:
    light, heavy = FixedPricer("light", price=77.0), FixedPricer("heavy", price=88.0)
    closed = date(2026, 12, 31)
    scorer = _scorer(light, heavy, thresholds=ALWAYS_HEAVY, source=_source(stay=closed))
    decision = scorer.price(_request(closed))
    assert (decision.tier, decision.price, decision.degraded) == ("rules", 500.0, False)
    assert "closed-nye" in decision.rule_ids
    last_room = _scorer(light, heavy, thresholds=ALWAYS_HEAVY, source=_source(FRESH | {"rooms_left": 1.0}))
    assert last_room.price(_request()).price == 500.0
    assert light.calls == heavy.calls == 0


def test_a_routed_decision_fills_every_field(pricers: tuple[Any, Any]) -> None:
    light, heavy = pricers
    decision = _scorer(light, heavy, thresholds=ALWAYS_HEAVY).price(_request())
    assert decision.tier == "heavy"
    assert (decision.model_name, decision.model_version) == (heavy.name, heavy.version)
    assert (decision.feature_version, decision.snapshot_id) == (7, "snap-3")
    assert decision.rule_ids[:2] == ("floor-all", "ceil-all")
    assert decision.expected_booking_prob is not None and 0.0 < decision.expected_booking_prob < 1.0
    assert set(decision.features) == {*ALL_FEATURES, "base_rate"} and decision.features["occupancy"] == 0.6
    assert decision.features["base_rate"] == 150.0  # the rules' base rate, a model input
    assert (decision.arm, decision.propensity, decision.degraded) == ("incumbent", 1.0, False)
    assert 0.0 < decision.complexity <= 1.0 and decision.latency_ms > 0.0
    light_decision = _scorer(light, heavy, thresholds=ALWAYS_LIGHT).price(_request())
    assert (light_decision.tier, light_decision.model_name) == ("light", light.name)


def test_rules_tier_answers_with_the_rules_price() -> None:
    light = FixedPricer("light")
    decision = _scorer(light, None, thresholds=ALWAYS_RULES).price(_request())
    assert (decision.tier, decision.price, decision.model_name) == ("rules", 135.0, None)  # 150 x 0.9 ladder
    assert light.calls == 0


def test_heavy_escalation_follows_light_uncertainty() -> None:
    """Same request, same thresholds: only the light model's uncertainty differs."""
    thresholds = Thresholds(rules_below=0.0, heavy_above=0.25)
    calm = _scorer(FixedPricer("light", uncertainty=0.0), FixedPricer("heavy", price=99.0), thresholds=thresholds)
    wild = _scorer(FixedPricer("light", uncertainty=1.0), FixedPricer("heavy", price=99.0), thresholds=thresholds)
    features = FRESH | {"searches_7d": 500.0}
    calm.feature_source = wild.feature_source = _source(features)
    calm_decision, wild_decision = calm.price(_request()), wild.price(_request())
    assert calm_decision.tier == "light" and wild_decision.tier == "heavy"
    assert wild_decision.price == 99.0 and wild_decision.complexity > calm_decision.complexity


@pytest.mark.parametrize(
    ("error", "code"),
    [(FeatureStoreUnavailable("redis: connection refused"), "feature_store_unavailable"),
     (ConnectionError("reset by peer"), "feature_source_error")],
)
def test_feature_store_failure_degrades_to_rules(error: Exception, code: str) -> None:
    light = FixedPricer("light")
    scorer = _scorer(light, None, source=DownSource(error))
    decision = scorer.price(_request())
    assert (decision.tier, decision.price, decision.degraded) == ("rules", 150.0, True)  # no occupancy: no ladder
    assert decision.degraded_reason is not None and decision.degraded_reason.startswith(code)
    assert light.calls == 0
    assert scorer.stats.value("pricestream_degraded_decisions_total", reason=code) == 1.0


def test_model_failures_fall_back_a_tier() -> None:
    broken_light = _scorer(FixedPricer("light", error=RuntimeError("onnx says no")), None).price(_request())
    assert (broken_light.tier, broken_light.price, broken_light.degraded) == ("rules", 135.0, True)
    assert broken_light.degraded_reason == "light_model_error: RuntimeError: onnx says no"
    nan_light = _scorer(FixedPricer("light", price=float("nan")), None).price(_request())
    assert nan_light.tier == "rules" and (nan_light.degraded_reason or "").startswith("light_bad_quote")
    heavy_down = _scorer(FixedPricer("light", price=140.0), FixedPricer("heavy", error=MemoryError()),
                         thresholds=ALWAYS_HEAVY).price(_request())
    assert (heavy_down.tier, heavy_down.price) == ("light", 140.0)
    assert (heavy_down.degraded_reason or "").startswith("heavy_model_error")


def test_quotes_outside_the_bounds_are_clamped() -> None:
    decision = _scorer(FixedPricer("light", price=10_000.0), None).price(_request())
    assert (decision.tier, decision.price) == ("light", 500.0)


def test_spent_deadline_and_stale_features_give_rules_only() -> None:
    light = FixedPricer("light")
    late = _scorer(light, None).price(_request(), deadline_ms=0.0)
    assert (late.tier, late.degraded, (late.degraded_reason or "").split(":")[0]) == ("rules", True, "deadline")
    stale = _scorer(light, None, source=_source(age_s=7200.0)).price(_request())
    assert (stale.degraded_reason or "").startswith("stale_features: features are 7200s old")
    assert light.calls == 0


def test_batch_reads_once_and_matches_single_decisions(pricers: tuple[Any, Any]) -> None:
    source = CountingSource()
    stays = [STAY + timedelta(days=i) for i in range(5)]
    for i, stay in enumerate(stays):
        source.put("h1", "std", stay, FRESH | {"occupancy": 0.1 * i}, version=7, event_time=T0)
    scorer = _scorer(*pricers, source=source)
    requests = [_request(stay) for stay in stays]
    batch = scorer.price_batch(requests)
    assert source.batches == [5]
    assert [d.price for d in batch] == [scorer.price(r).price for r in requests]
    assert [d.request_id for d in batch] == [r.request_id for r in requests]


def test_swap_and_registry_reload(tmp_path: Path, pricers: tuple[Any, Any]) -> None:
    light, heavy = pricers
    scorer = _scorer(FixedPricer("old", version="0"), None)
    assert scorer.price(_request()).model_name == "old"
    scorer.swap_models(light=FixedPricer("newer", version="9"))
    assert scorer.price(_request()).model_name == "newer"

    registry = ModelRegistry(tmp_path / "registry")
    registry.promote(registry.register(light.path, tier="light"))
    assert scorer.reload_from(registry) is True
    assert (scorer.light.version, scorer.heavy) == (light.version, None)
    assert scorer.price(_request()).model_version == light.version
    loaded_light = scorer.light
    assert scorer.reload_from(registry) is False  # same generation: nothing to do
    registry.promote(registry.register(heavy.path, tier="heavy"))
    assert scorer.reload_from(registry) is True
    assert scorer.heavy.version == heavy.version and scorer.light is loaded_light  # light unchanged: kept
    assert scorer.stats.value("pricestream_model_reloads_total", tier="light") == 2.0


def test_audit_callback_and_metrics(tmp_path: Path, pricers: tuple[Any, Any]) -> None:
    seen: list[PricingDecision] = []

    def boom(request: PricingRequest, decision: PricingDecision) -> None:
        seen.append(decision)
        msg = "kafka down"
        raise RuntimeError(msg)

    path = tmp_path / "audit.jsonl"
    with AuditLog(path) as audit:
        scorer = _scorer(*pricers, thresholds=ALWAYS_HEAVY, audit=audit, on_decision=boom)
        decisions = [scorer.price(_request()) for _ in range(3)]
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    assert verify(path).ok and len(entries) == 3 and len(seen) == 3
    assert [e["decision"]["price"] for e in entries] == [d.price for d in decisions]
    assert [m["name"] for m in entries[0]["models"]] == [pricers[0].name, pricers[1].name]
    assert len(entries[0]["candidates"]) > 10 and entries[0]["feature_versions"] == {"label": "features.v1",
                                                                                     "version": 7}
    assert scorer.stats.value("pricestream_decisions_total", tier="heavy") == 3.0
    assert scorer.stats.value("pricestream_scorer_side_errors_total", stage="on_decision") == 3.0


@pytest.mark.parametrize("decimals", [2, 0])
def test_prices_leave_rounded_to_the_currencys_minor_unit_with_the_models_value_kept(
    pricers: tuple[Any, Any], decimals: int
) -> None:
    config = ScorerConfig(snapshot_id="snap-3", stale_after_s=3600.0, price_decimals=decimals)
    scorer = _scorer(*pricers, config=config)
    decisions = [scorer.price(_request(nights=n, channel=c)) for n in (1, 2, 5) for c in CHANNELS]
    models = [d for d in decisions if d.tier != "rules"]
    assert models, "the light model priced none of the requests"
    for d in decisions:
        assert d.price == round(d.price, decimals)
        assert d.model_price is not None and abs(d.model_price - d.price) <= 0.5 * 10.0**-decimals + 1e-9
    assert any(d.model_price != d.price for d in models)  # the model's own value is kept beside the quote


def test_a_room_type_the_hotel_does_not_sell_is_priced_by_the_rules_saying_why(pricers: tuple[Any, Any]) -> None:
    config = ScorerConfig(snapshot_id="snap-3", stale_after_s=3600.0, room_types={"h1": ("std", "suite")},
                          hotel_decimals={"h1": 0})
    scorer = _scorer(*pricers, config=config)
    sold = scorer.price(_request())
    assert sold.tier != "rules" and not sold.degraded
    assert sold.price == round(sold.price)  # the hotel's currency has no minor unit
    odd = PricingRequest(hotel_id="h1", room_type="penthouse", stay_date=STAY, event_time=T0)
    unknown = scorer.price(odd)
    assert (unknown.tier, unknown.degraded) == ("rules", True)
    assert unknown.degraded_reason is not None and unknown.degraded_reason.startswith(
        "unknown_room_type: room_type 'penthouse' is not sold by hotel 'h1' (its room types: ['std', 'suite'])")
    other_hotel = scorer.price(PricingRequest(hotel_id="h2", room_type="penthouse", stay_date=STAY, event_time=T0))
    assert other_hotel.degraded_reason is None or "unknown_room_type" not in other_hotel.degraded_reason
