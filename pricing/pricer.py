"""The one seam every transport and wrapper prices through: :class:`Pricer`.

``serve`` (HTTP), ``serve-stream`` (Kafka) and the benches accept a :class:`Pricer`. The routed
:class:`~pricing.scorer.Scorer` is one; the wrappers composed around it in the composition root
(``pricestream.app``: cold-start stages, progressive delivery with its output audit) are others,
so a transport never needs to know which it was given.

Example:
    >>> from pricing.feature_source import MemoryFeatureSource
    >>> from pricing.rules import RuleSet
    >>> from pricing.scorer import Scorer, ScorerConfig
    >>> from routing.router import TieredRouter
    >>> s = Scorer(ScorerConfig(), rules=RuleSet.from_yaml("min_price: 50\\nmax_price: 500\\n"),
    ...            feature_source=MemoryFeatureSource(), light=None, heavy=None, router=TieredRouter())
    >>> isinstance(s, Pricer)
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from events.models import PricingDecision, PricingRequest

if TYPE_CHECKING:
    from pricing.metrics import ScorerMetrics
    from pricing.scorer import ScorerConfig


@runtime_checkable
class Pricer(Protocol):
    """Prices requests; never raises for a valid request (a failure degrades to the rules' price)."""

    @property
    def config(self) -> ScorerConfig:
        """The scorer settings in force (the deadline the HTTP layer applies)."""
        ...

    @property
    def stats(self) -> ScorerMetrics:
        """The Prometheus metrics the transports render at ``/metrics``."""
        ...

    def price(self, request: PricingRequest, *, deadline_ms: float | None = None) -> PricingDecision:
        """One decision."""
        ...

    def price_batch(
        self, requests: Sequence[PricingRequest], *, deadline_ms: float | None = None
    ) -> list[PricingDecision]:
        """One decision per request, in order."""
        ...

    def health(self) -> dict[str, Any]:
        """What ``/healthz`` reports of the pricer (models in force, degraded parts)."""
        ...
