"""Named market scenarios: each changes the truth from its start, and only what it names."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import numpy as np
import pytest

from market import Market, MarketConfig, simulate
from market.errors import SimulatorError
from market.scenarios import NAMES, ScenarioMarket, scenario

BASE = MarketConfig(hotels=2, horizon_days=60, seed=4)
START = datetime(2026, 9, 1, tzinfo=UTC)
NIGHT = date(2026, 9, 30)


def _probe(market: Market, at: datetime, night: date = NIGHT) -> tuple[float, float, float]:
    """(arrival rate, competitor median, booking probability at 150) of one key at ``at``."""
    return (market.arrival_rate("h0001", "standard", night, at),
            market.competitor_rate("h0001", "standard", night, at),
            market.booking_prob("h0001", "standard", night, at, 150.0, segment="leisure"))


def test_every_name_builds_and_the_control_is_the_unchanged_truth() -> None:
    for name in NAMES:
        s = scenario(name, start=START if name != "off_season" else None)
        assert isinstance(s.market(BASE), ScenarioMarket)
        assert s.bootstrap_start < s.start
    control = scenario("stationary", start=START)
    at = START + timedelta(days=3)
    assert _probe(control.market(BASE), at) == _probe(control.bootstrap_market(BASE), at)
    assert control.bootstrap_start == START - timedelta(days=120)


def test_off_season_trains_on_summer_and_runs_in_november() -> None:
    s = scenario("off_season")
    assert (s.bootstrap_start, s.start) == (datetime(2026, 5, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC))
    m = s.market(BASE)
    july, november = date(2026, 7, 15).toordinal(), date(2026, 11, 15).toordinal()
    assert m.season(0, july) == pytest.approx(1.25, abs=0.01) and m.season(0, november) < 0.9  # 0.87


def test_demand_shock_doubles_five_nights_three_weeks_out_and_nothing_else() -> None:
    s = scenario("demand_shock", start=START)
    assert s.demand_nights == tuple(date(2026, 9, 22) + timedelta(days=i) for i in range(5))
    shocked, plain = s.market(BASE), s.bootstrap_market(BASE)
    at = START + timedelta(days=2)
    assert shocked.arrival_rate("h0000", "deluxe", date(2026, 9, 24), at) == pytest.approx(
        2.0 * plain.arrival_rate("h0000", "deluxe", date(2026, 9, 24), at))
    assert _probe(shocked, at) == _probe(plain, at)  # 30 September is not an event night


def test_price_war_is_twenty_percent_for_three_weeks_then_over() -> None:
    s = scenario("price_war", start=START)
    war, peace = s.market(BASE), s.bootstrap_market(BASE)
    for days, ratio in ((-1, 1.0), (1, 0.8), (20, 0.8), (22, 1.0)):
        at = START + timedelta(days=days)
        assert war.competitor_rate("h0001", "standard", NIGHT, at) == pytest.approx(
            ratio * peace.competitor_rate("h0001", "standard", NIGHT, at), rel=0.01)
    during = START + timedelta(days=5)
    assert war.booking_prob("h0001", "standard", NIGHT, during, 150.0, segment="leisure") < peace.booking_prob(
        "h0001", "standard", NIGHT, during, 150.0, segment="leisure")


def test_channel_shift_moves_fifteen_points_of_shoppers_to_online_travel_agencies() -> None:
    s = scenario("channel_shift", start=START)
    config = BASE.model_copy(update={"hotels": 1, "horizon_days": 20})

    def ota_share(market: Market) -> float:
        channels = [e.channel for e in simulate(market, duration=timedelta(days=2), start=START, rng_seed=3)
                    if e.event_type == "search"]
        return float(np.mean([c == "ota" for c in channels]))

    before, after = ota_share(s.bootstrap_market(config)), ota_share(s.market(config))
    assert after - before == pytest.approx(0.15, abs=0.03)


def test_unknown_name_and_naive_start_are_refused() -> None:
    with pytest.raises(SimulatorError, match="one of"):
        scenario("meteor")
    with pytest.raises(SimulatorError, match="timezone-aware"):
        scenario("price_war", start=datetime(2026, 9, 1))  # noqa: DTZ001 - naive on purpose
