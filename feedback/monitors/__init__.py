"""Monitors for the live pricing loop: feature coverage, feature drift, decision flips.

Each monitor is a small pure class fed one event at a time (``update``) that
hands back a frozen report; :mod:`feedback.monitors.metrics` exports reports to
Prometheus and :mod:`feedback.dashboard` renders them as one HTML page.

Example:
    >>> from feedback.monitors import FlipMonitor
    >>> FlipMonitor().report().rate
    0.0
"""

from __future__ import annotations

from feedback.monitors.coverage import CoverageMonitor, CoverageReport
from feedback.monitors.drift import (
    DriftAwareRecalibration,
    DriftMonitor,
    DriftReport,
    DriftWindow,
    FeatureDrift,
    false_alarm_rate,
)
from feedback.monitors.errors import MonitorError, MonitorInputError
from feedback.monitors.flips import FlipMonitor, FlipReport, compare, input_hash

__all__ = [
    "CoverageMonitor",
    "CoverageReport",
    "DriftAwareRecalibration",
    "DriftMonitor",
    "DriftReport",
    "DriftWindow",
    "FeatureDrift",
    "FlipMonitor",
    "FlipReport",
    "MonitorError",
    "MonitorInputError",
    "compare",
    "false_alarm_rate",
    "input_hash",
]
