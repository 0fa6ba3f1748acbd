"""Cost-vs-revenue curve: how much heavy compute can we save, and what revenue does it cost?

On a sample where every request was priced by every tier (revenue of each tier's
price known, e.g. against the simulator's ground truth), sweep the heavy share from
0% to 100%: the highest-scoring requests go heavy, the lowest ``rules_share`` go to
the rules and the rest to the light model. Each point reports compute saved and
revenue lost relative to sending everything to the heavy model.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> scores = rng.uniform(size=1_000)
    >>> heavy = np.full(1_000, 100.0)
    >>> light = heavy - 10.0 * (scores > 0.8)   # the light model loses only on hard requests
    >>> points = cost_revenue_curve(scores, {"light": light, "heavy": heavy}, steps=11)
    >>> best = best_point(points, max_revenue_loss=0.005)
    >>> best.heavy_share, round(best.compute_saved, 3)
    (0.2, 0.733)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import BaseModel, ConfigDict, Field

from routing.errors import RoutingInputError


class TierCosts(BaseModel):
    """Compute cost per request of each tier, in arbitrary units.

    The defaults are placeholders (rules are free, the heavy ensemble about twelve
    light-model calls); replace them by ratios measured with the scorer's benchmark.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    rules: float = Field(default=0.0, ge=0.0)
    light: float = Field(default=1.0, ge=0.0)
    heavy: float = Field(default=12.0, gt=0.0)


class CurvePoint(BaseModel):
    """One point of the curve.

    Attributes:
        heavy_share: share of requests sent to the heavy model.
        heavy_above: score cut-off that gives that share on this sample.
        compute_saved: ``1 - cost / cost(all heavy)``.
        revenue_lost: ``1 - revenue / revenue(all heavy)`` (negative if cheaper tiers earn more).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    heavy_share: float
    rules_share: float
    heavy_above: float
    compute_cost: float
    compute_saved: float
    revenue: float
    revenue_lost: float


def _revenues(revenue_by_tier: Mapping[str, ArrayLike], n: int, *, need_rules: bool) -> dict[str, NDArray[Any]]:
    needed = ("rules", "light", "heavy") if need_rules else ("light", "heavy")
    out: dict[str, NDArray[Any]] = {}
    for tier in needed:
        if tier not in revenue_by_tier:
            raise RoutingInputError(
                field="revenue_by_tier", value=sorted(revenue_by_tier), expected=f"keys {list(needed)}"
            )
        arr = np.asarray(revenue_by_tier[tier], dtype=float).ravel()
        if arr.size != n or not np.all(np.isfinite(arr)):
            raise RoutingInputError(
                field=f"revenue_by_tier[{tier!r}]", value=f"length {arr.size}", expected=f"{n} finite values"
            )
        out[tier] = arr
    return out


def cost_revenue_curve(
    scores: ArrayLike,
    revenue_by_tier: Mapping[str, ArrayLike],
    *,
    costs: TierCosts | None = None,
    rules_share: float = 0.0,
    steps: int = 21,
) -> list[CurvePoint]:
    """Sweep the heavy share over ``steps`` evenly spaced values from 0 to 1.

    Args:
        scores: complexity score per request.
        revenue_by_tier: revenue per request under each tier's price (``"rules"`` needed
            only when ``rules_share > 0``).
        costs: compute cost per tier (``TierCosts()`` when ``None``).
        rules_share: share of lowest-scoring requests given to the rules (shrinks when the
            heavy share leaves less room).
        steps: number of points (>= 2).
    """
    costs = TierCosts() if costs is None else costs
    score = np.asarray(scores, dtype=float).ravel()
    n = score.size
    if n == 0 or steps < 2 or not 0.0 <= rules_share <= 1.0:
        raise RoutingInputError(
            field="scores/steps/rules_share",
            value=(n, steps, rules_share),
            expected="n > 0, steps >= 2, share in [0,1]",
        )
    rev = _revenues(revenue_by_tier, n, need_rules=rules_share > 0)
    order = np.argsort(-score, kind="stable")  # hardest first
    base_revenue = float(rev["heavy"].sum())
    base_cost = costs.heavy * n
    points = []
    for share in np.linspace(0.0, 1.0, steps):
        k = int(round(share * n))
        m = min(int(round(rules_share * n)), n - k)
        tier_rank = np.full(n, "light", dtype=object)
        tier_rank[:k] = "heavy"
        tier_rank[n - m :] = "rules"
        tier = np.empty(n, dtype=object)
        tier[order] = tier_rank
        revenue = sum(float(r[tier == t].sum()) for t, r in rev.items())
        cost = sum(getattr(costs, t) * float((tier == t).sum()) for t in ("rules", "light", "heavy"))
        points.append(
            CurvePoint(
                heavy_share=round(float(share), 6),
                rules_share=m / n,
                heavy_above=float(score[order[k]]) if k < n else float(score.min()),
                compute_cost=cost,
                compute_saved=1.0 - cost / base_cost,
                revenue=revenue,
                revenue_lost=1.0 - revenue / base_revenue if base_revenue else 0.0,
            )
        )
    return points


def best_point(points: Sequence[CurvePoint], max_revenue_loss: float = 0.01) -> CurvePoint:
    """The point that saves most compute while losing at most ``max_revenue_loss`` of revenue.

    Raises:
        RoutingInputError: no point meets the revenue bound.
    """
    ok = [p for p in points if p.revenue_lost <= max_revenue_loss]
    if not ok:
        raise RoutingInputError(
            field="max_revenue_loss", value=max_revenue_loss, expected="a bound met by at least one point"
        )
    return max(ok, key=lambda p: (p.compute_saved, -p.revenue_lost))


def plot_curve(points: Sequence[CurvePoint], path: str | Path, *, max_revenue_loss: float = 0.01) -> Path:
    """Write the curve as a PNG (matplotlib, Agg canvas; no global backend change).

    x: compute saved (%), y: revenue lost (%); each point labelled with its heavy share,
    the best point under ``max_revenue_loss`` circled.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.5), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    xs = [100 * p.compute_saved for p in points]
    ys = [100 * p.revenue_lost for p in points]
    ax.plot(xs, ys, marker="o", markersize=3, linewidth=1.2, label="heavy share sweep")
    for p, x, y in zip(points, xs, ys, strict=True):
        ax.annotate(f"{100 * p.heavy_share:.0f}%", (x, y), fontsize=6, xytext=(2, 2), textcoords="offset points")
    ax.axhline(100 * max_revenue_loss, color="grey", linestyle="--", linewidth=0.8, label="revenue-loss budget")
    ok = [p for p in points if p.revenue_lost <= max_revenue_loss]
    if ok:
        best = best_point(ok, max_revenue_loss)
        ax.scatter(
            [100 * best.compute_saved],
            [100 * best.revenue_lost],
            s=120,
            facecolors="none",
            edgecolors="red",
            label=f"best: heavy {100 * best.heavy_share:.0f}%",
        )
    ax.set_xlabel("compute saved vs all-heavy (%)")
    ax.set_ylabel("revenue lost vs all-heavy (%)")
    ax.set_title("Routing: compute saved vs revenue lost")
    ax.grid(True, linewidth=0.3)
    ax.legend(fontsize=7)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    return out
