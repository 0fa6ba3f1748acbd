"""The population stability index of a feature against its reference, and its noise limits.

:func:`reference_bins` cuts a reference sample into quantile bins, :func:`psi` compares two
bin-share vectors, and :func:`psi_noise_limit` (the chi-square law) or
:func:`simulated_noise_limit` (a multinomial simulation, for small windows) give the PSI that
two samples of one distribution exceed by chance. :class:`feedback.monitors.drift.DriftMonitor`
judges drift with them; every public name is importable from :mod:`feedback.monitors.drift` too.

Example:
    >>> import numpy as np
    >>> ref = reference_bins(np.random.default_rng(0).normal(size=5000), 10)
    >>> len(ref.shares), round(float(ref.shares.sum()), 6)
    (10, 1.0)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from feedback.monitors.errors import MonitorInputError

PSI_FLOOR = 1e-4
"""Bin-share floor in PSI: an empty bin would make log(0); 1e-4 caps one bin's term near 1."""

MIN_SAMPLES = 30
"""Below this many non-null values in the window a feature is not judged (its bin shares are noise)."""


@dataclass(frozen=True)
class Reference:
    """A feature's sorted reference values, interior bin edges, bin shares and standard deviation."""

    values: np.ndarray
    edges: np.ndarray
    shares: np.ndarray
    std: float


def reference_bins(values: np.ndarray, n_bins: int) -> Reference:
    """``n_bins`` reference-quantile bins of ``values`` (ties merge bins); a zero std counts as 1."""
    interior = np.unique(np.quantile(values, np.linspace(0.0, 1.0, n_bins + 1)[1:-1]))
    counts = np.bincount(np.searchsorted(interior, values, side="right"), minlength=len(interior) + 1)
    std = float(np.std(values))
    return Reference(np.sort(values), interior, counts / counts.sum(), std if std > 0 else 1.0)


def psi(reference_shares: np.ndarray, window_shares: np.ndarray) -> float:
    """Population stability index between two bin-share vectors.

    Example:
        >>> round(psi(np.array([0.5, 0.5]), np.array([0.25, 0.75])), 4)
        0.2747
    """
    p = np.maximum(reference_shares, PSI_FLOOR)
    q = np.maximum(window_shares, PSI_FLOOR)
    return float(np.sum((q - p) * np.log(q / p)))


def psi_noise_limit(n_reference: int, n_window: int, n_bins: int, level: float) -> float:
    """The PSI that two samples of one distribution exceed with probability ``level``.

    Example:
        >>> round(psi_noise_limit(5000, 500, 10, 0.01), 3)  # chi2(9) 99% quantile x (1/5000 + 1/500)
        0.048
    """
    return (1.0 / n_reference + 1.0 / n_window) * float(stats.chi2.isf(level, max(n_bins - 1, 1)))


CHI2_MIN_EXPECTED = 20.0
"""Expected window values in the smallest bin from which the chi-square law of PSI is trusted (else: simulated)."""

NOISE_DRAWS_PER_LEVEL = 20
"""Simulated windows per expected exceedance: ``20 / level`` draws put the quantile's own error near 20%."""


def simulated_noise_limit(shares: np.ndarray, m: int, level: float, *, seed: int = 0) -> float:
    """The ``1 - level`` quantile of PSI between ``shares`` and ``m`` values drawn from them.

    The chi-square law of :func:`psi_noise_limit` holds when every bin expects some tens of
    values; below that (a window of 60 rows in 10 bins) PSI's log terms have a longer tail, and
    this multinomial simulation of the window gives the limit instead.

    Example:
        >>> shares = np.full(10, 0.1)
        >>> simulated_noise_limit(shares, 60, 0.01) > psi_noise_limit(10**9, 60, 10, 0.01)
        True
    """
    draws = int(min(max(NOISE_DRAWS_PER_LEVEL / level, 1_000), 200_000))
    counts = np.random.default_rng(seed).multinomial(m, shares / shares.sum(), size=draws)
    p = np.maximum(shares, PSI_FLOOR)
    q = np.maximum(counts / m, PSI_FLOOR)
    values = np.sum((q - p) * np.log(q / p), axis=1)
    return float(np.quantile(values, 1.0 - level))


def finite(column: pd.Series | np.ndarray) -> np.ndarray:
    """The finite numeric values of a column (text and missing values dropped)."""
    values = pd.to_numeric(pd.Series(column), errors="coerce").to_numpy(dtype=np.float64)
    return values[np.isfinite(values)]


def references(reference: pd.DataFrame, names: tuple[str, ...], n_bins: int) -> dict[str, Reference]:
    """Each feature's reference bins; refuses features missing from the frame or with too few finite values."""
    missing = [name for name in names if name not in reference.columns]
    if missing or not names:
        raise MonitorInputError(
            field="features",
            value=missing or names,
            expected="non-empty, all columns of the reference frame",
        )
    refs: dict[str, Reference] = {}
    for name in names:
        values = finite(reference[name])
        if len(values) < MIN_SAMPLES:
            raise MonitorInputError(
                field=f"reference[{name!r}]",
                value=len(values),
                expected=f">= {MIN_SAMPLES} finite values",
            )
        refs[name] = reference_bins(values, n_bins)
    return refs
