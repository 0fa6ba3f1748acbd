"""Feature drift against a reference snapshot: a significance test gated by an effect size.

Per feature, a two-sample Kolmogorov-Smirnov test (``scipy.stats.ks_2samp``)
compares the window with the reference. The p-values of all features are
corrected with **Holm's step-down** procedure (default; ``correction="bonferroni"``
is available): it controls the family-wise error rate at ``alpha`` like
Bonferroni, and is never less powerful. Significance alone is not enough: on
large windows KS rejects for trivial differences, so a feature alerts only if
its corrected p-value is below ``alpha`` *and* its distance exceeds a threshold:
the population stability index on reference-quantile bins (``psi > psi_threshold``)
or the Wasserstein-1 distance divided by the reference standard deviation
(``> wasserstein_threshold``, a shift in units of reference std).

Example:
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> ref = pd.DataFrame({"x": rng.normal(size=5000), "y": rng.normal(size=5000)})
    >>> mon = DriftMonitor(ref, features=("x", "y"))
    >>> win = pd.DataFrame({"x": rng.normal(0.5, 1, 5000), "y": rng.normal(size=5000)})
    >>> rep = mon.check(win)
    >>> rep.alerted_features
    ('x',)
    >>> round(rep["x"].wasserstein, 1)
    0.5
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from feedback.monitors.errors import MonitorInputError

PSI_FLOOR = 1e-4
"""Bin-share floor in PSI: an empty bin would make log(0); 1e-4 caps one bin's term near 1."""

EXACT_KS_MAX_PAIRS = 1_000_000
"""Above this many sample pairs, KS uses the asymptotic p-value: scipy's exact one costs seconds at 5k × 5k."""

MIN_SAMPLES = 30
"""Below this many non-null values in the window a feature is not tested (KS has no power)."""


@dataclass(frozen=True)
class FeatureDrift:
    """Drift statistics of one feature in one window."""

    feature: str
    n: int
    statistic: float
    p_value: float
    corrected_p: float
    psi: float
    wasserstein: float
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


@dataclass(frozen=True)
class _Reference:
    values: np.ndarray
    edges: np.ndarray
    shares: np.ndarray
    std: float


def _reference(values: np.ndarray, n_bins: int) -> _Reference:
    interior = np.unique(np.quantile(values, np.linspace(0.0, 1.0, n_bins + 1)[1:-1]))
    counts = np.bincount(np.searchsorted(interior, values, side="right"), minlength=len(interior) + 1)
    std = float(np.std(values))
    return _Reference(np.sort(values), interior, counts / counts.sum(), std if std > 0 else 1.0)


