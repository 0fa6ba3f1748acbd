"""Bid price and the capacity-aware quote: scarcer rooms raise the price, spare rooms near arrival lower it."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from events.models import PricingRequest
from pricing.bid_price import BidPriceConfig, BookingCurve, DemandForecast, bid_price, forecast
from pricing.models import DemandModelConfig
from pricing.optimiser import optimise
from pricing.tiers import LightPricer, load_pricer
from pricing.training import train_bundle
from pricing.vectorize import HEAVY_COLUMNS, LIGHT_COLUMNS

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)
PRICES = np.linspace(40.0, 600.0, 57)
PROBS = 1.0 / (1.0 + np.exp(2.5 * np.log(PRICES) - 2.5 * np.log(160.0)))


def request(lead: int) -> PricingRequest:
    return PricingRequest(hotel_id="h1", room_type="std", stay_date=NOW.date() + timedelta(days=lead), event_time=NOW)


def fc(views: float, rooms: float) -> DemandForecast:
    return DemandForecast(views=views, rooms_left=rooms, rooms_kept=1.0, lead_days=10.0)


def test_bid_price_is_zero_with_spare_rooms_and_rises_as_rooms_run_out() -> None:
    myopic = PRICES[int(np.argmax(PRICES * PROBS))]
    demand_at_myopic = 100.0 * float(PROBS[PRICES == myopic][0])
    assert bid_price(PRICES, PROBS, fc(100.0, demand_at_myopic + 1.0)) == 0.0
    bids = [bid_price(PRICES, PROBS, fc(100.0, rooms)) for rooms in (40.0, 30.0, 20.0, 10.0, 5.0)]
    assert all(b > 0.0 for b in bids) and bids == sorted(bids) and bids[-1] > 2 * bids[0]
    # the bid is the price at which the remaining shoppers take just the rooms left
    best = optimise(
        lambda p: np.interp(p, PRICES, PROBS)[:, None], floor=40.0, ceiling=600.0, grid_size=57, cost=bids[2]
    )
    assert 100.0 * float(np.interp(best.price, PRICES, PROBS)) == pytest.approx(20.0, abs=1.5)
    assert bid_price(PRICES, PROBS, fc(100.0, 0.0)) == PRICES[-1]


def test_bid_price_rises_with_the_demand_still_to_come() -> None:
    bids = [bid_price(PRICES, PROBS, fc(views, 20.0)) for views in (30.0, 60.0, 120.0, 240.0)]
    assert bids[0] == 0.0 and bids[1:] == sorted(bids[1:]) and bids[-1] > bids[1] > 0.0


def test_forecast_scales_recent_views_by_the_booking_curve() -> None:
    cfg = BidPriceConfig(curve_mean_days=20.0, horizon_days=100)
    near, far = (
        forecast(request(3), {"views_7d": 14.0, "rooms_left": 9.0}, cfg),
        forecast(request(50), {"views_7d": 14.0, "rooms_left": 9.0}, cfg),
    )
    assert near is not None and far is not None
    curve = BookingCurve.exponential(20.0, 100)
    assert near.views == pytest.approx(14.0 * curve.share(3.5) / curve.between(3.5, 10.5))
    assert far.views > 5 * near.views  # the same pace 50 days out means far more shoppers to come
    assert forecast(request(3), {"rooms_left": 9.0}, cfg) is None
    by_occupancy = forecast(request(3), {"views_7d": 14.0, "capacity": 40.0, "occupancy": 0.75}, cfg)
    assert by_occupancy is not None and by_occupancy.rooms_left == 10.0
    own = forecast(request(3), {"views_7d": 14.0, "rooms_left": 9.0, "bookings_7d": 10.0, "cancellations_7d": 4.0}, cfg)
    assert own is not None and own.rooms_kept == pytest.approx(1.2 * 0.6)


def test_booking_curve_from_leads_and_config_validation() -> None:
    curve = BookingCurve.from_leads(np.random.default_rng(0).exponential(10.0, 20_000).tolist(), 60)
    assert curve.share(10.0) == pytest.approx(1 - math.exp(-1), abs=0.02) and curve.share(60.0) == 1.0
    BidPriceConfig(curve=curve.cumulative, horizon_days=60)
    with pytest.raises(ValueError, match="cumulative"):
        BidPriceConfig(curve=(0.0, 0.7, 0.5, 1.0))


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real light bundle whose demand depends on price only (other inputs uniform on [0, 1])."""
    rng = np.random.default_rng(3)
    n = 3000
    frame = pd.DataFrame(rng.uniform(0, 1, size=(n, len(HEAVY_COLUMNS))), columns=list(HEAVY_COLUMNS))
    frame["price"] = np.exp(rng.uniform(math.log(60.0), math.log(500.0), n))
    p_book = 1.0 / (1.0 + np.exp(2.5 * np.log(frame["price"]) - 2.5 * math.log(170.0)))
    frame["booked"] = (rng.random(n) < p_book).astype(int)
    cols = [*LIGHT_COLUMNS, "booked"]
    return train_bundle(frame[cols], tmp_path_factory.mktemp("light"), tier="light", config=DemandModelConfig()).path


