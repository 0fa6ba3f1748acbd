"""Prometheus metrics for the monitors, on a registry the caller owns.

Nothing here touches prometheus_client's global registry: the caller passes a
:class:`~prometheus_client.CollectorRegistry` (the service exposes it, a test
inspects it). Labels stay low-cardinality: per feature, tier, version or arm,
never per hotel (coverage exports the pooled share and the worst hotel's share).

Example:
    >>> from prometheus_client import CollectorRegistry
    >>> registry = CollectorRegistry()
    >>> metrics = MonitorMetrics(registry)
    >>> metrics.export_tier_shares({"rules": 0.2, "light": 0.7, "heavy": 0.1})
    >>> registry.get_sample_value("pricestream_tier_share", {"tier": "light"})
    0.7
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from feedback.monitors.alarms import AlarmRecord
from feedback.monitors.coverage import CoverageReport
from feedback.monitors.drift import DriftReport
from feedback.monitors.flips import FlipReport

LATENCY_BUCKETS_S: tuple[float, ...] = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0)
"""Decision latency buckets: the inline budget is tens of milliseconds, so resolution sits there."""


class MonitorMetrics:
    """The monitors' gauges, counters and histograms, registered on ``registry``.

    Args:
        registry: where to register (never the global default registry).
        namespace: metric name prefix.
    """

    def __init__(self, registry: CollectorRegistry, *, namespace: str = "pricestream") -> None:
        def gauge(name: str, doc: str, labels: tuple[str, ...]) -> Gauge:
            return Gauge(name, doc, labels, namespace=namespace, registry=registry)

        self.coverage_missing = gauge(
            "coverage_missing_share", "Share of null or stale values, pooled over hotels", ("feature",)
        )
        self.coverage_null = gauge("coverage_null_share", "Share of null values, pooled over hotels", ("feature",))
        self.coverage_worst = gauge(
            "coverage_worst_hotel_missing_share", "Highest null-or-stale share among hotels", ("feature",)
        )
        self.coverage_hotels = gauge("coverage_hotels", "Hotels with traffic in the coverage window", ())
        self.drift_psi = gauge("drift_psi", "Population stability index", ("feature",))
        self.drift_psi_limit = gauge(
            "drift_psi_limit", "PSI above which the feature alerts (material, beyond noise)", ("feature",)
        )
        self.drift_wasserstein = gauge("drift_wasserstein_std", "Wasserstein distance / reference std", ("feature",))
        self.drift_alert = gauge("drift_alert", "1 when the feature's last check alerted", ("feature",))
        self.drift_alerts = Counter(
            "drift_alerts", "Drift alerts raised", ("feature",), namespace=namespace, registry=registry
        )
        self.drift_alarms = Counter(
            "drift_alarms", "Drift alarms (one per episode), by the action each ran", ("action",),
            namespace=namespace, registry=registry,
        )
        self.flip_rate = gauge("flip_rate", "Share of identical inputs priced differently", ("scope", "version"))
        self.tier_share = gauge("tier_share", "Share of decisions per tier", ("tier",))
        self.latency = Histogram(
            "decision_latency_seconds",
            "Pricing decision latency",
            ("tier",),
            namespace=namespace,
            registry=registry,
            buckets=LATENCY_BUCKETS_S,
        )
        self.rollout_weight = gauge("rollout_weight", "Traffic weight of each rollout arm", ("arm",))

    def export_coverage(self, report: CoverageReport) -> None:
        """Set the coverage gauges from a report."""
        pooled, worst = report.by_feature(), report.worst_hotel()
        total = report.counts.sum()
        nulls = (report.null_share * report.counts[:, None]).sum(axis=0) / max(int(total), 1)
        for j, feature in enumerate(report.features):
            self.coverage_missing.labels(feature).set(pooled[feature])
            self.coverage_null.labels(feature).set(float(nulls[j]))
            self.coverage_worst.labels(feature).set(worst[feature])
        self.coverage_hotels.set(len(report.hotels))

    def export_drift(self, report: DriftReport) -> None:
        """Set the drift gauges from a report and count its alerts."""
        for item in report:
            self.drift_psi_limit.labels(item.feature).set(item.psi_limit)
            self.drift_psi.labels(item.feature).set(item.psi)
            self.drift_wasserstein.labels(item.feature).set(item.wasserstein)
            self.drift_alert.labels(item.feature).set(1.0 if item.alert else 0.0)
            if item.alert:
                self.drift_alerts.labels(item.feature).inc()

    def export_alarm(self, record: AlarmRecord) -> None:
        """Count a drift alarm once per action it ran (``none`` when it had none)."""
        for line in record.actions:
            self.drift_alarms.labels(line.split(":", 1)[0] if ": " in line else "none").inc()

    def export_flips(self, report: FlipReport, *, scope: str = "same_version") -> None:
        """Set the flip-rate gauges: ``version="all"`` plus one per version in the report."""
        self.flip_rate.labels(scope, "all").set(report.rate)
        for version in report.by_version:
            self.flip_rate.labels(scope, version).set(report.rate_of(version))

    def export_tier_shares(self, shares: Mapping[str, float]) -> None:
        """Set the share of decisions per tier."""
        for tier, share in shares.items():
            self.tier_share.labels(tier).set(share)

    def observe_latencies(self, latencies_ms: Iterable[float], *, tier: str) -> None:
        """Record decision latencies (milliseconds, as on :class:`events.models.PricingDecision`)."""
        child = self.latency.labels(tier)
        for value in latencies_ms:
            child.observe(value / 1000.0)

    def export_rollout_weights(self, weights: Mapping[str, float]) -> None:
        """Set the traffic weight per rollout arm."""
        for arm, weight in weights.items():
            self.rollout_weight.labels(arm).set(weight)


def export(
    metrics: MonitorMetrics,
    *,
    coverage: CoverageReport | None = None,
    drift: DriftReport | None = None,
    flips: FlipReport | None = None,
    tier_shares: Mapping[str, float] | None = None,
    rollout_weights: Mapping[str, float] | None = None,
) -> None:
    """Export whichever reports are given (``None`` leaves those metrics as they were)."""
    if coverage is not None:
        metrics.export_coverage(coverage)
    if drift is not None:
        metrics.export_drift(drift)
    if flips is not None:
        metrics.export_flips(flips)
    if tier_shares is not None:
        metrics.export_tier_shares(tier_shares)
    if rollout_weights is not None:
        metrics.export_rollout_weights(rollout_weights)
