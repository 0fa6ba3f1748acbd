"""ML01 input sanitisation in the scorer: impossible or out-of-distribution requests are priced by the rules.

A real light bundle (trained on the seeded synthetic demand) supplies the training envelope;
the scorer runs its input guard before the model quotes.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from events.models import PricingRequest
from market.synthetic import training_frame
from pricing.feature_source import MemoryFeatureSource
from pricing.input_guard import InputGuardConfig, widened
from pricing.models import DemandModelConfig
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from pricing.tiers import LightPricer, load_pricer
from pricing.training import train_bundle
from routing.router import Thresholds, TieredRouter

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
STAY = date(2026, 12, 20)
ALWAYS_LIGHT = Thresholds(rules_below=0.0, heavy_above=1.0)


@pytest.fixture(scope="module")
def light(tmp_path_factory: pytest.TempPathFactory) -> LightPricer:
    bundle = train_bundle(training_frame(800, seed=0), tmp_path_factory.mktemp("guard") / "light", tier="light",
                          config=DemandModelConfig(num_trees=10))
    pricer = load_pricer(bundle.path)
    assert isinstance(pricer, LightPricer)
    return pricer


def _inside(pricer: LightPricer) -> dict[str, float | None]:
    """Every enveloped feature at the middle of its training range (capacity above rooms_left)."""
    envelope = pricer.meta["envelope"]
    mid = {name: (lo + hi) / 2 for name, (lo, hi) in envelope.items() if lo is not None and hi is not None}
    return mid | {"capacity": 2 * mid["rooms_left"] + 1}


def _scorer(pricer: LightPricer, features: dict[str, float | None], guard: InputGuardConfig | None) -> Scorer:
    source = MemoryFeatureSource()
    source.put("h1", "std", STAY, features, version=1, event_time=T0)
    rules = RuleSet.from_yaml("min_price: 40\nmax_price: 600\ndefault_base_rate: 150\n")
    return Scorer(ScorerConfig(input_guard=guard), rules=rules, feature_source=source, light=pricer, heavy=None,
                  router=TieredRouter(ALWAYS_LIGHT))


def _request() -> PricingRequest:
    return PricingRequest(hotel_id="h1", room_type="std", stay_date=STAY, event_time=T0)


def test_an_in_distribution_request_is_priced_by_the_model(light: LightPricer) -> None:
    decision = _scorer(light, _inside(light), InputGuardConfig()).price(_request())
    assert (decision.tier, decision.degraded, decision.degraded_reason) == ("light", False, None)


def test_an_out_of_distribution_request_is_priced_by_the_rules_with_the_reason_and_counted(
    light: LightPricer,
) -> None:
    lo, hi = widened(light.meta["trained_range"], 0.5)["rooms_left"]
    features = _inside(light) | {"rooms_left": hi + 10, "capacity": hi + 100}
    scorer = _scorer(light, features, InputGuardConfig(margin=0.5))
    decision = scorer.price(_request())
    assert (decision.tier, decision.degraded) == ("rules", True)
    assert decision.degraded_reason is not None
    assert decision.degraded_reason.startswith(f"ood_input: rooms_left={hi + 10:g} outside")
    assert scorer.stats.value("pricestream_degraded_decisions_total", reason="ood_input") == 1.0
    unguarded = _scorer(light, features, None).price(_request())
    assert unguarded.tier == "light"  # the same request reaches the model when the guard is off


@pytest.mark.parametrize(("change", "reason"), [
    ({"rooms_left": 30.0, "capacity": 10.0}, "rooms_left=30 is above capacity=10"),
    ({"bookings_24h": -1.0}, "bookings_24h=-1.0 is negative"),
    ({"occupancy": 1.5}, "occupancy=1.5, expected a share in [0, 1]"),
])
def test_an_impossible_combination_is_priced_by_the_rules(
    light: LightPricer, change: dict[str, float], reason: str
) -> None:
    scorer = _scorer(light, _inside(light) | change, InputGuardConfig())
    decision = scorer.price(_request())
    assert decision.tier == "rules"
    assert decision.degraded_reason is not None and decision.degraded_reason.startswith(f"impossible_input: {reason}")
    assert scorer.stats.value("pricestream_degraded_decisions_total", reason="impossible_input") == 1.0


def test_a_stay_before_the_request_is_impossible() -> None:
    from pricing.input_guard import impossible

    late = PricingRequest.model_construct(hotel_id="h1", room_type="std", stay_date=date(2026, 11, 1),
                                          event_time=T0, nights=1, channel="web")
    assert impossible(late, {}) == "stay_date=2026-11-01 is 29 days before the request, expected on or after it"


def test_a_value_the_model_was_trained_on_is_not_flagged_even_beyond_its_99th_percentile(light: LightPricer) -> None:
    top = light.meta["envelope"]["rooms_left"][1]
    most = light.meta["trained_range"]["rooms_left"][1]
    assert most > top  # the 1st-99th percentile leaves the last percent of the training rows out
    features = _inside(light) | {"rooms_left": (top + most) / 2, "capacity": most + 100}
    decision = _scorer(light, features, InputGuardConfig(margin=0.0)).price(_request())
    assert (decision.tier, decision.degraded) == ("light", False)
    beyond = _inside(light) | {"rooms_left": most + 1, "capacity": most + 100}
    flagged = _scorer(light, beyond, InputGuardConfig(margin=0.0)).price(_request())
    assert flagged.tier == "rules" and flagged.degraded_reason is not None
    assert flagged.degraded_reason.startswith("ood_input: rooms_left=")
