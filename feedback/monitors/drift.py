"""Feature drift against a reference snapshot, judged on effect size with a threshold calibrated for the sizes.

At the sample sizes a monitor sees (thousands of rows), a significance test flags any difference at
all: a KS p-value of 1e-200 says the samples are large, not that the shift matters. So the alarm is
on an effect size, the **population stability index** on ten reference-quantile bins, and on a
threshold that means the same thing at every size:

* a shift must be *material*: ``psi > psi_threshold`` (0.2: the industry's "significant shift";
  a half-std move of a normal feature is about 0.25);
* and beyond *sampling noise at these sizes*: with ``n`` reference and ``m`` window values of a
  feature, two samples of one distribution give ``psi ~ (1/n + 1/m) chi2(K - 1)`` (``K`` bins), so
  the noise limit is that law's ``1 - alpha / k`` quantile, ``k`` the features judged in one check
  (Bonferroni: the chance that a check of unchanged features raises any alarm is at most ``alpha``);
  for small windows, where that law's tail is too thin, a multinomial simulation of the window
  from the reference's bin shares gives it (when the smallest bin expects fewer than 20 values;
  the larger of the two is used, cached per size).

A feature alerts when its PSI exceeds ``psi_limit = max(psi_threshold, noise limit)``: at large
windows the material threshold decides, at small ones the noise limit keeps chance out. The
Wasserstein-1 distance divided by the reference standard deviation (``wasserstein``, a shift in
units of reference std, as Evidently reports it) is shown next to it as the size a person reads.

Example:
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> ref = pd.DataFrame({"x": rng.normal(size=5000), "y": rng.normal(size=5000)})
    >>> mon = DriftMonitor(ref, features=("x", "y"))
    >>> win = pd.DataFrame({"x": rng.normal(0.5, 1, 5000), "y": rng.normal(size=5000)})
    >>> rep = mon.check(win)
    >>> rep.alerted_features
    ('x',)
    >>> round(rep["x"].wasserstein, 1), rep["x"].psi > rep["x"].psi_limit
    (0.5, True)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypedDict, Unpack

import numpy as np
import pandas as pd
from scipy import stats

from feedback.monitors.errors import MonitorInputError
from feedback.monitors.stability import (
    CHI2_MIN_EXPECTED,
    MIN_SAMPLES,
    NOISE_DRAWS_PER_LEVEL,
    PSI_FLOOR,
    finite,
    psi,
    psi_noise_limit,
    references,
    simulated_noise_limit,
)

__all__ = [  # the PSI statistics live in feedback.monitors.stability; importable from here as before
    "CHI2_MIN_EXPECTED", "MIN_SAMPLES", "NOISE_DRAWS_PER_LEVEL", "PSI_FLOOR", "DriftAwareRecalibration",
    "DriftMonitor", "DriftReport", "DriftWindow", "FeatureDrift", "MonitorOptions", "false_alarm_rate", "psi",
    "psi_noise_limit", "simulated_noise_limit",
]


@dataclass(frozen=True)
class FeatureDrift:
    """Drift statistics of one feature in one window."""

    feature: str
    n: int
    psi: float
    wasserstein: float
    psi_limit: float
    """``max(psi_threshold, the noise limit at these sizes)``: the PSI above which the feature alerts."""
    alert: bool


@dataclass(frozen=True)
class DriftReport:
    """One drift check: per-feature results, in the monitor's feature order."""

    at: datetime
    n_window: int
    features: tuple[FeatureDrift, ...]

    def __getitem__(self, feature: str) -> FeatureDrift:
        for item in self.features:
            if item.feature == feature:
                return item
        raise MonitorInputError(field="feature", value=feature, expected=f"one of {[f.feature for f in self.features]}")

    def __iter__(self) -> Iterator[FeatureDrift]:
        return iter(self.features)

    @property
    def alert(self) -> bool:
        """True when any feature alerted."""
        return any(item.alert for item in self.features)

    @property
    def alerted_features(self) -> tuple[str, ...]:
        """Names of the features that alerted."""
        return tuple(item.feature for item in self.features if item.alert)

    def to_frame(self) -> pd.DataFrame:
        """One row per feature, with the check time in column ``at``."""
        frame = pd.DataFrame([vars(item) for item in self.features])
        frame.insert(0, "at", self.at)
        return frame


