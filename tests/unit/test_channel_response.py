"""Per-channel offsets of the pooled price response: the fit, the shrinkage, and the tier behind its option."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from events.models import CHANNELS, PricingRequest
from pricing.bid_price import BidPriceConfig
from pricing.channel_response import channel_offsets, fit_channel_offsets, shrink
from pricing.models import DemandModelConfig
from pricing.price_response import fit_price_response
from pricing.tiers import load_pricer
from pricing.training import META_FILE, train_bundle
from pricing.vectorize import LIGHT_COLUMNS

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)
CORPORATE = float(CHANNELS.index("corporate"))
OTA = float(CHANNELS.index("ota"))


def channel_market(n: int, *, shift: float, seed: int = 0, corporate_share: float = 0.3) -> pd.DataFrame:
    """Corporate shoppers sit ``shift`` higher on the same curve (a premium); prices explored per channel alike."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.uniform(0, 1, size=(n, len(LIGHT_COLUMNS))), columns=list(LIGHT_COLUMNS))
    frame["channel_code"] = np.where(rng.random(n) < corporate_share, CORPORATE, OTA)
    frame["base_rate"] = 100.0
    frame["price"] = 100.0 * np.exp(rng.normal(0.0, 0.3, n))
    d = np.where(frame["channel_code"] == CORPORATE, shift, 0.0)
    p = 0.3 / (1.0 + np.exp(-(0.2 + d - 3.0 * np.log(frame["price"] / 100.0))))
    frame["booked"] = (rng.random(n) < p).astype(int)
    return frame


def test_the_fit_finds_the_channel_that_sits_higher_on_the_curve() -> None:
    frame = channel_market(30_000, shift=1.5)
    d = fit_channel_offsets(frame, fit_price_response(frame))
    assert set(d) == {"ota", "corporate"}  # channels without rows are left out
    assert d["corporate"] - d["ota"] == pytest.approx(1.5, abs=0.4)
    flat = channel_market(30_000, shift=0.0, seed=1)
    d0 = fit_channel_offsets(flat, fit_price_response(flat))
    assert abs(d0["corporate"]) < 0.25 and abs(d0["ota"]) < 0.25


def test_a_noisy_channel_is_shrunk_toward_the_pool_more_than_a_well_measured_one() -> None:
    d = shrink({"ota": (1.0, 0.01), "corporate": (1.0, 1.0)}, prior_sd=1.0)
    assert d["ota"] == pytest.approx(1.0 / 1.01)
    assert d["corporate"] == pytest.approx(0.5)
    # few corporate rows: its estimate is pulled in further than on many rows
    few = channel_market(3_000, shift=1.5, seed=2, corporate_share=0.08)
    many = channel_market(30_000, shift=1.5, seed=2, corporate_share=0.08)
    d_few = fit_channel_offsets(few, fit_price_response(few))
    d_many = fit_channel_offsets(many, fit_price_response(many))
    assert 0.0 < d_few.get("corporate", 0.0) < d_many["corporate"]


def test_stored_offsets_are_read_back_and_malformed_ones_dropped() -> None:
    assert channel_offsets({"ota": -0.1, "corporate": 0.8}) == {"ota": -0.1, "corporate": 0.8}
    assert channel_offsets({"nowhere": 1.0, "ota": float("nan"), "web": "x", "gds": 99.0}) == {}
    assert channel_offsets(None) == {}


def test_the_tier_uses_the_offset_only_with_the_option_on(tmp_path_factory: pytest.TempPathFactory) -> None:
    frame = channel_market(6_000, shift=1.5, seed=3)
    config = DemandModelConfig(num_trees=30)
    path = train_bundle(frame, tmp_path_factory.mktemp("chan"), tier="light", config=config).path
    meta = json.loads((path / META_FILE).read_text())
    assert meta["price_response_channels"]["corporate"] > 0.5
    stay = NOW.date() + timedelta(days=20)
    off, on = BidPriceConfig(), BidPriceConfig(channel_response=True)
    quotes: dict[tuple[str, bool], float] = {}
    for channel in ("corporate", "ota"):
        req = PricingRequest(hotel_id="h1", room_type="std", stay_date=stay, channel=channel, event_time=NOW)
        for flag, cfg in ((False, off), (True, on)):
            pricer = load_pricer(path, capacity=cfg)
            quotes[channel, flag] = pricer.quote(req, {"base_rate": 100.0}, floor=40.0, ceiling=400.0).price
    # with it on, corporate shoppers (flatter where they sit) are quoted higher than with the pooled curve
    assert quotes["corporate", True] > quotes["corporate", False] * 1.05
    # off, the stored offsets change nothing: the same prices as a bundle without them
    (path / META_FILE).write_text(json.dumps({**meta, "price_response_channels": {}}), encoding="utf-8")
    for channel in ("corporate", "ota"):
        req = PricingRequest(hotel_id="h1", room_type="std", stay_date=stay, channel=channel, event_time=NOW)
        plain = load_pricer(path, capacity=off).quote(req, {"base_rate": 100.0}, floor=40.0, ceiling=400.0).price
        assert plain == quotes[channel, False]
