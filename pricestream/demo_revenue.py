"""The demo's revenue comparison: pricestream against static, rules only and the DP oracle, on the run's own shoppers.

The closed-loop demo measures pricestream (the deployed ``serve``), the static price
and the myopic oracle per simulated day on the same shoppers (seed ``seed + d`` on day
``d``, :func:`market.evaluate.simulate_days`). :func:`comparison_lines` adds,
on those same shoppers, the rules-only policy (the run's own rule file through the
real :class:`~pricing.scorer.Scorer` with no model tier; its features are the offer's
inventory, ``occupancy`` and ``rooms_left``, the inputs of the occupancy ladder and
the last-rooms rule) and the capacity-aware DP oracle
(:class:`market.DPOracle`), and prints one table: booked and expected
revenue per policy with its ratio to the DP oracle, and the expected value net of the
rooms' value: each offer's P(book) x (price - the DP oracle's bid price per room-night at
that offer) x rooms x nights (:class:`market.evaluate.NetValueRecorder`), which
credits a policy for rooms it keeps for later shoppers (booked revenue in a few days does not).

Example:
    >>> from datetime import UTC, datetime
    >>> import pandas as pd
    >>> from market import Market, MarketConfig, static_policy
    >>> from market.evaluate import NetValueRecorder, simulate_days
    >>> market = Market(MarketConfig(hotels=1, horizon_days=20, seed=3))
    >>> from market.evaluate import NetValueRecorder
    >>> dp = run_oracle(market, first=datetime(2026, 1, 10, tzinfo=UTC), days=1)
    >>> rec = NetValueRecorder(market, static_policy(market), dp.bid_price)
    >>> day = simulate_days(market, rec, days=1, start=datetime(2026, 1, 10, tzinfo=UTC), seed=5).days[0]
    >>> f = pd.DataFrame([{"day": day.day, "policy": day.revenue, "static": day.revenue, "oracle": day.revenue,
    ...                    "policy_expected": day.expected_revenue, "static_expected": day.expected_revenue,
    ...                    "oracle_expected": day.expected_revenue, "policy_net": rec.total(),
    ...                    "static_net": rec.total(), "oracle_net": rec.total()}])
    >>> rules = RuleSet.from_yaml("min_price: 20\\nmax_price: 900\\ndefault_base_rate: 150\\n")
    >>> table = comparison(f, market=market, seed=5, rules=rules, dp=dp)
    >>> list(table), table["static"]["revenue"] == day.revenue, table["static"]["net"] < day.expected_revenue
    (['pricestream', 'static', 'rules only', 'myopic oracle', 'DP oracle'], True, True)
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pandas as pd

from events.models import PricingRequest
from market import DPOracle, Market
from market.evaluate import NetValueRecorder, simulate_days
from market.shoppers import Offer, Policy
from pricing.feature_source import MemoryFeatureSource
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from routing.router import TieredRouter

FRAME_POLICIES = {"pricestream": "policy", "static": "static", "myopic oracle": "oracle"}
"""Policies the demo's per-day frame already holds -> their column (``<column>_expected`` the expectation,
``<column>_net`` the expected value net of the rooms' value)."""
_DEADLINE_MS = 60_000.0  # an in-process replay is not latency-bound: a busy host must not degrade it


def rules_policy(market: Market, rules: RuleSet) -> Policy:
    """The rules tier alone as a simulator policy, fed the offer's inventory as its features."""
    source = MemoryFeatureSource()
    scorer = Scorer(ScorerConfig(deadline_ms=_DEADLINE_MS, stale_after_s=None), rules=rules, feature_source=source,
                    light=None, heavy=None, router=TieredRouter())

    def policy(offer: Offer) -> float:
        source.put(offer.hotel_id, offer.room_type, offer.stay_date,
                   {"rooms_left": float(offer.rooms_left),
                    "occupancy": 1.0 - offer.rooms_left / offer.capacity if offer.capacity else None})
        request = PricingRequest(hotel_id=offer.hotel_id, room_type=offer.room_type, stay_date=offer.stay_date,
                                 nights=offer.nights, channel=offer.channel, event_time=offer.at)  # type: ignore[arg-type]
        return scorer.price(request).price

    return policy


