"""Overbooking limits on the real code: monotone in the cancellation rate and the walk cost, capacity at no cancels."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from typer.testing import CliRunner

from events.models import PricingRequest
from pricestream.cli import app
from pricing.bid_price import BidPriceConfig, forecast
from pricing.overbooking import OverbookingConfig, expected_walks, overbooking_limit

NO_SERVICE_CAP = 1000.0  # walks per 1,000 guests: the economic condition alone decides


@pytest.mark.parametrize("capacity", [1, 10, 100, 250])
def test_with_no_cancellations_or_no_shows_the_limit_is_the_capacity(capacity: int) -> None:
    assert overbooking_limit(capacity, show_prob=1.0, room_value=150.0, walk_cost=160.0,
                             max_walks_per_1000=NO_SERVICE_CAP) == capacity


def test_the_limit_grows_with_the_cancellation_rate() -> None:
    limits = [overbooking_limit(100, show_prob=1.0 - c, room_value=150.0, walk_cost=250.0,
                                max_walks_per_1000=NO_SERVICE_CAP) for c in (0.0, 0.05, 0.1, 0.2, 0.3, 0.42)]
    assert limits == sorted(limits) and limits[0] == 100 and limits[-1] > 150


def test_the_limit_shrinks_as_the_walk_cost_grows() -> None:
    limits = [overbooking_limit(100, show_prob=0.72, room_value=150.0, walk_cost=w,
                                max_walks_per_1000=NO_SERVICE_CAP) for w in (160.0, 250.0, 400.0, 1000.0, 5000.0)]
    assert limits == sorted(limits, reverse=True) and limits[0] > limits[-1] > 100


def test_the_service_level_bounds_the_expected_walks() -> None:
    for cancel in (0.1, 0.28, 0.42):
        show = (1 - cancel) * 0.98
        limit = overbooking_limit(100, show_prob=show, room_value=150.0, walk_cost=250.0, max_walks_per_1000=1.0)
        assert 1000 * expected_walks(limit, 100, show) / (limit * show) <= 1.0
        assert 1000 * expected_walks(limit + 1, 100, show) / ((limit + 1) * show) > 1.0 or limit == 200


def test_the_bid_forecast_sells_beyond_capacity_only_with_overbooking_on() -> None:
    request = PricingRequest(hotel_id="h1", room_type="std", stay_date=date(2027, 3, 1),
                             event_time=datetime(2027, 2, 1, tzinfo=UTC))
    features = {"views_7d": 40.0, "searches_7d": 40.0, "rooms_left": 5.0, "capacity": 100.0, "base_rate": 150.0,
                "bookings_7d": 20.0, "cancellations_7d": 6.0}
    plain = forecast(request, features, BidPriceConfig())
    over = forecast(request, features, BidPriceConfig(overbooking=OverbookingConfig()))
    assert plain is not None and over is not None
    assert plain.rooms_left == 5.0 and over.rooms_left > 5.0


def test_the_command_prints_the_limit_and_its_walks() -> None:
    result = CliRunner().invoke(app, ["overbooking", "limit", "--capacity", "100", "--cancel-share", "0.28",
                                      "--reference-price", "150"])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "(setting)" in line)
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert int(cells[1]) > 100 and float(cells[4]) <= 1.0
