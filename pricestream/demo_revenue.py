"""The demo's revenue comparison: pricestream against static, rules only and the DP oracle, on the run's own shoppers.

The closed-loop demo measures pricestream (the deployed ``serve``), the static price
and the myopic oracle per simulated day on the same shoppers (seed ``seed + d`` on day
``d``, :func:`events.simulator.evaluate.simulate_days`). :func:`comparison_lines` adds,
on those same shoppers, the rules-only policy (the run's own rule file through the
real :class:`~pricing.scorer.Scorer` with no model tier; its features are the offer's
inventory, ``occupancy`` and ``rooms_left``, the inputs of the occupancy ladder and
the last-rooms rule) and the capacity-aware DP oracle
(:class:`events.simulator.DPOracle`), and prints one table: booked and expected
revenue per policy with its ratio to the DP oracle.

Example:
    >>> from datetime import UTC, datetime
    >>> import pandas as pd
    >>> from events.simulator import Market, MarketConfig, static_policy
    >>> from events.simulator.evaluate import simulate_days
    >>> market = Market(MarketConfig(hotels=1, horizon_days=20, seed=3))
    >>> day = simulate_days(market, static_policy(market), days=1, start=datetime(2026, 1, 10, tzinfo=UTC),
    ...                     seed=5).days[0]
    >>> f = pd.DataFrame([{"day": day.day, "policy": day.revenue, "static": day.revenue, "oracle": day.revenue,
    ...                    "policy_expected": day.expected_revenue, "static_expected": day.expected_revenue,
    ...                    "oracle_expected": day.expected_revenue}])
    >>> rules = RuleSet.from_yaml("min_price: 20\\nmax_price: 900\\ndefault_base_rate: 150\\n")
    >>> table = comparison(f, market=market, seed=5, rules=rules)
    >>> list(table), table["static"]["revenue"] == day.revenue
    (['pricestream', 'static', 'rules only', 'myopic oracle', 'DP oracle'], True)
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pandas as pd

from events.models import PricingRequest
from events.simulator import DPOracle, Market
from events.simulator.evaluate import simulate_days
from events.simulator.shoppers import Offer, Policy
from pricing.feature_source import MemoryFeatureSource
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from routing.router import TieredRouter

FRAME_POLICIES = {"pricestream": "policy", "static": "static", "myopic oracle": "oracle"}
"""Policies the demo's per-day frame already holds -> their column (``<column>_expected`` the expectation)."""
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


def comparison(f: pd.DataFrame, *, market: Market, seed: int, rules: RuleSet) -> dict[str, dict[str, float]]:
    """Policy -> ``{"revenue", "expected"}`` summed over the frame's days (day ``d`` on seed ``seed + d``)."""
    days: list[date] = [pd.Timestamp(d).date() for d in f["day"]]
    out = {name: {"revenue": float(f[col].sum()), "expected": float(f[f"{col}_expected"].sum())}
           for name, col in FRAME_POLICIES.items()}
    dp = DPOracle(market, first_night=min(days),
                  last_night=max(days) + timedelta(days=market.config.horizon_days + 2))
    extra = {"rules only": rules_policy(market, rules), "DP oracle": dp.policy()}
    for name, policy in extra.items():
        runs = [simulate_days(market, policy, days=1, start=datetime(d.year, d.month, d.day, tzinfo=UTC),
                              seed=seed + i).days[0] for i, d in enumerate(days)]
        out[name] = {"revenue": sum(r.revenue for r in runs), "expected": sum(r.expected_revenue for r in runs)}
    order = ("pricestream", "static", "rules only", "myopic oracle", "DP oracle")
    return {name: out[name] for name in order}


def comparison_lines(f: pd.DataFrame, *, market: Market, seed: int, rules: RuleSet) -> list[str]:
    """The comparison as report lines: a header and one line per policy (ratios to the DP oracle)."""
    table = comparison(f, market=market, seed=seed, rules=rules)
    best = table["DP oracle"]
    lines = [f"revenue of this run's shoppers, {len(f)} days (same shoppers per policy; ratio to the DP oracle):",
             f"  {'policy':14s} {'booked':>12s} {'/ DP':>6s} {'expected':>12s} {'/ DP':>6s}"]
    for name, v in table.items():
        lines.append(f"  {name:14s} {v['revenue']:12,.0f} {v['revenue'] / best['revenue']:6.3f} "
                     f"{v['expected']:12,.0f} {v['expected'] / best['expected']:6.3f}")
    lines.append("  (the DP oracle keeps rooms for later shoppers: over a few days' bookings the myopic oracle can "
                 "book more; the DP's edge is in the nights that sell out)")
    return lines