def run_oracle(market: Market, *, first: datetime | date, days: int) -> DPOracle:
    """The DP oracle for a run of ``days`` simulated days from ``first``: its nights and the horizon after them.

    The one oracle of a demo run: it prices the comparison's DP row and its bid prices value the rooms of
    every policy's offers (the ``net`` column), so build it once per run (its values are solved lazily).
    """
    day = first.date() if isinstance(first, datetime) else first
    last = day + timedelta(days=days - 1 + market.config.horizon_days + 2)
    return DPOracle(market, first_night=day, last_night=last)


def comparison(
    f: pd.DataFrame, *, market: Market, seed: int, rules: RuleSet, dp: DPOracle | None = None
) -> dict[str, dict[str, float]]:
    """Policy -> ``{"revenue", "expected", "net"}`` summed over the frame's days (day ``d`` on seed ``seed + d``).

    ``net`` is the expected value of the offers shown net of the rooms' value (the DP oracle's bid price
    per room-night at each offer, on that policy's path); ``dp`` is the run's oracle (:func:`run_oracle`,
    built for the frame's days when not given).

    Raises:
        ValueError: the frame lacks a column of the policies it holds (named in the message).
    """
    days: list[date] = [pd.Timestamp(d).date() for d in f["day"]]
    needed = [f"{col}{suffix}" for col in FRAME_POLICIES.values() for suffix in ("", "_expected", "_net")]
    missing = [c for c in needed if c not in f.columns]
    if missing:
        msg = f"the demo's per-day frame lacks columns {missing}: expected {needed} (columns: {list(f.columns)})"
        raise ValueError(msg)
    out = {name: {"revenue": float(f[col].sum()), "expected": float(f[f"{col}_expected"].sum()),
                  "net": float(f[f"{col}_net"].sum())}
           for name, col in FRAME_POLICIES.items()}
    if dp is None:
        dp = run_oracle(market, first=min(days), days=(max(days) - min(days)).days + 1)
    extra = {"rules only": rules_policy(market, rules), "DP oracle": dp.policy()}
    for name, policy in extra.items():
        rec = NetValueRecorder(market, policy, dp.bid_price)
        runs = [simulate_days(market, rec, days=1, start=datetime(d.year, d.month, d.day, tzinfo=UTC),
                              seed=seed + i).days[0] for i, d in enumerate(days)]
        out[name] = {"revenue": sum(r.revenue for r in runs), "expected": sum(r.expected_revenue for r in runs),
                     "net": rec.total()}
    order = ("pricestream", "static", "rules only", "myopic oracle", "DP oracle")
    return {name: out[name] for name in order}


def comparison_lines(
    f: pd.DataFrame, *, market: Market, seed: int, rules: RuleSet, dp: DPOracle | None = None
) -> list[str]:
    """The comparison as report lines: a header and one line per policy (ratios to the DP oracle)."""
    table = comparison(f, market=market, seed=seed, rules=rules, dp=dp)
    best = table["DP oracle"]
    net = "net of rooms' value"
    lines = [f"revenue of this run's shoppers, {len(f)} days (same shoppers per policy; ratio to the DP oracle):",
             f"  {'policy':14s} {'booked':>12s} {'/ DP':>6s} {'expected':>12s} {'/ DP':>6s} "
             f"{net:>19s} {'/ DP':>6s}"]
    for name, v in table.items():
        lines.append(f"  {name:14s} {v['revenue']:12,.0f} {v['revenue'] / best['revenue']:6.3f} "
                     f"{v['expected']:12,.0f} {v['expected'] / best['expected']:6.3f} "
                     f"{v['net']:19,.0f} {v['net'] / best['net']:6.3f}")
    lines.append("  (expected: the truth's expected revenue of the offers shown; net of rooms' value: the same less "
                 "the DP oracle's bid price per room-night at each offer, so rooms kept for later shoppers count)")
    return lines
