"""What a model tier answers: the :class:`Quote` of one request, and the :class:`TierPricer` surface.

Split from :mod:`pricing.tiers` (which re-exports both) so that code holding a quote, or a pricer
it did not build, needs neither the bundles nor onnxruntime.

Example:
    >>> q = Quote(120.0, 60.0, 0.5, 0.05, ((120.0, 0.5),), "demand-light", "v1")
    >>> q.fallback, q.bid_price, q.propensity
    (False, None, 1.0)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Protocol, runtime_checkable

from events.models import PricingRequest
from pricing.bid_price import DemandForecast
from pricing.feature_source import FeatureRead


@dataclass(frozen=True, slots=True)
class Quote:
    """A tier's answer for one request.

    Attributes:
        price: chosen price, finite and inside ``[floor, ceiling]``.
        expected_revenue: ``price x booking_prob`` (0.0 on fallback).
        booking_prob: mean ``p(book)`` at ``price``; ``None`` only on fallback.
        uncertainty: std of ``p(book)`` at ``price``: member spread (heavy only) and the
            off-distribution term (see ``pricing.demand_curves.OOD_STD``), added in quadrature.
        candidates: every evaluated ``(price, p(book))``, sorted by price.
        model_name: bundle name (``demand-light``).
        model_version: bundle version.
        fallback: the model returned non-finite values; ``price`` is the clamped rules price.
        bid_price: opportunity cost per room-night the price was set against (``None``: not capacity-aware,
            the features held no demand forecast).
        forecast: the demand forecast the bid price came from.
        propensity: probability of ``price`` under the exploration draw (1.0 without exploration).
    """

    price: float
    expected_revenue: float
    booking_prob: float | None
    uncertainty: float
    candidates: tuple[tuple[float, float], ...]
    model_name: str
    model_version: str
    fallback: bool = False
    bid_price: float | None = None
    forecast: DemandForecast | None = None
    propensity: float = 1.0


@runtime_checkable
class TierPricer(Protocol):
    """What the scorer calls; implemented by :class:`pricing.tiers.LightPricer` and ``HeavyPricer``."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    def quote(
        self,
        request: PricingRequest,
        features: Mapping[str, float | None],
        *,
        floor: float,
        ceiling: float,
        rule_price: float | None = None,
    ) -> Quote: ...


class StayFeatures(Protocol):
    """Where a pricer reads the features of a stay's later nights (a :class:`pricing.feature_source.FeatureSource`)."""

    def read(self, hotel_id: str, room_type: str, stay_date: date) -> FeatureRead: ...
