"""Prometheus metrics of the scorer and its HTTP service, on a registry the caller owns.

Each :class:`ScorerMetrics` registers its collectors on its own
:class:`~prometheus_client.CollectorRegistry` (a fresh one by default), so two
scorers in one process, or many tests, never collide on metric names.

Example:
    >>> m = ScorerMetrics()
    >>> m.decision("light", degraded_reason=None, latency_s=0.002)
    >>> m.decision("rules", degraded_reason="feature_store_unavailable", latency_s=0.001)
    >>> m.value("pricestream_degraded_decisions_total", reason="feature_store_unavailable")
    1.0
    >>> b"pricestream_decisions_total" in m.render()
    True
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

LATENCY_BUCKETS_S: tuple[float, ...] = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0)
"""Decision latency buckets: the budget is tens of milliseconds, the light path well under one."""


class ScorerMetrics:
    """Counters and histograms that the scorer and the service update.

    Args:
        registry: where to register the collectors (a new registry when ``None``).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True) if registry is None else registry
        self.decisions = Counter(
            "pricestream_decisions_total", "Pricing decisions by deciding tier.", ["tier"], registry=self.registry
        )
        self.degraded = Counter(
            "pricestream_degraded_decisions_total",
            "Decisions that fell back (rules-only or light-only), by reason.",
            ["reason"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "pricestream_decision_latency_seconds",
            "Wall time from request to decision inside the scorer.",
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.feature_read = Histogram(
            "pricestream_feature_read_seconds",
            "Wall time of online feature reads.",
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.errors = Counter(
            "pricestream_scorer_side_errors_total",
            "Failures around a decision that did not stop it (audit write, decision callback).",
            ["stage"],
            registry=self.registry,
        )
        self.reloads = Counter(
            "pricestream_model_reloads_total", "Model hot swaps, by tier.", ["tier"], registry=self.registry
        )
        self.http = Counter(
            "pricestream_http_requests_total",
            "HTTP requests by route and status code.",
            ["route", "status"],
            registry=self.registry,
        )

    def decision(self, tier: str, *, degraded_reason: str | None, latency_s: float) -> None:
        """Count one decision."""
        self.decisions.labels(tier=tier).inc()
        if degraded_reason is not None:
            self.degraded.labels(reason=degraded_reason).inc()
        self.latency.observe(latency_s)

    def value(self, name: str, **labels: str) -> float:
        """Current value of a sample (0.0 when it was never set); handy in tests and health checks."""
        found = self.registry.get_sample_value(name, labels)
        return 0.0 if found is None else float(found)

    def render(self) -> bytes:
        """The registry in the Prometheus text exposition format."""
        return generate_latest(self.registry)


_COUNTERS: dict[tuple[int, str], Counter] = {}


def registry_counter(registry: CollectorRegistry, name: str, documentation: str, labels: list[str]) -> Counter:
    """The counter ``name`` on ``registry``, created at the first call (apps and services may share a registry).

    Example:
        >>> reg = CollectorRegistry()
        >>> registry_counter(reg, "x_total", "X.", ["why"]) is registry_counter(reg, "x_total", "X.", ["why"])
        True
    """
    key = (id(registry), name)
    counter = _COUNTERS.get(key)
    if counter is None:
        counter = Counter(name, documentation, labels, registry=registry)
        _COUNTERS[key] = counter
    return counter
