"""Router health check: on a sample priced by every tier, did the router send the right requests up?

For each request we know the tier it was routed to and the price that the light and
the heavy model would have given (and optionally the rules price). With a relative
tolerance ``tol``:

* a **false positive** went to the heavy model although the light price was within
  ``tol`` of the heavy price (heavy compute bought nothing);
* a **false negative** stayed at the light model or the rules although the price served
  there differed from the heavy price by more than ``tol`` (the heavy model would have
  priced differently).

Example:
    >>> report = health_check(
    ...     scores=[0.1, 0.5, 0.9, 0.95],
    ...     tiers=["rules", "light", "heavy", "heavy"],
    ...     light_prices=[100.0, 100.0, 100.0, 100.0],
    ...     heavy_prices=[100.0, 120.0, 101.0, 150.0],
    ... )
    >>> report.false_positives, report.false_negatives, report.fp_rate, report.fn_rate
    (1, 1, 0.5, 0.5)
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import BaseModel, ConfigDict, Field

from routing.calibration import TIERS
from routing.errors import RoutingInputError

DEFAULT_REL_TOLERANCE = 0.01
"""Prices within 1% are the same decision for a guest (and for the flip-rate gate)."""


class HealthReport(BaseModel):
    """Counts and rates of the router's mistakes on one sample.

    Attributes:
        fp_rate: false positives / requests routed heavy.
        fn_rate: false negatives / requests kept at light or rules.
        fp_share, fn_share: the same counts over all requests.
        revenue_at_risk: sum over false negatives of (heavy revenue - served revenue), when given.
        mean_fn_gap: mean relative price gap of the false negatives (0.0 if none).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    n: int = Field(ge=0)
    rel_tolerance: float = Field(gt=0.0)
    tier_counts: dict[str, int]
    false_positives: int = Field(ge=0)
    false_negatives: int = Field(ge=0)
    fp_rate: float = Field(ge=0.0, le=1.0)
    fn_rate: float = Field(ge=0.0, le=1.0)
    fp_share: float = Field(ge=0.0, le=1.0)
    fn_share: float = Field(ge=0.0, le=1.0)
    mean_fn_gap: float = Field(ge=0.0)
    revenue_at_risk: float | None = None
    mean_score_fp: float | None = None
    mean_score_fn: float | None = None


def _column(name: str, values: ArrayLike | None, n: int | None) -> NDArray[Any]:
    arr = np.asarray(values, dtype=float).ravel()
    if n is not None and arr.size != n:
        raise RoutingInputError(field=name, value=f"length {arr.size}", expected=f"length {n} like scores")
    if not np.all(np.isfinite(arr)):
        raise RoutingInputError(field=name, value=arr[~np.isfinite(arr)][:3].tolist(), expected="finite numbers")
    return arr


def _rel_gap(a: NDArray[Any], b: NDArray[Any]) -> NDArray[Any]:
    if np.any(b <= 0):
        raise RoutingInputError(field="heavy_prices", value=b[b <= 0][:3].tolist(), expected="prices > 0")
    return np.asarray(np.abs(a - b) / b)


def _mean_or_none(values: NDArray[Any]) -> float | None:
    return float(values.mean()) if values.size else None


def _sample(
    scores: ArrayLike,
    tiers: ArrayLike,
    light_prices: ArrayLike,
    heavy_prices: ArrayLike,
    rules_prices: ArrayLike | None,
) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any], NDArray[Any], NDArray[Any]]:
    """Validated arrays: score, tier, light, heavy and served price (rules price on rules rows)."""
    score = _column("scores", scores, None)
    n = score.size
    tier = np.asarray(tiers, dtype=object).ravel()
    if tier.size != n:
        raise RoutingInputError(field="tiers", value=f"length {tier.size}", expected=f"length {n} like scores")
    unknown = sorted({str(t) for t in tier} - set(TIERS))
    if unknown:
        raise RoutingInputError(field="tiers", value=unknown[:3], expected=f"tiers in {list(TIERS)}")
    light = _column("light_prices", light_prices, n)
    heavy = _column("heavy_prices", heavy_prices, n)
    served = light.copy()
    if rules_prices is not None:
        rules = _column("rules_prices", rules_prices, n)
        served[tier == "rules"] = rules[tier == "rules"]
    return score, tier, light, heavy, served


def health_check(
    scores: ArrayLike,
    tiers: ArrayLike,
    light_prices: ArrayLike,
    heavy_prices: ArrayLike,
    *,
    rules_prices: ArrayLike | None = None,
    served_revenue: ArrayLike | None = None,
    heavy_revenue: ArrayLike | None = None,
    rel_tolerance: float = DEFAULT_REL_TOLERANCE,
) -> HealthReport:
    """Count false positives and false negatives of the router on a fully scored sample.

    Args:
        scores: complexity score per request.
        tiers: tier each request was routed to (``"rules"``, ``"light"`` or ``"heavy"``).
        light_prices: light-model price per request.
        heavy_prices: heavy-model price per request (> 0).
        rules_prices: rules price per request; rules-routed requests compare it (else the light price).
        served_revenue: revenue (or expected revenue) of what was served, for ``revenue_at_risk``.
        heavy_revenue: revenue had the heavy model priced it, for ``revenue_at_risk``.
        rel_tolerance: relative price gap up to which two prices are "the same".

    Raises:
        RoutingInputError: mismatched lengths, unknown tiers, non-finite values or a bad tolerance.
    """
    if not rel_tolerance > 0:
        raise RoutingInputError(field="rel_tolerance", value=rel_tolerance, expected="a number > 0")
    score, tier, light, heavy, served = _sample(scores, tiers, light_prices, heavy_prices, rules_prices)
    n = score.size
    is_heavy = tier == "heavy"
    fp = is_heavy & (_rel_gap(light, heavy) <= rel_tolerance)
    served_gap = _rel_gap(served, heavy)
    fn = ~is_heavy & (served_gap > rel_tolerance)
    n_heavy, n_kept = int(is_heavy.sum()), int((~is_heavy).sum())
    at_risk = None
    if served_revenue is not None and heavy_revenue is not None:
        gain = _column("heavy_revenue", heavy_revenue, n) - _column("served_revenue", served_revenue, n)
        at_risk = float(gain[fn].sum())
    return HealthReport(
        n=n,
        rel_tolerance=rel_tolerance,
        tier_counts={t: int((tier == t).sum()) for t in TIERS},
        false_positives=int(fp.sum()),
        false_negatives=int(fn.sum()),
        fp_rate=float(fp.sum() / n_heavy) if n_heavy else 0.0,
        fn_rate=float(fn.sum() / n_kept) if n_kept else 0.0,
        fp_share=float(fp.sum() / n) if n else 0.0,
        fn_share=float(fn.sum() / n) if n else 0.0,
        mean_fn_gap=float(served_gap[fn].mean()) if fn.any() else 0.0,
        revenue_at_risk=at_risk,
        mean_score_fp=_mean_or_none(score[fp]),
        mean_score_fn=_mean_or_none(score[fn]),
    )
