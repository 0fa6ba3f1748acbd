"""The demo's comparison on its own shoppers: pricestream, static, rules only, the myopic and the DP oracle."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from market import Market, MarketConfig, Offer, oracle_policy, static_policy
from market.evaluate import NetValueRecorder, offer_value, simulate_days
from pricestream.demo import revenue_lines
from pricestream.demo_revenue import comparison, rules_policy, run_oracle
from pricing.rules import RuleSet

RULES = (
    "min_price: 20\nmax_price: 900\ndefault_base_rate: 150\n"
    "occupancy_ladder:\n  - {occupancy_at_least: 0.0, factor: 1.0}\n  - {occupancy_at_least: 0.8, factor: 1.4}\n"
)


def _frame(market: Market, first: datetime, days: int, seed: int) -> pd.DataFrame:
    dp = run_oracle(market, first=first, days=days)
    rows = []
    for d in range(days):
        start = first + timedelta(days=d)
        static, oracle = (NetValueRecorder(market, p, dp.bid_price) for p in (static_policy(market),
                                                                             oracle_policy(market)))
        s = simulate_days(market, static, days=1, start=start, seed=seed + d).days[0]
        o = simulate_days(market, oracle, days=1, start=start, seed=seed + d).days[0]
        rows.append({"day": start.date(), "policy": s.revenue * 1.01, "static": s.revenue, "oracle": o.revenue,
                     "policy_expected": s.expected_revenue * 1.01, "static_expected": s.expected_revenue,
                     "oracle_expected": o.expected_revenue, "policy_net": static.total() * 1.01,
                     "static_net": static.total(), "oracle_net": oracle.total()})
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
    assert len(revenue_lines(f)) == 3 and lines[:3] == revenue_lines(f)
    assert lines[0].startswith("net of the rooms' value") and "(+1.0%)" in lines[0]  # _frame's policy_net
    dp_line = next(line for line in lines if line.strip().startswith("DP oracle"))
    assert dp_line.split()[3] == "1.000"
    static_line = next(line for line in lines if line.strip().startswith("static"))
    assert float(static_line.split()[2]) == round(f.static.sum() / table["DP oracle"]["revenue"], 3)
    net_col = 7  # name (2 words), booked, / DP, expected, / DP, net, / DP
    assert dp_line.split()[net_col] == "1.000"
    assert float(static_line.split()[5].replace(",", "")) == round(table["static"]["net"])


def test_with_no_bid_the_net_value_is_the_expected_revenue_of_the_offers_shown() -> None:
    market = Market(MarketConfig(hotels=1, horizon_days=20, seed=3))
    first = datetime(2026, 1, 10, tzinfo=UTC)
    free = NetValueRecorder(market, oracle_policy(market), bid=lambda _offer: 0.0)
    run = simulate_days(market, free, days=2, start=first, seed=4)
    assert run.total_offers > 100
    for day in run.days:  # DayAccumulator sums the same term over the views, rounded to the cent
        assert abs(free.net[day.day] - day.expected_revenue) < 0.01 and day.expected_revenue > 0
    dp = run_oracle(market, first=first, days=2)
    costed = NetValueRecorder(market, oracle_policy(market), bid=dp.bid_price)
    again = simulate_days(market, costed, days=2, start=first, seed=4)
    assert again.total_expected_revenue == run.total_expected_revenue  # the recorder does not change the prices
    assert 0 < costed.total() < run.total_expected_revenue  # rooms have a value: the net is below the revenue


def test_the_last_room_sold_at_the_base_rate_is_worth_less_net_than_booked() -> None:
    market = Market(MarketConfig(hotels=1, horizon_days=20, seed=3))
    dp = run_oracle(market, first=date(2026, 1, 10), days=1)
    at = datetime(2026, 1, 10, 12, tzinfo=UTC)
    cap = market.capacity("h0000", "standard")
    roomy = Offer("h0000", "standard", date(2026, 1, 25), at, "leisure", "direct", 15, rooms_left=cap, capacity=cap)
    last = roomy._replace(rooms_left=1)
    base = market.reference_price("h0000", "standard")
    assert dp.bid_price(last) > dp.bid_price(roomy) >= 0.0  # a nearly sold-out night's room is worth more
    booked = offer_value(market, last, base)
    net = offer_value(market, last, base, bid=dp.bid_price(last))
    # 15 days out, the last room is worth more to later shoppers (bid ~329) than its base rate (~93): a loss
    assert net < 0.0 < booked
    assert abs(net - booked * (base - dp.bid_price(last)) / base) < 1e-9
    assert offer_value(market, roomy, base, bid=dp.bid_price(roomy)) > net


def test_on_net_value_the_dp_oracle_scores_above_static_and_the_myopic_oracle() -> None:
    market = Market(MarketConfig(hotels=1, horizon_days=20, seed=3))
    first = datetime(2026, 1, 10, tzinfo=UTC)
    f = _frame(market, first, days=2, seed=5)
    table = comparison(f, market=market, seed=5, rules=RuleSet.from_yaml(RULES),
                       dp=run_oracle(market, first=first, days=2))
    assert table["DP oracle"]["net"] > table["static"]["net"] > 0
    assert table["DP oracle"]["net"] >= table["myopic oracle"]["net"]
    for v in table.values():  # the bid price is never negative: the net is at most the expected revenue
        assert v["net"] <= v["expected"] + 1e-6


def test_the_comparison_names_the_frames_missing_columns() -> None:
    market = Market(MarketConfig(hotels=1, horizon_days=20, seed=3))
    f = _frame(market, datetime(2026, 1, 10, tzinfo=UTC), days=1, seed=5).drop(columns=["static_net"])
    with pytest.raises(ValueError, match="static_net"):
        comparison(f, market=market, seed=5, rules=RuleSet.from_yaml(RULES))
