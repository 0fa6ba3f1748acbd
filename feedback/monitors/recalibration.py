"""Drift-aware recalibration of the serving router: a drift alert moves the thresholds a server uses.

The monitor service feeds every decision's complexity score to :meth:`ThresholdRecalibrator.learn_one`
and every drift report to :meth:`ThresholdRecalibrator.on_report`. When recalibration is enabled,
the report alerted and the cooldown has passed (:class:`~feedback.monitors.drift.DriftAwareRecalibration`),
new thresholds that give each tier its target share of the recent scores are published to the
router thresholds file (:class:`routing.threshold_state.ThresholdStore`), which every running
``pricestream serve`` follows: its next decisions route with them.

Example:
    >>> import tempfile
    >>> from datetime import UTC, datetime
    >>> from pathlib import Path
    >>> from feedback.monitors.drift import DriftReport, FeatureDrift
    >>> store = ThresholdStore(Path(tempfile.mkdtemp()) / "thresholds.json")
    >>> recal = ThresholdRecalibrator(RecalibrationConfig(enabled=True, min_samples=100), store=store)
    >>> for i in range(200):
    ...     recal.learn_one(i / 200)
    >>> alert = DriftReport(datetime(2026, 12, 1, tzinfo=UTC), 200,
    ...                     (FeatureDrift("occupancy", 200, 1.0, 1.0, 0.2, True),))
    >>> state = recal.on_report(alert)
    >>> round(state.thresholds.rules_below, 2), round(state.thresholds.heavy_above, 2), state.reason
    (0.35, 0.85, 'drift alert on occupancy: recalibrated on 200 recent scores')
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field

from feedback.monitors.drift import DriftAwareRecalibration, DriftReport
from routing.calibration import DEFAULT_SHARES, TierShares
from routing.errors import CalibrationError
from routing.router import TieredRouter
from routing.threshold_state import ThresholdState, ThresholdStore

__all__ = ["RecalibrationConfig", "ThresholdRecalibrator"]


class RecalibrationConfig(BaseModel):
    """Settings of drift-aware recalibration.

    Attributes:
        enabled: drift alerts recalibrate at all (off by default: thresholds are an operator's choice).
        cooldown: least time between two recalibrations (report times, so a replay behaves like live).
        shares: target share of traffic per tier after a recalibration.
        window: recent complexity scores kept.
        min_samples: fewest recent scores a recalibration accepts.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = False
    cooldown: timedelta = timedelta(hours=1)
    shares: TierShares = DEFAULT_SHARES
    window: int = Field(default=20_000, ge=1)
    min_samples: int = Field(default=1_000, ge=1)


class ThresholdRecalibrator:
    """Learns recent complexity scores; on a drift alert publishes recalibrated thresholds.

    Args:
        config: recalibration settings.
        store: the router thresholds file that servers follow.
    """

    def __init__(self, config: RecalibrationConfig, *, store: ThresholdStore) -> None:
        self.config = config
        self.store = store
        self._hook = DriftAwareRecalibration(config.enabled, cooldown=config.cooldown)
        self._scores = TieredRouter(window=config.window, min_samples=config.min_samples)
        self.published: list[ThresholdState] = []
        self.skipped = 0

    def learn_one(self, complexity: float) -> None:
        """Remember one decision's complexity score."""
        self._scores.learn_one(complexity)

    def on_report(self, report: DriftReport) -> ThresholdState | None:
        """Recalibrate and publish when the report asks for it; the published state, else ``None``."""
        published: list[ThresholdState] = []

        def recalibrate() -> None:
            try:
                thresholds = self._scores.calibrate(self.config.shares)
            except CalibrationError:  # too few scores yet: the next alert tries again
                self.skipped += 1
                return
            alerted = ", ".join(f.feature for f in report if f.alert)
            n = len(self._scores.recent_scores())
            published.append(self.store.publish(
                thresholds, at=report.at, reason=f"drift alert on {alerted}: recalibrated on {n} recent scores"))

        self._hook.on_report(report, recalibrate)
        self.published += published
        return published[0] if published else None