def psi(reference_shares: np.ndarray, window_shares: np.ndarray) -> float:
    """Population stability index between two bin-share vectors.

    Example:
        >>> round(psi(np.array([0.5, 0.5]), np.array([0.25, 0.75])), 4)
        0.2747
    """
    p = np.maximum(reference_shares, PSI_FLOOR)
    q = np.maximum(window_shares, PSI_FLOOR)
    return float(np.sum((q - p) * np.log(q / p)))


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm step-down adjusted p-values (monotone, capped at 1).

    Example:
        >>> holm(np.array([0.01, 0.04, 0.03])).round(2).tolist()
        [0.03, 0.06, 0.06]
    """
    m = len(p_values)
    order = np.argsort(p_values)
    adjusted = np.minimum(1.0, np.maximum.accumulate(p_values[order] * (m - np.arange(m))))
    out = np.empty(m)
    out[order] = adjusted
    return out


def _finite(column: pd.Series | np.ndarray) -> np.ndarray:
    values = pd.to_numeric(pd.Series(column), errors="coerce").to_numpy(dtype=np.float64)
    return values[np.isfinite(values)]


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
    """KS + effect-size drift checks of windows against a reference frame.

    Args:
        reference: the reference frame (a named snapshot's frame).
        features: columns to monitor (default: every numeric column of ``reference``).
        alpha: family-wise error rate for the corrected KS p-values.
        psi_threshold: PSI above which the shift is material.
        wasserstein_threshold: Wasserstein/std above which the shift is material (``None``: PSI only).
        n_bins: reference-quantile bins for PSI.
        correction: ``"holm"`` or ``"bonferroni"``.
        window_capacity: rows kept by :meth:`update` for :meth:`check` without a frame.
        max_history: reports kept in :attr:`history`.
    """

    def __init__(
        self,
        reference: pd.DataFrame,
        *,
        features: Sequence[str] | None = None,
        alpha: float = 0.01,
        psi_threshold: float = 0.2,
        wasserstein_threshold: float | None = 0.2,
        n_bins: int = 10,
        correction: Literal["holm", "bonferroni"] = "holm",
        window_capacity: int = 5000,
        max_history: int = 1000,
    ) -> None:
        if not 0.0 < alpha < 1.0:
            raise MonitorInputError(field="alpha", value=alpha, expected="a float in (0, 1)")
        if correction not in ("holm", "bonferroni"):
            raise MonitorInputError(field="correction", value=correction, expected="'holm' or 'bonferroni'")
        names = tuple(features) if features is not None else tuple(reference.select_dtypes("number").columns)
        missing = [name for name in names if name not in reference.columns]
        if missing or not names:
            raise MonitorInputError(
                field="features",
                value=missing or names,
                expected="non-empty, all columns of the reference frame",
            )
        self._refs: dict[str, _Reference] = {}
        for name in names:
            values = _finite(reference[name])
            if len(values) < MIN_SAMPLES:
                raise MonitorInputError(
                    field=f"reference[{name!r}]",
                    value=len(values),
                    expected=f">= {MIN_SAMPLES} finite values",
                )
            self._refs[name] = _reference(values, n_bins)
        self._features = names
        self._alpha = alpha
        self._psi_threshold = psi_threshold
        self._w_threshold = wasserstein_threshold
        self._correction = correction
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
        """Test a window (default: the rows accumulated by :meth:`update`) and record the report."""
        frame = self._window.frame() if window_frame is None else window_frame
        raw: list[tuple[str, int, float, float, float, float]] = []
        for name in self._features:
            values = _finite(frame[name]) if name in frame.columns else np.empty(0)
            raw.append((name, len(values), *self._compare(name, values)))
        p = np.array([row[3] for row in raw])
        tested = ~np.isnan(p)
        corrected = np.full(len(p), np.nan)
        if tested.any():
            m = int(tested.sum())
            corrected[tested] = holm(p[tested]) if self._correction == "holm" else np.minimum(1.0, p[tested] * m)
        items = tuple(
            FeatureDrift(name, n, stat, pv, float(cp), ps, w, bool(tested[i]) and self._alerts(cp, ps, w))
            for i, ((name, n, stat, pv, ps, w), cp) in enumerate(zip(raw, corrected, strict=True))
        )
        report = DriftReport(at=at or datetime.now(tz=UTC), n_window=len(frame), features=items)
        self._history.append(report)
        return report

    def _compare(self, name: str, values: np.ndarray) -> tuple[float, float, float, float]:
        nan = float("nan")
        if len(values) < MIN_SAMPLES:
            return nan, nan, nan, nan
        ref = self._refs[name]
        method = "exact" if len(ref.values) * len(values) <= EXACT_KS_MAX_PAIRS else "asymp"
        result = stats.ks_2samp(ref.values, values, method=method)
        counts = np.bincount(np.searchsorted(ref.edges, values, side="right"), minlength=len(ref.edges) + 1)
        distance = float(stats.wasserstein_distance(ref.values, values)) / ref.std
        return float(result.statistic), float(result.pvalue), psi(ref.shares, counts / counts.sum()), distance

    def _alerts(self, corrected_p: float, psi_value: float, distance: float) -> bool:
        if not corrected_p < self._alpha:
            return False
        material = psi_value > self._psi_threshold
        if self._w_threshold is not None:
            material = material or distance > self._w_threshold
        return material

    def history_frame(self) -> pd.DataFrame:
        """All recorded reports as one long frame (``at, feature, statistic, ...``), for plots."""
        if not self._history:
            return pd.DataFrame(columns=["at", *FeatureDrift.__dataclass_fields__])
        return pd.concat([report.to_frame() for report in self._history], ignore_index=True)


def false_alarm_rate(
    reference: pd.DataFrame,
    sampler: Callable[[int], pd.DataFrame],
    n_windows: int = 100,
    *,
    start: datetime | None = None,
    **monitor_options: object,
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
    monitor = DriftMonitor(reference, **monitor_options)  # type: ignore[arg-type]
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
        ...                   (FeatureDrift("x", 10, 0.9, 1e-9, 1e-9, 1.0, 1.0, True),))
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
