"""How the outcome of one scorer path becomes a :class:`~events.models.PricingDecision` and its audit trail.

Split from :mod:`pricing.scorer`: the scorer chooses the path (rules, light, heavy, or a degradation),
this module turns what that path produced into the published decision: the price held by the rules'
final say and rounded to the hotel's currency, the model and forecast it came from, and the
:class:`~pricing.scorer_seams.Trail` the audit log records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from events.models import PricingDecision, PricingRequest, Tier
from pricing import degraded as dg
from pricing.degraded import Deadline, Degradation
from pricing.feature_source import FeatureRead
from pricing.rules import RuleOutcome
from pricing.scorer_config import ScorerConfig
from pricing.scorer_seams import Trail

if TYPE_CHECKING:
    from pricing.quote import Quote


@dataclass(slots=True)
class PathResult:
    """What one path of the decision produced, before it becomes a PricingDecision."""

    price: float
    tier: Tier
    complexity: float = 0.0
    quote: Quote | None = None
    degradation: Degradation | None = None
    consulted: list[tuple[str, str | None]] = field(default_factory=list)


def final_price(request: PricingRequest, result: PathResult, outcome: RuleOutcome,
                config: ScorerConfig) -> tuple[float, float]:
    """(the price published, the unrounded model price): the rules' final say, then the hotel's minor unit."""
    unrounded = dg.final_price(result.price, outcome, request.last_published_price)
    decimals = config.hotel_decimals.get(request.hotel_id, config.price_decimals)
    return dg.money(unrounded, decimals, low=outcome.floor, high=outcome.ceiling), unrounded


def decision_of(
    request: PricingRequest,
    read: FeatureRead,
    result: PathResult,
    outcome: RuleOutcome,
    features: dict[str, float | None],
    *,
    config: ScorerConfig,
    deadline: Deadline,
) -> PricingDecision:
    """The decision of ``request`` from the path's ``result``; its latency is read from ``deadline`` here."""
    price, unrounded = final_price(request, result, outcome, config)
    quote = result.quote
    return PricingDecision(
        hotel_id=request.hotel_id,
        room_type=request.room_type,
        stay_date=request.stay_date,
        request_id=request.request_id,
        channel=request.channel,
        price=price,
        model_price=unrounded,
        tier=result.tier,
        model_name=getattr(quote, "model_name", None),
        model_version=opt_str(getattr(quote, "model_version", None)),
        feature_version=read.version,
        snapshot_id=config.snapshot_id,
        rule_ids=tuple(outcome.fired),
        complexity=result.complexity,
        expected_booking_prob=dg.probability(getattr(quote, "booking_prob", None)),
        bid_price=getattr(quote, "bid_price", None),
        forecast_views=getattr(getattr(quote, "forecast", None), "views", None),
        propensity=getattr(quote, "propensity", 1.0),
        degraded=result.degradation is not None,
        degraded_reason=None if result.degradation is None else result.degradation.reason,
        latency_ms=deadline.elapsed_ms(),
        features=features,
    )


def trail_of(features: Mapping[str, float | None], result: PathResult, feature_label: str) -> Trail:
    """The audit trail of a decision: its features, the models consulted and the optimiser's candidates."""
    candidates = tuple((float(p), float(b)) for p, b in (getattr(result.quote, "candidates", ()) or ()))
    return Trail(features, tuple(result.consulted), candidates, feature_label)


def model_id(quote: object) -> tuple[str, str | None]:
    """(model name, version) of a quote, for the trail's list of models consulted."""
    return str(getattr(quote, "model_name", "?")), opt_str(getattr(quote, "model_version", None))


def opt_str(value: object) -> str | None:
    """``str(value)``, keeping ``None``."""
    return None if value is None else str(value)
