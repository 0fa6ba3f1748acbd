"""Tiered router: send a request to the rules, the light model or the heavy model by its complexity.

The router keeps a bounded ring buffer of recent scores (``learn_one``) and can
re-calibrate its thresholds from them (``calibrate``) so that each tier gets a
target share of live traffic whatever the score distribution drifts to.

Thread safety: ``learn_one`` and ``calibrate`` take a lock; ``route`` reads the
current :class:`Thresholds` through one attribute load (an immutable object
swapped atomically), so it never sees a half-updated pair.

Example:
    >>> import numpy as np
    >>> router = TieredRouter(window=10_000)
    >>> router.route(0.05), router.route(0.3), router.route(0.9)
    ('rules', 'light', 'heavy')
    >>> for s in np.random.default_rng(1).uniform(size=5_000):
    ...     router.learn_one(float(s))
    >>> th = router.calibrate(TierShares(rules=0.2, light=0.7, heavy=0.1))
    >>> round(th.rules_below, 1), round(th.heavy_above, 1)
    (0.2, 0.9)
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np
from numpy.typing import NDArray

from routing.calibration import (
    DEFAULT_SHARES,
    DEFAULT_THRESHOLDS,
    MIN_CALIBRATION_SAMPLES,
    Thresholds,
    TierName,
    TierShares,
    thresholds_for_shares,
)
from routing.errors import RoutingInputError

__all__ = ["DEFAULT_WINDOW", "TierShares", "Thresholds", "TieredRouter"]

DEFAULT_WINDOW = 50_000
"""Recent scores kept for calibration: at a few hundred requests per second per worker,
a few minutes of traffic; enough for 1%-accurate quantiles, small enough (400 kB) to keep."""


class TieredRouter:
    """Route complexity scores to tiers; learn recent traffic; calibrate thresholds from it.

    Args:
        thresholds: initial cut-offs (``DEFAULT_THRESHOLDS`` when ``None``).
        window: size of the ring buffer of recent scores.
        min_samples: fewest recent scores that :meth:`calibrate` accepts.
    """

    def __init__(
        self,
        thresholds: Thresholds | None = None,
        *,
        window: int = DEFAULT_WINDOW,
        min_samples: int = MIN_CALIBRATION_SAMPLES,
    ) -> None:
        if window < 1:
            raise RoutingInputError(field="window", value=window, expected="an integer >= 1")
        self._thresholds = DEFAULT_THRESHOLDS if thresholds is None else thresholds
        self._buffer = np.empty(window, dtype=np.float64)
        self._next = 0
        self._filled = 0
        self._n_seen = 0
        self._min_samples = min_samples
        self._lock = threading.Lock()

    @property
    def thresholds(self) -> Thresholds:
        """The cut-offs in force."""
        return self._thresholds

    @thresholds.setter
    def thresholds(self, value: Thresholds) -> None:
        self._thresholds = value

    @property
    def n_seen(self) -> int:
        """Scores learnt since creation (including those that left the window)."""
        return self._n_seen

    @property
    def window_size(self) -> int:
        """Capacity of the ring buffer."""
        return int(self._buffer.size)

    def recent_scores(self) -> NDArray[Any]:
        """A copy of the scores in the window (oldest first)."""
        with self._lock:
            if self._filled < self._buffer.size:
                return self._buffer[: self._filled].copy()
            return np.concatenate((self._buffer[self._next :], self._buffer[: self._next]))

    def route(self, score: float) -> TierName:
        """Tier for ``score``: rules below ``rules_below``, heavy above ``heavy_above``, else light.

        A non-finite score means the scoring went wrong; the heavy model is the careful answer.
        """
        th = self._thresholds
        if not math.isfinite(score) or score > th.heavy_above:
            return "heavy"
        if score < th.rules_below:
            return "rules"
        return "light"

    predict_one = route

    def learn_one(self, score: float) -> None:
        """Remember ``score`` as recent traffic (non-finite scores are ignored)."""
        if not math.isfinite(score):
            return
        with self._lock:
            self._buffer[self._next] = score
            self._next = (self._next + 1) % self._buffer.size
            self._filled = min(self._filled + 1, self._buffer.size)
            self._n_seen += 1

    def calibrate(self, target_shares: TierShares = DEFAULT_SHARES, *, apply: bool = True) -> Thresholds:
        """Thresholds that give each tier its target share of the recent window.

        Args:
            target_shares: wanted share per tier.
            apply: also put the new thresholds in force.

        Raises:
            CalibrationError: fewer than ``min_samples`` scores in the window.
        """
        scores = self.recent_scores()
        new = thresholds_for_shares(scores, target_shares, min_samples=self._min_samples)
        if apply:
            self._thresholds = new
        return new
