"""Market presets: resort and city reproduce the Hotel Booking Demand figures; flat is the old default."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from events.simulator import Market, MarketConfig
from events.simulator.calibration import check, measure
from events.simulator.errors import UnknownKeyError
from events.simulator.presets import preset, targets
from pricestream.cli import app


@pytest.mark.parametrize("name", ["resort", "city"])
@pytest.mark.parametrize(("hotels", "seed"), [(3, 0), (5, 4)])
def test_calibration_check_passes(name: str, hotels: int, seed: int) -> None:
    checks = check(name, Market(preset(name, hotels=hotels, seed=seed)), seed=seed + 1)
    assert len(checks) == 16
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


def test_flat_preset_is_the_default_market_and_unknown_presets_are_refused() -> None:
    assert preset("flat") == MarketConfig() and targets("flat") == {}
    assert preset("city", hotels=2).hotels == 2
    with pytest.raises(UnknownKeyError, match="preset"):
        preset("beach")


def test_cli_prints_each_figure_and_the_verdict() -> None:
    result = CliRunner().invoke(app, ["market", "calibrate", "--preset", "city", "--hotels", "3", "--offers", "4000"])
    assert result.exit_code == 0, result.output
    assert "lead_p90" in result.output and "16/16 figures within tolerance" in result.output
    bad = CliRunner().invoke(app, ["market", "calibrate", "--preset", "beach"])
    assert bad.exit_code == 1 and "beach" in bad.output
