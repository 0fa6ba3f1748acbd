"""The demo's report on closed nights: pricestream, static, rules only and the DP oracle on the same shoppers."""

from __future__ import annotations

import functools
from datetime import UTC, date, datetime

from market import Market, MarketConfig, Offer, static_policy
from market.closed_nights import StayNights, play
from market.evaluate import NetValueRecorder, offer_value
from pricestream.demo import phases_done
from pricestream.demo_revenue import (
    TABLE_HEADER,
    PolicyNights,
    compare,
    night_lines,
    nights_oracle,
    ranking_lines,
    revpar_line,
    rules_policy,
)
from pricing.rules import RuleSet

RULES = (
    "min_price: 20\nmax_price: 900\ndefault_base_rate: 150\n"
    "occupancy_ladder:\n  - {occupancy_at_least: 0.0, factor: 1.0}\n  - {occupancy_at_least: 0.8, factor: 1.4}\n"
)
MARKET = Market(MarketConfig(hotels=1, horizon_days=20, seed=3, stays_hold_nights=True))
NIGHTS = StayNights(first=date(2026, 2, 1), count=3, lead_in=0, window_days=20)


@functools.cache
def _table(seed: int = 5) -> dict[str, PolicyNights]:
    dp = nights_oracle(MARKET, NIGHTS)
    cheap = NetValueRecorder(MARKET, lambda o: 0.8 * MARKET.reference_price(o.hotel_id, o.room_type), dp.bid_price)
    mine = PolicyNights(play(MARKET, cheap, NIGHTS, seed=seed, background=True), cheap.total())
    return compare(MARKET, NIGHTS, seed=seed, rules=RuleSet.from_yaml(RULES), dp=dp, pricestream=mine)


def test_the_rules_policy_reads_the_offers_inventory() -> None:
    policy = rules_policy(MARKET, RuleSet.from_yaml(RULES))
    at = datetime(2026, 1, 10, 12, tzinfo=UTC)
    offer = Offer("h0000", "standard", date(2026, 1, 20), at, "leisure", "direct", 10, rooms_left=10, capacity=20)
    assert abs(policy(offer) - 150.0) < 1e-6
    assert abs(policy(offer._replace(rooms_left=3)) - 210.0) < 1e-6  # 85% sold: the 0.8 step's 1.4


def test_the_comparison_plays_the_same_shoppers_for_every_policy() -> None:
    table = _table()
    assert list(table) == ["pricestream", "static", "rules only", "DP oracle"]
    by_hand = play(MARKET, static_policy(MARKET), NIGHTS, seed=5, background=True)
    assert by_hand.per_night() == table["static"].ledger.per_night()
    history = [p.ledger.history_rooms("h0000", "standard", NIGHTS.first) for p in table.values()]
    assert len(set(history)) == 1  # rooms sold before the window: the same for every policy
    assert table["DP oracle"].net >= table["static"].net > 0  # the DP values the rooms it keeps
    assert table["pricestream"].total.adr < table["static"].total.adr  # 20% under the static price, whatever sold
    for pol in table.values():
        assert pol.ledger.closed()


def test_the_first_line_is_revpar_against_static() -> None:
    table = _table()
    line = revpar_line(table, hotels=1)
    mine, static = table["pricestream"].total.revpar, table["static"].total.revpar
    words = line.split()
    assert words[:2] == ["RevPAR", "pricestream"] and float(words[2]) == round(mine, 2)
    assert words[3:5] == ["vs", "static"] and float(words[5]) == round(static, 2)
    assert words[6] == f"({(mine / static - 1) * 100:+.1f}%)"
    assert line.endswith("over 3 closed nights, 1 hotels")


def test_the_night_table_holds_the_hotel_arithmetic() -> None:
    table = _table()
    lines = night_lines(table)
    assert lines[1] == TABLE_HEADER
    rows = [line.split() for line in lines[2:]]
    assert len(rows) == 3 * 4 + 4  # a row per night per policy, then the totals
    for row in rows:
        policy = " ".join(row[1:-6])
        revenue, sold, avail, occ, adr, revpar = (float(x) for x in row[-6:])
        assert policy in table and 0.0 <= occ <= 1.0
        assert abs(revpar - revenue / avail) < 0.006 and abs(occ - sold / avail) < 0.0006
        assert abs(adr * occ - revpar) <= adr * 0.0005 + 0.006  # occupancy is printed to 3 places
    totals = {" ".join(r[1:-6]): r for r in rows if r[0] == "total"}
    for name, pol in table.items():
        nights = [r for r in rows if r[0] != "total" and " ".join(r[1:-6]) == name]
        assert abs(sum(float(r[-6]) for r in nights) - float(totals[name][-6])) < 0.05
        assert int(float(totals[name][-4])) == 3 * pol.ledger.capacity()


def test_ranking_names_every_other_policy_and_the_net_share_of_the_dp() -> None:
    lines = ranking_lines(_table())
    assert all(name in lines[0] for name in ("static", "rules only", "DP oracle"))
    assert "DP oracle" in lines[1] and "(1.000 of the DP)" in lines[1]


def test_the_last_room_sold_at_the_base_rate_is_worth_less_net_than_booked() -> None:
    dp = nights_oracle(MARKET, NIGHTS)
    at = datetime(2026, 1, 20, 12, tzinfo=UTC)
    cap = MARKET.capacity("h0000", "standard")
    roomy = Offer("h0000", "standard", date(2026, 2, 2), at, "leisure", "direct", 13, rooms_left=cap, capacity=cap)
    last = roomy._replace(rooms_left=1)
    base = MARKET.reference_price("h0000", "standard")
    assert dp.bid_price(last) > dp.bid_price(roomy) >= 0.0  # a nearly sold-out night's room is worth more
    booked = offer_value(MARKET, last, base)
    net = offer_value(MARKET, last, base, bid=dp.bid_price(last))
    assert net < booked
    assert abs(net - booked * (base - dp.bid_price(last)) / base) < 1e-9


def test_progress_messages_tell_the_phases_done() -> None:
    assert phases_done("phase 4/6 done (812 decisions): labels") == 4
    assert phases_done("phase 4/6: shoppers of 2027-01-01 .. 2027-01-09") is None
    assert phases_done("stopping every process") is None
