"""Threshold calibration: pick the two score cut-offs that give each tier its target share.

The router sends ``score < rules_below`` to the rules, ``score > heavy_above`` to the
heavy model and the rest to the light model. Given a sample of recent scores,
``rules_below`` is the ``rules`` quantile and ``heavy_above`` the ``1 - heavy`` quantile,
so on traffic like the sample the tiers get their target shares (exactly so for
continuous scores; ties at a cut-off all fall on the same side).

Example:
    >>> import numpy as np
    >>> scores = np.random.default_rng(0).uniform(size=10_000)
    >>> th = thresholds_for_shares(scores, TierShares(rules=0.3, light=0.6, heavy=0.1))
    >>> {k: round(v, 2) for k, v in tier_shares(scores, th).items()}
    {'rules': 0.3, 'light': 0.6, 'heavy': 0.1}
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import BaseModel, ConfigDict, Field, model_validator

from routing.errors import CalibrationError, RoutingInputError

TierName = Literal["rules", "light", "heavy"]
TIERS: tuple[TierName, ...] = ("rules", "light", "heavy")

MIN_CALIBRATION_SAMPLES = 1_000
"""Fewer recent scores than this give quantiles too noisy to move live thresholds on."""

_SHARE_SUM_TOLERANCE = 1e-6


class Thresholds(BaseModel):
    """Score cut-offs: ``score < rules_below`` -> rules, ``score > heavy_above`` -> heavy.

    Example:
        >>> Thresholds(rules_below=0.2, heavy_above=0.6).heavy_above
        0.6
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    rules_below: float = Field(ge=0.0, le=1.0)
    heavy_above: float = Field(ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _ordered(self) -> Thresholds:
        if self.rules_below > self.heavy_above:
            raise RoutingInputError(
                field="rules_below", value=self.rules_below, expected=f"<= heavy_above ({self.heavy_above})"
            )
        return self


DEFAULT_THRESHOLDS = Thresholds(rules_below=0.10, heavy_above=0.45)
"""In force until the first calibration. With the default complexity weights an easy
request (fresh, complete, in-distribution features, a confident light model) scores
about 0.05, so only such requests fall below 0.10; above 0.45 nearly half the weight
of the hard signals is present (e.g. no features for a cold-start hotel during a spike)."""


class TierShares(BaseModel):
    """Target share of traffic per tier; the three shares sum to 1.

    Example:
        >>> TierShares().heavy
        0.15
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    rules: float = Field(default=0.35, ge=0.0, le=1.0)
    light: float = Field(default=0.50, ge=0.0, le=1.0)
    heavy: float = Field(default=0.15, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _sum_to_one(self) -> TierShares:
        total = self.rules + self.light + self.heavy
        if abs(total - 1.0) > _SHARE_SUM_TOLERANCE:
            raise RoutingInputError(field="rules+light+heavy", value=total, expected="shares summing to 1")
        return self


DEFAULT_SHARES = TierShares()


def _as_scores(scores: ArrayLike) -> NDArray[Any]:
    arr = np.asarray(scores, dtype=float).ravel()
    return np.asarray(arr[np.isfinite(arr)])


def thresholds_for_shares(
    scores: ArrayLike, shares: TierShares = DEFAULT_SHARES, *, min_samples: int = MIN_CALIBRATION_SAMPLES
) -> Thresholds:
    """Thresholds that give each tier its target share on ``scores`` (non-finite ones ignored).

    Raises:
        CalibrationError: fewer than ``min_samples`` finite scores.
    """
    arr = _as_scores(scores)
    if arr.size < min_samples:
        msg = f"calibration needs at least {min_samples} finite scores, got {arr.size}"
        raise CalibrationError(msg)
    rules_below = float(np.quantile(arr, shares.rules)) if shares.rules > 0 else 0.0
    heavy_above = float(np.quantile(arr, 1.0 - shares.heavy)) if shares.heavy > 0 else 1.0
    return Thresholds(rules_below=min(rules_below, heavy_above), heavy_above=heavy_above)


def route_many(scores: ArrayLike, thresholds: Thresholds) -> NDArray[Any]:
    """Vectorised routing: an array of tier names (non-finite scores go heavy)."""
    arr = np.asarray(scores, dtype=float).ravel()
    out = np.full(arr.shape, "light", dtype=object)
    out[arr < thresholds.rules_below] = "rules"
    out[(arr > thresholds.heavy_above) | ~np.isfinite(arr)] = "heavy"
    return out


def tier_shares(scores: ArrayLike, thresholds: Thresholds) -> dict[str, float]:
    """Observed share of each tier when ``scores`` are routed with ``thresholds``."""
    tiers = route_many(scores, thresholds)
    if tiers.size == 0:
        return dict.fromkeys(TIERS, 0.0)
    return {tier: float(np.mean(tiers == tier)) for tier in TIERS}
