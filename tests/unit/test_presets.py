"""Market presets: resort and city reproduce the Hotel Booking Demand figures; flat is the old default."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from typer.testing import CliRunner

from market import Market, MarketConfig
from market.calibration import check, measure, occupancy
from market.errors import UnknownKeyError
from market.generator import Simulation
from market.presets import preset, targets
from pricestream.cli import app


@pytest.mark.parametrize("name", ["resort", "city"])
@pytest.mark.parametrize(("hotels", "seed"), [(3, 0), (5, 4)])
def test_calibration_check_passes(name: str, hotels: int, seed: int) -> None:
    checks = check(name, Market(preset(name, hotels=hotels, seed=seed)), seed=seed + 1)
    assert len(checks) == 17 and "occupancy" in {c.name for c in checks}
    assert [c.name for c in checks if not c.ok] == []


def test_the_check_can_fail_a_market_that_is_off_target() -> None:
    flat = Market(MarketConfig(hotels=3, seed=0))  # the old market: 1.3x price swing, 6-55 day windows
    missed = {c.name for c in check("resort", flat) if not c.ok}
    assert {"price_month_min", "lead_mean", "lead_p90", "cancel_rate", "share_online_ta"} <= missed


def test_resort_swings_more_than_the_city_and_cancellations_follow_the_dataset() -> None:
    resort = measure(Market(preset("resort", hotels=3, seed=2)), n=4000, seed=1)
    city = measure(Market(preset("city", hotels=3, seed=2)), n=4000, seed=1)
    swing = {name: f["price_month_max"] / f["price_month_min"] for name, f in (("resort", resort), ("city", city))}
    assert swing["resort"] == pytest.approx(186.8 / 48.3, rel=0.15)
    assert swing["city"] == pytest.approx(121.6 / 82.6, rel=0.1)
    assert city["cancel_rate"] - resort["cancel_rate"] == pytest.approx(0.417 - 0.278, abs=0.04)


def test_occupancy_counts_stays_net_of_cancellations_and_capacity() -> None:
    city = preset("city", hotels=2, seed=0)
    net = occupancy(Market(city), step=5)
    gross = occupancy(Market(city.model_copy(update={"warm_start_net": False})), step=5)
    assert 0.6 <= net <= 0.8
    assert gross > net + 0.05  # the city cancels 42% of its bookings
    crowded = occupancy(Market(city.model_copy(update={"shoppers_per_room_night": 50.0})), step=5)
    assert net < crowded <= 1.0  # capped at the rooms


def test_warm_start_fills_along_the_booking_curve_not_months_ahead() -> None:
    market = Market(preset("city", hotels=1, seed=0))
    sim = Simulation(market, start=datetime(2026, 4, 17, tzinfo=UTC), duration=timedelta(hours=1), rng_seed=0)
    next(iter(sim))
    left = [
        sum(sim.rooms_left("h0000", rt, date(2026, 4, 17) + timedelta(days=d)) for rt in market.config.room_types)
        / sum(market.capacity("h0000", rt) for rt in market.config.room_types)
        for d in range(1, 121)
    ]
    near, far = sum(left[:20]) / 20, sum(left[100:]) / 20
    assert near < far  # nights close to arrival have sold more of their rooms
    assert far > 0.4  # nights 100-120 days out are far from sold out at the static price


def test_flat_preset_is_the_default_market_and_unknown_presets_are_refused() -> None:
    assert preset("flat") == MarketConfig() and targets("flat") == {}
    assert preset("city", hotels=2).hotels == 2
    with pytest.raises(UnknownKeyError, match="preset"):
        preset("beach")


def test_cli_prints_each_figure_and_the_verdict() -> None:
    result = CliRunner().invoke(app, ["market", "calibrate", "--preset", "city", "--hotels", "3", "--offers", "4000"])
    assert result.exit_code == 0, result.output
    assert "lead_p90" in result.output and "17/17 figures within tolerance" in result.output
    bad = CliRunner().invoke(app, ["market", "calibrate", "--preset", "beach"])
    assert bad.exit_code == 1 and "beach" in bad.output