METHODS = [
    pytest.param({"method": "fluid"}, id="fluid"),
    pytest.param({"method": "dp", "nights_mix": ((1.0, 0.5), (4.0, 0.5))}, id="dp"),
]


@pytest.mark.parametrize("method", METHODS)
def test_real_pricer_raises_the_price_when_the_same_night_has_fewer_rooms_left(
    bundle: Path, method: dict[str, object]
) -> None:
    pricer = load_pricer(bundle, capacity=BidPriceConfig(curve_mean_days=25.0, **method))  # type: ignore[arg-type]
    assert isinstance(pricer, LightPricer)
    quotes = [
        pricer.quote(request(20), {"views_7d": 12.0, "rooms_left": rooms, "capacity": 40.0}, floor=60.0, ceiling=500.0)
        for rooms in (40.0, 25.0, 12.0, 6.0, 2.0)
    ]
    prices = [q.price for q in quotes]
    assert prices == sorted(prices) and prices[-1] > 1.3 * prices[0]
    assert [q.bid_price for q in quotes] == sorted(q.bid_price or 0.0 for q in quotes)
    assert quotes[-1].forecast is not None and quotes[-1].forecast.rooms_left == 2.0


@pytest.mark.parametrize("method", METHODS)
def test_real_pricer_lowers_the_price_near_arrival_when_rooms_are_plentiful(
    bundle: Path, method: dict[str, object]
) -> None:
    pricer = load_pricer(bundle, capacity=BidPriceConfig(curve_mean_days=25.0, **method))  # type: ignore[arg-type]
    myopic = load_pricer(bundle, capacity=None)
    features = {"views_7d": 12.0, "rooms_left": 25.0, "capacity": 40.0}
    far = pricer.quote(request(44), features, floor=60.0, ceiling=500.0)
    near = pricer.quote(request(2), features, floor=60.0, ceiling=500.0)
    base = myopic.quote(request(2), features, floor=60.0, ceiling=500.0)
    assert far.bid_price is not None and far.bid_price > 0.0 and near.bid_price == 0.0
    assert near.price < far.price and near.price == pytest.approx(base.price, rel=0.02) and base.bid_price is None


def test_quote_without_a_forecast_is_the_myopic_quote(bundle: Path) -> None:
    pricer, myopic = load_pricer(bundle), load_pricer(bundle, capacity=None)
    features = {"occupancy": 0.5}
    q = pricer.quote(request(10), features, floor=60.0, ceiling=500.0)
    assert q.bid_price is None and q.price == myopic.quote(request(10), features, floor=60.0, ceiling=500.0).price


def test_demand_is_unchanged_across_the_probes(bundle: Path) -> None:
    """The probes above vary rooms and lead (same weekday) only: the model must see the same demand."""
    pricer = load_pricer(bundle, capacity=None)
    a = pricer.quote(request(44), {"views_7d": 12.0, "rooms_left": 40.0}, floor=60.0, ceiling=500.0)
    b = pricer.quote(request(2), {"views_7d": 12.0, "rooms_left": 2.0}, floor=60.0, ceiling=500.0)
    assert a.candidates == b.candidates


