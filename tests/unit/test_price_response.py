"""The pooled price response: fitted from labels, stored in the bundle, used by the tiers."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from events.models import PricingRequest
from pricing.errors import TrainingError
from pricing.models import DemandModelConfig
from pricing.price_response import PriceResponse, fit_price_response
from pricing.tiers import load_pricer
from pricing.training import META_FILE, train_bundle
from pricing.vectorize import LIGHT_COLUMNS

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)


def labels(n: int, beta: float, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.uniform(0, 1, size=(n, len(LIGHT_COLUMNS))), columns=list(LIGHT_COLUMNS))
    frame["base_rate"] = rng.choice([80.0, 150.0, 300.0], n)
    frame["price"] = frame["base_rate"] * np.exp(rng.normal(0.0, 0.35, n))
    p = 0.3 / (1.0 + np.exp(-(0.4 - beta * np.log(frame["price"] / frame["base_rate"]))))
    frame["booked"] = (rng.random(n) < p).astype(int)
    return frame


def test_the_fit_recovers_the_elasticity_and_level() -> None:
    steep, flat = fit_price_response(labels(30_000, 4.0)), fit_price_response(labels(30_000, 2.0))
    assert steep is not None and flat is not None
    assert steep.beta == pytest.approx(4.0, rel=0.2) and flat.beta == pytest.approx(2.0, rel=0.2)
    assert steep.c == pytest.approx(0.3, abs=0.05)


def test_the_fit_refuses_what_it_cannot_identify() -> None:
    frame = labels(1000, 2.0)
    assert fit_price_response(frame.iloc[:100]) is None  # too few rows
    assert fit_price_response(frame.assign(booked=0)) is None  # no booking
    assert fit_price_response(frame.assign(price=frame["base_rate"])) is None  # no price spread
    with pytest.raises(TrainingError) as info:
        fit_price_response(frame.drop(columns=["base_rate"]))
    assert info.value.field == "frame.columns"
    assert PriceResponse.from_json({"c": 0.3, "a": 0.1, "beta": 0.5}) is None  # below the elasticity bound
    assert PriceResponse.from_json(None) is None


def test_the_bundle_stores_it_and_the_tier_prices_with_it(tmp_path_factory: pytest.TempPathFactory) -> None:
    frame = labels(4000, 3.0, seed=2)
    config = DemandModelConfig(num_trees=40)
    path = train_bundle(frame, tmp_path_factory.mktemp("light"), tier="light", config=config).path
    stored = PriceResponse.from_json(json.loads((path / META_FILE).read_text())["price_response"])
    assert stored is not None and stored.beta == pytest.approx(3.0, rel=0.3)
    pooled, tree = load_pricer(path, capacity=None), load_pricer(path, capacity=None, price_response=False)
    req = PricingRequest(hotel_id="h1", room_type="std", stay_date=NOW.date() + timedelta(days=20), event_time=NOW)
    q = pooled.quote(req, {"base_rate": 150.0}, floor=40.0, ceiling=600.0)
    # the myopic optimum of c x sigmoid(a - beta log r) x r, on the fitted curve
    r = np.exp(np.linspace(math.log(40.0 / 150.0), math.log(4.0), 4001))
    best = 150.0 * float(r[np.argmax(r * stored.shape(150.0 * r, 150.0))])
    assert q.price == pytest.approx(best, rel=0.05)
    probs = [p for _, p in sorted(q.candidates)]
    assert all(b <= a + 1e-12 for a, b in zip(probs, probs[1:], strict=False))
    assert tree.quote(req, {"base_rate": 150.0}, floor=40.0, ceiling=600.0).price != q.price
