"""PSI limits calibrated on the reference's own windows: what unchanged live traffic looks like at a window's size.

The noise limit of :mod:`feedback.monitors.drift` assumes a window of independent draws. Live feature rows are
not: the 24-hour counts of one hotel move slowly and repeat in every request of the hour, and a day's window
sits at one point of the weekly cycle. On the stationary market of ``bench/drift_alarm.py`` (4 hotels, windows
of 600 decisions) every check alerted on ``hotel_*_24h`` with the independent-draw limit: the alarm said the
week was not the reference's average, which is true and useless.

:func:`window_limits` slides a window of the live check's size over the reference in time order and takes, per
feature, the largest PSI of such a window against the whole reference, times ``WINDOW_SLACK``: a live window is
then alarming only when it is further from the reference than any stretch of the reference itself was. Pass the
result to :class:`~feedback.monitors.DriftMonitor` (``window_limits``); a feature's limit is the largest of the
material threshold, the independent-draw noise limit and this one.

Example:
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> level = np.repeat(rng.normal(size=50), 100)  # a slowly moving feature: 50 plateaus of 100 rows
    >>> ref = pd.DataFrame({"x": level + rng.normal(0, 0.1, 5000)})
    >>> limits = window_limits(ref, ["x"], window=300)
    >>> limits["x"] > 0.5  # a 300-row window spans three plateaus: far from the whole, by nature
    True
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from feedback.monitors.errors import MonitorInputError
from feedback.monitors.stability import MIN_SAMPLES, finite, psi, reference_bins

WINDOW_SLACK = 1.5
"""A live week brings about as many windows as the reference holds, so its largest is as likely above the
reference's largest as below: the slack keeps that coin flip from ringing the alarm."""

WINDOWS_PER_STEP = 10
"""Default step: a tenth of the window (overlapping windows find the worst stretch; more add cost, not news)."""


def window_limits(reference: pd.DataFrame, features: Sequence[str], *, window: int, step: int | None = None,
                  n_bins: int = 10, slack: float = WINDOW_SLACK) -> dict[str, float]:
    """Per feature, ``slack`` x the largest PSI of a ``window``-row stretch of ``reference`` (time ordered)."""
    if window < MIN_SAMPLES or window > len(reference):
        raise MonitorInputError(field="window", value=window,
                                expected=f"an int from {MIN_SAMPLES} to the reference's {len(reference)} rows")
    stride = step or max(window // WINDOWS_PER_STEP, 1)
    out: dict[str, float] = {}
    for name in features:
        column = pd.to_numeric(reference[name], errors="coerce").to_numpy(dtype=np.float64)
        ref = reference_bins(finite(column), n_bins)
        worst = 0.0
        for start in range(0, len(column) - window + 1, stride):
            values = column[start:start + window]
            values = values[np.isfinite(values)]
            if len(values) < MIN_SAMPLES:
                continue
            counts = np.bincount(np.searchsorted(ref.edges, values, side="right"), minlength=len(ref.edges) + 1)
            worst = max(worst, psi(ref.shares, counts / counts.sum()))
        out[name] = slack * worst
    return out