def test_the_decision_records_the_bid_price_and_the_forecast(bundle: Path) -> None:
    from pricing.feature_source import MemoryFeatureSource
    from pricing.rules import RuleSet
    from pricing.scorer import Scorer, ScorerConfig
    from routing.calibration import Thresholds
    from routing.router import TieredRouter

    source = MemoryFeatureSource()
    req = request(20)
    source.put("h1", "std", req.stay_date, {"views_7d": 12.0, "rooms_left": 3.0, "capacity": 40.0}, event_time=NOW)
    rules = RuleSet.from_yaml("min_price: 60\nmax_price: 500\ndefault_base_rate: 150\n")
    scorer = Scorer(
        ScorerConfig(stale_after_s=None),
        rules=rules,
        feature_source=source,
        light=load_pricer(bundle, capacity=BidPriceConfig(curve_mean_days=25.0)),
        heavy=None,
        router=TieredRouter(thresholds=Thresholds(rules_below=0.0, heavy_above=1.0)),
    )
    decision = scorer.price(req)
    assert decision.tier == "light" and decision.bid_price is not None and decision.bid_price > 0.0
    assert decision.forecast_views is not None and decision.forecast_views > 12.0
    assert decision.features["rooms_left"] == 3.0


def test_forecast_counts_searches_so_a_sold_out_spell_does_not_hide_demand() -> None:
    cfg = BidPriceConfig(curve_mean_days=20.0, horizon_days=100)
    hotel = {"hotel_views_24h": 80.0, "hotel_searches_24h": 100.0}
    open_night = {"views_7d": 16.0, "searches_7d": 20.0, "rooms_left": 4.0, **hotel}
    censored = {"views_7d": 1.0, "searches_7d": 20.0, "rooms_left": 4.0, **hotel}
    a, b = forecast(request(10), open_night, cfg), forecast(request(10), censored, cfg)
    views_only = forecast(request(10), {"views_7d": 1.0, "rooms_left": 4.0}, cfg)
    assert a is not None and b is not None and views_only is not None
    assert b.views == pytest.approx(a.views) and views_only.views == pytest.approx(a.views / 16.0)


def test_forecast_shrinks_a_keys_pickup_toward_the_hotels_pace() -> None:
    curve = BookingCurve.exponential(20.0, 100)
    own_cfg = BidPriceConfig(curve=curve.cumulative, horizon_days=100)
    cfg = own_cfg.model_copy(update={"room_shares": (("std", 0.5), ("suite", 0.1))})
    feats = {
        "views_7d": 2.0,
        "searches_7d": 2.0,
        "rooms_left": 4.0,
        "hotel_views_24h": 80.0,
        "hotel_searches_24h": 100.0,
    }
    own, pooled = forecast(request(10), feats, own_cfg), forecast(request(10), feats, cfg)
    assert own is not None and pooled is not None
    ahead = curve.share(10.5)
    # the hotel's day of searches x the room's share x the view share x the curve still to come
    prior = 100.0 * 0.5 * 0.8 * ahead
    assert pooled.views == pytest.approx((own.views + prior) / 2.0)
    assert own.views < pooled.views  # two searches of the key: the hotel's pace says more are coming
    # an unknown room type, or no hotel searches: the key's own pickup
    other = forecast(request(10).model_copy(update={"room_type": "deluxe"}), feats, cfg)
    quiet = forecast(request(10), {**feats, "hotel_searches_24h": 0.0}, cfg)
    assert other is not None and quiet is not None
    assert other.views == pytest.approx(own.views) and quiet.views == pytest.approx(own.views)
    heavy = forecast(request(10), feats, cfg.model_copy(update={"prior_weight": 3.0}))
    assert heavy is not None and heavy.views == pytest.approx((own.views + 3.0 * prior) / 4.0)


def test_the_pace_prior_is_scaled_to_the_nights_month_and_weekday() -> None:
    from pricing.bid_price import night_index

    curve = BookingCurve.exponential(20.0, 100)
    flat = BidPriceConfig(curve=curve.cumulative, horizon_days=100, room_shares=(("std", 0.5),))
    # last year: the request's month searched twice as often per night as the others, Saturdays 1.5x
    year = [datetime(2025, 1, 1, tzinfo=UTC).date() + timedelta(days=i) for i in range(365)]
    req = request(10)
    busy = [d for d in year if d.month == req.stay_date.month]
    month, weekday = night_index(year + busy)
    indexed = flat.model_copy(update={"month_index": month, "weekday_index": weekday})
    feats = {"views_7d": 0.0, "searches_7d": 0.0, "rooms_left": 4.0, "hotel_searches_24h": 100.0}
    a, b = forecast(req, feats, flat), forecast(req, feats, indexed)
    assert a is not None and b is not None
    own = max(0.0, 0.5) * curve.share(10.5) / curve.between(10.5, 17.5)  # the key's own pickup, unchanged
    prior = 100.0 * 0.5 * curve.share(10.5)
    factor = month[req.stay_date.month - 1] * weekday[req.stay_date.weekday()]
    assert factor > 1.7  # about 2 / (1 + 1/11) for the month, near 1 for the weekday
    assert a.views == pytest.approx((own + prior) / 2.0)
    assert b.views == pytest.approx((own + prior * factor) / 2.0)
    with pytest.raises(ValueError, match="month_index"):
        BidPriceConfig(month_index=(1.0,) * 11)
    with pytest.raises(ValueError, match="weekday_index"):
        BidPriceConfig(weekday_index=(1.0, 1.0, 1.0, 1.0, 1.0, 1.0, -1.0))


