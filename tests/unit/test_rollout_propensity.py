"""The rollout layer's logged propensity is P(arm) x P(shown price | arm), and its decision time setting.

Pure: the arms are real :class:`pricing.scorer.Scorer` s over an in-memory feature source and a
pricer that explores with :func:`pricing.exploration.explore` (the draw the ONNX pricers make).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from delivery import DeliveryConfig, GateLimits, Stage
from delivery.rollout import RolloutScorer
from events.models import PricingDecision, PricingRequest
from pricing.exploration import ExplorationConfig, explore
from pricing.feature_source import MemoryFeatureSource
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from pricing.tiers import Quote
from routing.errors import RoutingInputError
from routing.router import Thresholds, TieredRouter

T0 = datetime(2026, 11, 30, 9, tzinfo=UTC)
RULES = "min_price: 10\nmax_price: 5000\ndefault_base_rate: 150\n"
ALWAYS_LIGHT = Thresholds(rules_below=0.0, heavy_above=1.0)
EXPLORE = ExplorationConfig(band=0.2, arms=5, seed=3)
LOOSE = GateLimits(max_flip_rate=1.0, max_ks=1.0, max_mean_shift=10.0, max_p99_latency_ms=60_000.0, min_samples=10)


@dataclasses.dataclass
class ExploringPricer:
    """Quotes ``base`` nudged by the exploration draw, with the draw's propensity (as LightPricer does)."""

    base: float
    version: str
    name: str = "demand-light"

    def quote(self, request: PricingRequest, features: Mapping[str, float | None], *, floor: float,
              ceiling: float, rule_price: float | None = None) -> Quote:
        price, propensity = explore(self.base, floor=floor, ceiling=ceiling, key=request.request_id, config=EXPLORE)
        return Quote(price, 0.0, None, 0.0, (), self.name, self.version, propensity=propensity)


def _scorer(base: float, version: str) -> Scorer:
    return Scorer(ScorerConfig(stale_after_s=None, deadline_ms=60_000.0), rules=RuleSet.from_yaml(RULES),
                  feature_source=MemoryFeatureSource(), light=ExploringPricer(base, version), heavy=None,
                  router=TieredRouter(thresholds=ALWAYS_LIGHT))


def _request(i: int) -> PricingRequest:
    return PricingRequest(hotel_id=f"h{i % 4}", room_type="std", stay_date=date(2026, 12, 10) + timedelta(days=i % 9),
                          event_time=T0 + timedelta(minutes=i), guest_key=f"guest-{i}")


def _in_canary(tmp_path: Path, **kw: object) -> RolloutScorer:
    config = DeliveryConfig(state_path=tmp_path / "rollout.json", canary_share=0.2, limits=LOOSE)
    rollout = RolloutScorer(_scorer(150.0, "inc"), config=config, pair_share=0.0, **kw)  # type: ignore[arg-type]
    rollout.start(_scorer(160.0, "cand"), version="cand")
    for i in range(40):  # shadow pairs for the gates
        rollout.price(_request(i))
    assert rollout.drain()
    result = rollout.advance(reason="test")
    assert result.advanced and result.stage == Stage.CANARY, result.message
    return rollout


def test_canary_propensity_is_the_arms_probability_times_the_exploration_propensity(tmp_path: Path) -> None:
    rollout = _in_canary(tmp_path)
    decisions = [rollout.price(_request(i)) for i in range(1000, 1400)]
    rollout.close()
    arms = {d.arm for d in decisions}
    assert arms == {"incumbent", "candidate"}
    for d in decisions:
        base = 150.0 if d.arm == "incumbent" else 160.0
        _, explored = explore(base, floor=10.0, ceiling=5000.0, key=d.request_id, config=EXPLORE)
        arm_p = 0.2 if d.arm == "candidate" else 0.8
        assert d.propensity == pytest.approx(arm_p * explored), d
    # the exploration draw is not a constant 1: the product differs from the arm's share alone
    assert any(d.propensity < 0.8 * 0.5 for d in decisions if d.arm == "incumbent")


def test_shadow_decisions_keep_their_exploration_propensity(tmp_path: Path) -> None:
    logged: list[PricingDecision] = []
    config = DeliveryConfig(state_path=tmp_path / "rollout.json", limits=LOOSE)
    rollout = RolloutScorer(_scorer(150.0, "inc"), config=config, on_decision=lambda r, d: logged.append(d))
    rollout.start(_scorer(160.0, "cand"), version="cand")
    served = [rollout.price(_request(i)) for i in range(30)]
    assert rollout.drain()
    rollout.close()
    shadows = {str(d.request_id): d for d in logged if d.arm == "candidate-shadow"}
    assert len(shadows) == 30
    for d in served:  # shadow stage: the incumbent serves with probability 1
        _, explored = explore(150.0, floor=10.0, ceiling=5000.0, key=d.request_id, config=EXPLORE)
        assert d.arm == "incumbent" and d.propensity == pytest.approx(explored)
        _, cand = explore(160.0, floor=10.0, ceiling=5000.0, key=d.request_id, config=EXPLORE)
        assert shadows[str(d.request_id)].propensity == pytest.approx(cand)


def test_decision_time_request_stamps_the_requests_time(tmp_path: Path) -> None:
    config = DeliveryConfig(state_path=tmp_path / "rollout.json", limits=LOOSE)
    stamped = RolloutScorer(_scorer(150.0, "inc"), config=config, decision_time="request")
    decided = RolloutScorer(_scorer(150.0, "inc"), config=config)
    req = _request(7)
    assert stamped.price(req).event_time == req.event_time
    assert decided.price(req).event_time > req.event_time  # made now, long after the 2026-11-30 request
    stamped.close()
    decided.close()
    with pytest.raises(RoutingInputError, match="decision_time"):
        RolloutScorer(_scorer(150.0, "inc"), config=config, decision_time="later")  # type: ignore[arg-type]


def test_a_look_that_waits_keeps_the_stages_evidence_for_the_next(tmp_path: Path) -> None:
    config = DeliveryConfig(state_path=tmp_path / "rollout.json", canary_share=0.2, limits=LOOSE)
    rollout = RolloutScorer(_scorer(150.0, "inc"), config=config, pair_share=0.5)
    rollout.start(_scorer(160.0, "cand"), version="cand")
    for i in range(40):
        rollout.price(_request(i))
    assert rollout.drain() and rollout.advance(reason="shadow passed").stage == Stage.CANARY
    served = [rollout.price(_request(i)) for i in range(2000, 2300)]
    for d in served:
        assert rollout.reward(str(d.decision_id), 1, revenue=d.price)
    assert rollout.drain()
    before = rollout.evidence()
    first = rollout.advance(reason="first look")
    assert first.waiting, first.message  # 300 outcomes: far below what the sequential gate needs
    after = rollout.evidence()
    counts = [len(list(e.incumbent_revenue or ())) + len(list(e.candidate_revenue or ())) for e in (before, after)]
    assert counts[0] == counts[1] == 300
    rollout.close()
