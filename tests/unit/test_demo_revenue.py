"""The demo's comparison on its own shoppers: pricestream, static, rules only, the myopic and the DP oracle."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pandas as pd

from events.simulator import Market, MarketConfig, Offer, oracle_policy, static_policy
from events.simulator.evaluate import simulate_days
from pricestream.demo import revenue_lines
from pricestream.demo_revenue import comparison, rules_policy
from pricing.rules import RuleSet

RULES = (
    "min_price: 20\nmax_price: 900\ndefault_base_rate: 150\n"
    "occupancy_ladder:\n  - {occupancy_at_least: 0.0, factor: 1.0}\n  - {occupancy_at_least: 0.8, factor: 1.4}\n"
)


def _frame(market: Market, first: datetime, days: int, seed: int) -> pd.DataFrame:
    rows = []
    for d in range(days):
        start = first + timedelta(days=d)
        s = simulate_days(market, static_policy(market), days=1, start=start, seed=seed + d).days[0]
        o = simulate_days(market, oracle_policy(market), days=1, start=start, seed=seed + d).days[0]
        rows.append({"day": start.date(), "policy": s.revenue * 1.01, "static": s.revenue, "oracle": o.revenue,
                     "policy_expected": s.expected_revenue * 1.01, "static_expected": s.expected_revenue,
                     "oracle_expected": o.expected_revenue})
    return pd.DataFrame(rows)


def test_the_rules_policy_reads_the_offers_inventory() -> None:
    market = Market(MarketConfig(hotels=1, horizon_days=20, seed=3))
    policy = rules_policy(market, RuleSet.from_yaml(RULES))
    at = datetime(2026, 1, 10, 12, tzinfo=UTC)
    offer = Offer("h0000", "standard", date(2026, 1, 20), at, "leisure", "direct", 10, rooms_left=10, capacity=20)
    assert abs(policy(offer) - 150.0) < 1e-6
    assert abs(policy(offer._replace(rooms_left=3)) - 210.0) < 1e-6  # 85% sold: the 0.8 step's 1.4


def test_the_comparison_replays_the_runs_days_on_the_same_shoppers(tmp_path: Path) -> None:
    market = Market(MarketConfig(hotels=1, horizon_days=20, seed=3))
    first = datetime(2026, 1, 10, tzinfo=UTC)
    f = _frame(market, first, days=2, seed=5)
    rules = RuleSet.from_yaml(RULES)
    table = comparison(f, market=market, seed=5, rules=rules)
    by_hand = sum(simulate_days(market, rules_policy(market, rules), days=1, start=first + timedelta(days=d),
                                seed=5 + d).days[0].revenue for d in range(2))
    assert abs(table["rules only"]["revenue"] - by_hand) < 1e-6 and by_hand > 0
    assert table["rules only"]["revenue"] != table["static"]["revenue"]  # the ladder moved prices
    assert table["pricestream"]["revenue"] == f.policy.sum() and table["static"]["revenue"] == f.static.sum()
    assert table["DP oracle"]["revenue"] > 0
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(RULES)
    lines = revenue_lines(f, market=market, seed=5, rules_file=rules_file)
    assert len(revenue_lines(f)) == 2 and lines[:2] == revenue_lines(f)
    dp_line = next(line for line in lines if line.strip().startswith("DP oracle"))
    assert dp_line.split()[3] == "1.000"
    static_line = next(line for line in lines if line.strip().startswith("static"))
    assert float(static_line.split()[2]) == round(f.static.sum() / table["DP oracle"]["revenue"], 3)