def test_stochastic_bid_prices_the_chance_that_the_last_room_sells() -> None:
    from pricing.bid_price import stochastic_bid_price

    bids = [stochastic_bid_price(PRICES, PROBS, fc(100.0, rooms)) for rooms in (60.0, 40.0, 30.0, 20.0, 10.0, 5.0)]
    assert bids == sorted(bids) and bids[-1] > 3 * bids[1]
    # mean demand at the myopic price (about 43 rooms) is below 60 rooms: the fluid bid is 0, this one is not
    assert bid_price(PRICES, PROBS, fc(100.0, 60.0)) == 0.0 and bids[0] > 0.0
    assert stochastic_bid_price(PRICES, PROBS, fc(5.0, 30.0)) < 1e-6  # near arrival, rooms to spare
    assert bid_price(PRICES, PROBS, fc(100.0, 10.0), method="stochastic") == bids[-2]


def test_beyond_trained_lets_a_binding_bid_price_past_the_trained_price_range(bundle: Path) -> None:
    features = {"views_7d": 40.0, "rooms_left": 1.0, "capacity": 40.0}
    inside = load_pricer(bundle, capacity=BidPriceConfig(curve_mean_days=25.0, extrapolate=False))
    beyond = load_pricer(bundle, capacity=BidPriceConfig(curve_mean_days=25.0, beyond_trained=True, extrapolate=False))
    a = inside.quote(request(30), features, floor=60.0, ceiling=900.0)
    b = beyond.quote(request(30), features, floor=60.0, ceiling=900.0)
    assert a.price <= 500.0 < b.price <= 900.0 and b.bid_price is not None and b.bid_price > 500.0
    spare = {"views_7d": 4.0, "rooms_left": 30.0, "capacity": 40.0}  # no scarcity: the trained range holds
    assert (
        beyond.quote(request(30), spare, floor=60.0, ceiling=900.0).price
        == inside.quote(request(30), spare, floor=60.0, ceiling=900.0).price
    )


def test_the_extrapolated_demand_prices_a_scarce_night_past_the_trained_range_and_falls_with_price(
    bundle: Path,
) -> None:
    """Default pricer: past the trained range (60-500) demand continues as a logit tail, so a night with one
    room left and many shoppers to come is priced above 500, and not at the ceiling when rooms are spare."""
    pricer = load_pricer(bundle, capacity=BidPriceConfig(curve_mean_days=25.0))
    scarce = pricer.quote(
        request(30), {"views_7d": 40.0, "rooms_left": 1.0, "capacity": 40.0}, floor=60.0, ceiling=2000.0
    )
    spare = pricer.quote(
        request(30), {"views_7d": 4.0, "rooms_left": 30.0, "capacity": 40.0}, floor=60.0, ceiling=2000.0
    )
    assert 500.0 < scarce.price < 2000.0 and spare.price < 500.0
    probs = [p for _, p in sorted(scarce.candidates)]
    assert all(b <= a + 1e-9 for a, b in zip(probs, probs[1:], strict=False))  # monotone, also past 500


