"""The pooled price response: fitted from labels, stored in the bundle, used by the tiers."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import numpy as np
import numpy.typing as npt
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


def lead_market(n: int, seed: int = 0) -> pd.DataFrame:
    """Less elastic near arrival, and the window's near-arrival nights in the low season (March-April).

    Offers are made over 60 days from 1 March; the night's willingness to pay peaks in August
    (``SEASON`` on the log-odds), the elasticity falls from 3.0 far ahead to 1.6 on the day.
    """
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.uniform(0, 1, size=(n, len(LIGHT_COLUMNS))), columns=list(LIGHT_COLUMNS))
    lead = np.minimum(rng.exponential(60.0, n), 449.0)
    made = datetime(2026, 3, 1, tzinfo=UTC) + pd.to_timedelta(rng.uniform(0, 60, n), unit="D")
    stay = (made + pd.to_timedelta(lead, unit="D")).date
    doy = pd.to_datetime(stay).dayofyear.to_numpy(dtype=float)
    frame["lead_time_days"] = np.floor(lead)
    frame["stay_date"] = stay
    frame["base_rate"] = 100.0
    frame["price"] = 100.0 * np.exp(rng.normal(0.0, 0.35, n))
    beta = true_beta(lead)
    a = 0.3 + SEASON * np.cos(2 * np.pi * (doy - 213) / 365.25)
    p = 0.3 / (1.0 + np.exp(-(a - beta * np.log(frame["price"] / 100.0))))
    frame["booked"] = (rng.random(n) < p).astype(int)
    return frame


SEASON = 1.0


def true_beta(lead: npt.ArrayLike) -> npt.NDArray[np.float64]:
    lead = np.asarray(lead, dtype=np.float64)
    return np.asarray(3.0 - 1.0 * np.exp(-lead / 7.0) - 0.4 * np.exp(-lead / 30.0), dtype=np.float64)


def test_the_fitted_elasticity_is_lower_near_arrival_where_it_truly_is() -> None:
    frame = lead_market(40_000)
    fitted = fit_price_response(frame)
    assert fitted is not None
    near, far = fitted.elasticity(1.0), fitted.elasticity(120.0)
    assert near < far - 0.8
    assert near == pytest.approx(float(true_beta(1.0)), abs=0.5)  # ~4,000 rows under a week: +-0.3 across seeds
    assert far == pytest.approx(float(true_beta(120.0)), abs=0.2)
    # the season, not the lead, explains why the window's near nights book less at the base rate
    amplitude = math.hypot(*fitted.season)
    assert amplitude == pytest.approx(SEASON, rel=0.3)
    assert fitted.intercept(60.0, 213) > fitted.intercept(60.0, 60)
    # a frame of one season cannot separate them: no season term, and it says so by leaving it at 0
    short = frame[pd.to_datetime(frame["stay_date"]).dt.month.isin([3, 4])]
    assert fit_price_response(short).season == (0.0, 0.0)  # type: ignore[union-attr]


def test_the_tier_quotes_a_higher_myopic_price_near_arrival_on_that_market(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    frame = lead_market(8_000, seed=3)
    config = DemandModelConfig(num_trees=20)
    path = train_bundle(frame, tmp_path_factory.mktemp("lead"), tier="light", config=config).path
    stored = PriceResponse.from_json(json.loads((path / META_FILE).read_text())["price_response"])
    assert stored is not None and stored.elasticity(0.0) < stored.elasticity(90.0)
    pricer = load_pricer(path, capacity=None)
    quotes = {}
    night = NOW + timedelta(days=90)
    for lead in (0, 90):  # the same night, asked on the day and 90 days ahead: only the lead differs
        req = PricingRequest(hotel_id="h1", room_type="std", stay_date=night.date(),
                             event_time=night - timedelta(days=lead))
        quotes[lead] = pricer.quote(req, {"base_rate": 100.0}, floor=40.0, ceiling=400.0).price
    assert quotes[0] > quotes[90] * 1.05


def test_a_bundle_written_before_the_lead_terms_still_loads() -> None:
    old = PriceResponse.from_json({"c": 0.3, "a": 0.1, "beta": 2.5})
    assert old == PriceResponse(0.3, 0.1, 2.5)
    assert old is not None and old.elasticity(0.0) == old.elasticity(None) == 2.5
    assert PriceResponse.from_json({"c": 0.3, "a": 0.1, "beta": 2.5, "season_cos": "x"}) is None
    again = PriceResponse(0.3, 0.1, 2.5, (0.5, -0.2), (-1.0, 0.3), (0.4, 0.1))
    assert PriceResponse.from_json(again.to_json()) == again