class DriftWindow:
    """A ring buffer of the latest feature rows, for checks on live traffic.

    Example:
        >>> w = DriftWindow(("a",), capacity=2)
        >>> for v in (1.0, None, 3.0):
        ...     w.update({"a": v})
        >>> w.frame()["a"].tolist()
        [nan, 3.0]
    """

    def __init__(self, features: Sequence[str], *, capacity: int = 5000) -> None:
        if capacity < 1:
            raise MonitorInputError(field="capacity", value=capacity, expected="an int >= 1")
        self._features = tuple(features)
        # Rows stay Python tuples until frame(): a per-event numpy row write costs ~5x more.
        self._rows: deque[tuple[float | None, ...]] = deque(maxlen=capacity)

    def __len__(self) -> int:
        return len(self._rows)

    def update(self, features: Mapping[str, float | None]) -> None:
        """Append one row (missing or ``None`` values become NaN)."""
        self._rows.append(tuple(map(features.get, self._features)))

    def frame(self) -> pd.DataFrame:
        """The buffered rows, oldest first."""
        rows = np.array(self._rows, dtype=np.float64).reshape(len(self._rows), len(self._features))
        return pd.DataFrame(rows, columns=list(self._features))


class DriftMonitor:
    """Effect-size drift checks of windows against a reference frame (see the module docstring).

    Args:
        reference: the reference frame (a named snapshot's frame).
        features: columns to monitor (default: every numeric column of ``reference``).
        alpha: the chance that one check of unchanged features raises any alarm (split over the features).
        psi_threshold: PSI above which the shift is material.
        n_bins: reference-quantile bins for PSI.
        window_capacity: rows kept by :meth:`update` for :meth:`check` without a frame.
        max_history: reports kept in :attr:`history`.
        window_limits: per feature, a floor of its PSI limit calibrated on the reference's own windows
            (:func:`feedback.monitors.drift_calibration.window_limits`).
    """

    def __init__(
        self,
        reference: pd.DataFrame,
        *,
        features: Sequence[str] | None = None,
        alpha: float = 0.01,
        psi_threshold: float = 0.2,
        n_bins: int = 10,
        window_capacity: int = 5000,
        max_history: int = 1000,
        window_limits: Mapping[str, float] | None = None,
    ) -> None:
        if not 0.0 < alpha < 1.0:
            raise MonitorInputError(field="alpha", value=alpha, expected="a float in (0, 1)")
        if psi_threshold <= 0.0:
            raise MonitorInputError(field="psi_threshold", value=psi_threshold, expected="a float > 0")
        names = tuple(features) if features is not None else tuple(reference.select_dtypes("number").columns)
        self._refs = references(reference, names, n_bins)
        self._features = names
        self._alpha = alpha
        self._psi_threshold = psi_threshold
        self._noise_cache: dict[tuple[str, int, float], float] = {}
        self._window_limits = dict(window_limits or {})
        self._window = DriftWindow(names, capacity=window_capacity)
        self._history: deque[DriftReport] = deque(maxlen=max_history)

    @property
    def features(self) -> tuple[str, ...]:
        """Monitored features."""
        return self._features

    @property
    def history(self) -> tuple[DriftReport, ...]:
        """Past reports, oldest first."""
        return tuple(self._history)

    @property
    def window(self) -> DriftWindow:
        """Rows accumulated by :meth:`update`."""
        return self._window

    def update(self, features: Mapping[str, float | None]) -> None:
        """Add one live feature row to the rolling window."""
        self._window.update(features)

    def check(self, window_frame: pd.DataFrame | None = None, *, at: datetime | None = None) -> DriftReport:
        """Judge a window (default: the rows accumulated by :meth:`update`) and record the report."""
        frame = self._window.frame() if window_frame is None else window_frame
        columns = {name: finite(frame[name]) if name in frame.columns else np.empty(0) for name in self._features}
        judged = sum(len(values) >= MIN_SAMPLES for values in columns.values())
        level = self._alpha / max(judged, 1)  # Bonferroni over the features judged in this check
        items = tuple(self._judge(name, values, level) for name, values in columns.items())
        report = DriftReport(at=at or datetime.now(tz=UTC), n_window=len(frame), features=items)
        self._history.append(report)
        return report

    def _judge(self, name: str, values: np.ndarray, level: float) -> FeatureDrift:
        nan = float("nan")
        if len(values) < MIN_SAMPLES:
            return FeatureDrift(name, len(values), nan, nan, nan, False)
        ref = self._refs[name]
        counts = np.bincount(np.searchsorted(ref.edges, values, side="right"), minlength=len(ref.edges) + 1)
        value = psi(ref.shares, counts / counts.sum())
        distance = float(stats.wasserstein_distance(ref.values, values)) / ref.std
        limit = max(self._psi_threshold, self._noise(name, len(values), level), self._window_limits.get(name, 0.0))
        return FeatureDrift(name, len(values), value, distance, limit, value > limit)

    def _noise(self, name: str, m: int, level: float) -> float:
        """The noise limit of ``name`` at ``m`` window values (cached: a live window is mostly full)."""
        key = (name, m, level)
        if key not in self._noise_cache:
            ref = self._refs[name]
            analytic = psi_noise_limit(len(ref.values), m, int(np.count_nonzero(ref.shares)), level)
            smallest = float(ref.shares[ref.shares > 0].min())
            if m * smallest < CHI2_MIN_EXPECTED:
                analytic = max(analytic, simulated_noise_limit(ref.shares, m, level))
            self._noise_cache[key] = analytic
        return self._noise_cache[key]

    def history_frame(self) -> pd.DataFrame:
        """All recorded reports as one long frame (``at, feature, statistic, ...``), for plots."""
        if not self._history:
            return pd.DataFrame(columns=["at", *FeatureDrift.__dataclass_fields__])
        return pd.concat([report.to_frame() for report in self._history], ignore_index=True)


