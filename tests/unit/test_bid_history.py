"""The bid price's forecast measured from behaviour history (``pricing.bid_history``), its command, serve's load."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from events.models import dumps
from market import Market, static_policy
from market.compare import run_window
from market.presets import preset
from pricestream.cli import app
from pricestream.settings import Settings
from pricestream.wiring import bid_config, pricer_loader
from pricing.bid_history import curve_of, measure
from pricing.bid_price import BidPriceConfig

START = datetime(2026, 5, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[object]]:
    """Ten simulated days of the resort's behaviour events, as a producer writes them (JSONL)."""
    market = Market(preset("resort", hotels=1, seed=3))
    seen: list[object] = []
    run_window(market, static_policy(market), start=START, days=10, seed=3, warmup_days=0, on_event=seen.append)
    path = tmp_path_factory.mktemp("events") / "behaviour.jsonl"
    path.write_bytes(b"".join(dumps(e) + b"\n" for e in seen))  # type: ignore[arg-type]
    return path, seen


def test_the_forecast_is_measured_from_the_events_it_names(history: tuple[Path, list[object]]) -> None:
    _, seen = history
    kinds = [getattr(e, "event_type", "") for e in seen]
    m = measure(seen)  # type: ignore[arg-type]
    assert (m.searches, m.bookings) == (kinds.count("search"), kinds.count("booking"))
    booked = [e for e in seen if getattr(e, "event_type", "") == "booking"]
    assert m.config.rooms_per_booking == pytest.approx(sum(e.rooms for e in booked) / len(booked))  # type: ignore[attr-defined]
    shares = dict(m.config.room_shares or ())
    assert sum(shares.values()) == pytest.approx(1.0)
    std = len([e for e in seen if getattr(e, "event_type", "") == "search" and e.room_type == "standard"])  # type: ignore[attr-defined]
    assert shares["standard"] == pytest.approx(std / m.searches) and 0.0 < shares["standard"] < 1.0
    # the resort's shoppers book months ahead (mean lead ~93 days): far from the default curve's 30-day mean
    assert m.config.horizon_days > 120 and curve_of(m.config).share(30.0) < 0.5


def test_the_command_writes_what_serve_loads_and_skips_hostile_lines(
    history: tuple[Path, list[object]], tmp_path: Path
) -> None:
    path, seen = history
    hostile = tmp_path / "mixed.jsonl"
    hostile.write_bytes(path.read_bytes() + b'{"event_type": "search"}\nnot json\n\n\xff\xfe\n')
    out = tmp_path / "bid.json"
    result = CliRunner().invoke(app, ["bid-price", "measure", "--events", str(hostile), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "records skipped (not contract records)" in result.output and "│ 3" in result.output
    loaded = bid_config(Settings(bid_config=out))
    assert loaded == measure(seen).config  # type: ignore[arg-type]
    assert pricer_loader(Settings(bid_config=out)).__name__ == "load"


def test_a_bad_bid_config_names_the_file_and_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bid.json"
    bad.write_text('{"horizon_days": -3}')
    with pytest.raises(ValueError, match="horizon_days"):
        bid_config(Settings(bid_config=bad))
    with pytest.raises(ValueError, match="cannot read"):
        bid_config(Settings(bid_config=tmp_path / "missing.json"))
    assert bid_config(Settings()) is None
    assert BidPriceConfig().curve is None


def test_no_searches_is_a_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = CliRunner().invoke(app, ["bid-price", "measure", "--events", str(empty), "--out", str(tmp_path / "b")])
    assert result.exit_code == 1 and "0 searches" in result.output


def test_serve_loads_its_tier_pricers_with_the_measured_forecast(
    history: tuple[Path, list[object]], tmp_path: Path
) -> None:
    import numpy as np

    from pricing.bid_price import forecast
    from pricing.models import DemandModelConfig
    from pricing.tiers import DEFAULT_CAPACITY
    from pricing.training import train_bundle
    from tests.unit.test_cold_start import NOW, _frame, _request

    _, seen = history
    out = tmp_path / "bid.json"
    out.write_text(measure(seen).config.model_dump_json())  # type: ignore[arg-type]
    bundle = train_bundle(_frame(np.random.default_rng(0), 800, wtp=200.0), tmp_path / "light", tier="light",
                          config=DemandModelConfig(num_trees=10)).path
    measured = pricer_loader(Settings(bid_config=out))(bundle)
    built_in = pricer_loader(Settings())(bundle)
    assert measured._capacity == bid_config(Settings(bid_config=out)) and built_in._capacity == DEFAULT_CAPACITY
    features = {"searches_7d": 6.0, "rooms_left": 2.0, "hotel_searches_24h": 400.0, "hotel_views_24h": 200.0}
    request = _request(NOW, days_out=60).model_copy(update={"room_type": "standard"})
    mine, default = forecast(request, features, measured._capacity), forecast(request, features, DEFAULT_CAPACITY)
    assert mine is not None and default is not None and mine.views != default.views  # the hotel's own curve and pace