def test_a_long_stay_is_priced_against_a_smaller_cost_per_night(bundle: Path) -> None:
    """A booking takes a room of its check-in night and pays price x nights: with ``nights_per_booking`` 2 a
    6-night request faces a third of the bid per night (a 1-night one twice the bid), so it gets a lower price."""
    from pricing.bid_price import cost_per_night

    cfg = BidPriceConfig(curve_mean_days=25.0, nights_per_booking=2.0)
    pricer = load_pricer(bundle, capacity=cfg)
    features = {"views_7d": 40.0, "rooms_left": 3.0, "capacity": 40.0}
    one = pricer.quote(request(30), features, floor=60.0, ceiling=2000.0)
    long_req = request(30).model_copy(update={"nights": 6})
    six = pricer.quote(long_req, features, floor=60.0, ceiling=2000.0)
    assert one.bid_price is not None and one.bid_price > 0.0 and six.bid_price == pytest.approx(one.bid_price)
    assert six.price < one.price
    assert cost_per_night(one.bid_price, 6, cfg) == pytest.approx(one.bid_price / 3.0)


def test_dp_bid_matches_a_bellman_recursion_solved_by_hand() -> None:
    from pricing.bid_price import dp_bid_price

    # 3 shoppers to come (the one being quoted and 2 after), 2 rooms, prices 100 or 200 with q 0.6 / 0.3
    p, q = np.array([100.0, 200.0]), np.array([0.6, 0.3])

    def value(shoppers: int, rooms: int) -> float:
        if shoppers == 0 or rooms == 0:
            return 0.0
        keep, sell = value(shoppers - 1, rooms), value(shoppers - 1, rooms - 1)
        return keep + max(float(qi * (pi + sell - keep)) for pi, qi in zip(p, q, strict=True))

    # the shopper being quoted is the first of 3: the bid is the value of a room to the 2 after
    expected = value(2, 2) - value(2, 1)
    assert dp_bid_price(p, q, DemandForecast(3.0, 2.0, 1.0, 5.0)) == pytest.approx(expected)
    # by hand: V(1, k) = 60; V(2, 1) = 60 + max(0.6 x 40, 0.3 x 140) = 102; V(2, 2) = 60 + 60 = 120
    assert expected == pytest.approx(18.0)


def test_dp_bid_rises_as_rooms_run_out_and_is_positive_where_the_fluid_bid_is_zero() -> None:
    from pricing.bid_price import dp_bid_price

    bids = [dp_bid_price(PRICES, PROBS, fc(100.0, rooms)) for rooms in (60.0, 40.0, 30.0, 20.0, 10.0, 5.0)]
    assert bids == sorted(bids) and bids[-1] > 2 * bids[1]
    assert bid_price(PRICES, PROBS, fc(100.0, 60.0)) == 0.0 and bids[0] > 0.0
    assert dp_bid_price(PRICES, PROBS, fc(2.0, 30.0)) < 1e-6  # near arrival, rooms to spare
    assert bid_price(PRICES, PROBS, fc(100.0, 10.0), method="dp") == bids[-2]
    assert dp_bid_price(PRICES, PROBS, fc(100.0, 0.0)) == PRICES[-1]


def test_a_stay_is_priced_against_the_bids_of_every_night_it_holds(bundle: Path) -> None:
    """Same check-in night features; the later nights of a 3-night stay read from a feature source: scarcer
    later nights raise the stay's price, open ones lower it, and without a source every night is the check-in's."""
    from pricing.feature_source import MemoryFeatureSource

    cfg = BidPriceConfig(curve_mean_days=25.0, stays_hold_nights=True, nights_per_booking=3.0)
    checkin = {"views_7d": 20.0, "rooms_left": 6.0, "capacity": 40.0}
    stay = request(30).model_copy(update={"nights": 3})

    def priced(later_rooms: float | None) -> float:
        source = MemoryFeatureSource()
        if later_rooms is not None:
            for k in (1, 2):
                source.put(
                    "h1",
                    "std",
                    stay.stay_date + timedelta(days=k),
                    {"views_7d": 20.0, "rooms_left": later_rooms, "capacity": 40.0},
                )
        pricer = load_pricer(bundle, capacity=cfg, stay_features=source)
        return pricer.quote(stay, checkin, floor=60.0, ceiling=2000.0).price

    scarce, unknown, same, open_ = priced(1.0), priced(None), priced(6.0), priced(40.0)
    assert same == pytest.approx(unknown)  # later nights like the check-in night: as without their features
    assert scarce > unknown > open_
    no_source = load_pricer(bundle, capacity=cfg).quote(stay, checkin, floor=60.0, ceiling=2000.0)
    assert no_source.price == pytest.approx(unknown)