class MonitorOptions(TypedDict, total=False):
    """The keyword arguments of :class:`DriftMonitor` after ``reference`` (for :func:`false_alarm_rate`)."""

    features: Sequence[str] | None
    alpha: float
    psi_threshold: float
    n_bins: int
    window_capacity: int
    max_history: int
    window_limits: Mapping[str, float] | None


def false_alarm_rate(
    reference: pd.DataFrame,
    sampler: Callable[[int], pd.DataFrame],
    n_windows: int = 100,
    *,
    start: datetime | None = None,
    **monitor_options: Unpack[MonitorOptions],
) -> float:
    """Share of unchanged windows that raise any alert.

    Args:
        reference: the reference frame.
        sampler: ``sampler(i)`` returns window ``i`` drawn from the reference distribution (seed it with ``i``).
        n_windows: windows to draw.
        start: time stamp of the first window (one minute apart after it).
        **monitor_options: keyword arguments for :class:`DriftMonitor`.

    Example:
        >>> import numpy as np, pandas as pd
        >>> def draw(i):
        ...     return pd.DataFrame({"x": np.random.default_rng([7, i]).normal(size=500)})
        >>> false_alarm_rate(draw(10_000), draw, n_windows=20)
        0.0
    """
    if n_windows < 1:
        raise MonitorInputError(field="n_windows", value=n_windows, expected="an int >= 1")
    monitor = DriftMonitor(reference, **monitor_options)
    t0 = start or datetime(2000, 1, 1, tzinfo=UTC)
    alerts = sum(monitor.check(sampler(i), at=t0 + timedelta(minutes=i)).alert for i in range(n_windows))
    return alerts / n_windows


class DriftAwareRecalibration:
    """Calls a router recalibration when drift alerts, if enabled, at most once per cooldown.

    Debounce uses the report times, so replaying history behaves like live traffic.

    Example:
        >>> import numpy as np, pandas as pd
        >>> calls = []
        >>> rep = DriftReport(datetime(2026, 1, 1, tzinfo=UTC), 10,
        ...                   (FeatureDrift("x", 10, 1.0, 1.0, 0.2, True),))
        >>> hook = DriftAwareRecalibration(True, cooldown=timedelta(hours=1))
        >>> hook.on_report(rep, lambda: calls.append(1)), hook.on_report(rep, lambda: calls.append(1))
        (True, False)
        >>> DriftAwareRecalibration(False).on_report(rep, lambda: calls.append(1)), len(calls)
        (False, 1)
    """

    def __init__(self, enabled: bool, *, cooldown: timedelta = timedelta(hours=1)) -> None:
        if cooldown < timedelta(0):
            raise MonitorInputError(field="cooldown", value=cooldown, expected="a non-negative timedelta")
        self._enabled = enabled
        self._cooldown = cooldown
        self._last: datetime | None = None
        self._calls = 0

    @property
    def enabled(self) -> bool:
        """Whether alerts trigger recalibration at all."""
        return self._enabled

    @property
    def calls(self) -> int:
        """Recalibrations triggered so far."""
        return self._calls

    def on_report(self, report: DriftReport, recalibrate: Callable[[], None]) -> bool:
        """Call ``recalibrate()`` if enabled, the report alerted and the cooldown has passed.

        Returns:
            True when ``recalibrate`` was called.
        """
        if not (self._enabled and report.alert):
            return False
        if self._last is not None and report.at - self._last < self._cooldown:
            return False
        recalibrate()
        self._last = report.at
        self._calls += 1
        return True
