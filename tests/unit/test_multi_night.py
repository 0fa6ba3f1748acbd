"""Stays holding every night they cover: simulator inventory, the DP oracle's decomposition, the pricer's cost."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import numpy as np

from market.config import MarketConfig
from market.generator import Simulation
from market.market import Market
from market.oracle import DPOracle
from market.shoppers import Offer
from pricing.bid_price import BidPriceConfig, DemandForecast, cost_per_night, dp_bid_price

START = datetime(2026, 3, 1, tzinfo=UTC)


def _run(hold: bool) -> tuple[Simulation, list[object]]:
    cfg = MarketConfig(hotels=1, horizon_days=20, seed=4, stays_hold_nights=hold, shoppers_per_room_night=6.0)
    sim = Simulation(Market(cfg), start=START, duration=timedelta(days=3), rng_seed=2)
    return sim, list(sim)


def test_a_booking_takes_and_a_cancellation_frees_a_room_on_every_night_of_the_stay() -> None:
    sim, events = _run(hold=True)
    left: dict[tuple[str, str, date], int] = {}
    bookings = {}
    checked = cancelled = 0
    for i, e in enumerate(events):
        kind = e.event_type  # type: ignore[attr-defined]
        if kind == "booking":
            nights = range(e.nights)  # type: ignore[attr-defined]
            keys = [(e.hotel_id, e.room_type, e.stay_date + timedelta(days=d)) for d in nights]  # type: ignore[attr-defined]
            after = events[i + 1 : i + 1 + len(keys)]
            assert [(a.hotel_id, a.room_type, a.stay_date) for a in after] == keys  # type: ignore[attr-defined]
            for k, a in zip(keys, after, strict=True):
                if k in left:  # the night's inventory was seen before: it lost exactly the booking's rooms
                    assert a.rooms_left == left[k] - e.rooms  # type: ignore[attr-defined]
                    checked += 1
            bookings[e.booking_id] = (e, keys)  # type: ignore[attr-defined]
        elif kind == "cancellation":
            booking, keys = bookings[e.booking_id]  # type: ignore[attr-defined]
            after = events[i + 1 : i + 1 + len(keys)]
            for k, a in zip(keys, after, strict=True):
                assert (a.hotel_id, a.room_type, a.stay_date) == k  # type: ignore[attr-defined]
                assert a.rooms_left == left[k] + booking.rooms  # type: ignore[attr-defined]
            cancelled += 1
        if kind == "inventory":
            left[(e.hotel_id, e.room_type, e.stay_date)] = e.rooms_left  # type: ignore[attr-defined]
    assert checked > 20 and cancelled > 0
    assert any(b.nights > 1 for b, _ in bookings.values())


def test_without_holding_a_booking_takes_its_check_in_night_only() -> None:
    _, events = _run(hold=False)
    for i, e in enumerate(events):
        if e.event_type == "booking":  # type: ignore[attr-defined]
            nxt = events[i + 1]
            assert nxt.event_type == "inventory" and nxt.stay_date == e.stay_date  # type: ignore[attr-defined]
            assert i + 2 >= len(events) or not (
                events[i + 2].event_type == "inventory"  # type: ignore[attr-defined]
                and events[i + 2].stay_date == e.stay_date + timedelta(days=1)  # type: ignore[attr-defined]
                and events[i + 2].event_time == e.event_time  # type: ignore[attr-defined]
            )


def test_the_oracle_prices_a_stay_against_the_bid_prices_of_all_its_nights() -> None:
    cfg = MarketConfig(hotels=1, horizon_days=20, seed=3, stays_hold_nights=True)
    oracle = DPOracle(Market(cfg), first_night=date(2026, 1, 2), last_night=date(2026, 1, 25))
    at = datetime(2026, 1, 3, 18, tzinfo=UTC)
    base = Offer("h0000", "suite", date(2026, 1, 6), at, "leisure", "web", 3, 5, 5, 3, (5, 5, 5))
    tight = base._replace(rooms_left=1, stay_left=(5, 1, 5))  # the second night is the scarce one
    assert oracle.bid_price(tight) > oracle.bid_price(base) >= 0.0
    assert oracle.price(tight) > oracle.price(base)
    # the bid is the mean of the nights' own bids: one scarce night of three moves it by a third of a full one
    all_tight = base._replace(rooms_left=1, stay_left=(1, 1, 1))
    one = oracle.bid_price(tight) - oracle.bid_price(base)
    assert oracle.bid_price(all_tight) - oracle.bid_price(base) > 1.5 * one


def test_the_decomposed_programme_values_a_room_less_than_one_night_stays_do() -> None:
    """Holding every night: a stay displaces its other nights, so a room of one night is worth less per night."""
    hold = MarketConfig(hotels=1, horizon_days=20, seed=3, stays_hold_nights=True)
    single = hold.model_copy(update={"segments": tuple(s.model_copy(update={"nights_mean": 1.0})
                                                       for s in hold.segments)})
    assert single.mean_nights == 1.0
    v_hold = DPOracle(Market(hold), first_night=date(2026, 1, 2), last_night=date(2026, 1, 25)).values(0, 2)
    v_one = DPOracle(Market(single), first_night=date(2026, 1, 2), last_night=date(2026, 1, 25)).values(0, 2)
    assert np.all(np.isfinite(v_hold)) and np.all(np.diff(v_hold[:, 0, :], axis=-1) >= -1e-3)
    assert v_hold.shape == v_one.shape


def test_the_pricer_charges_a_stay_the_mean_of_its_nights_bid_prices() -> None:
    holds = BidPriceConfig(stays_hold_nights=True, nights_per_booking=3.0)
    assert cost_per_night(90.0, 3, holds, stay_bids=[30.0, 0.0]) == 40.0
    assert cost_per_night(90.0, 3, holds) == 90.0  # the other nights unknown: at the check-in night's bid
    assert cost_per_night(90.0, 3, BidPriceConfig(nights_per_booking=3.0)) == 90.0  # one night held: 90 x 3 / 3
    p, q = np.array([100.0, 150.0, 200.0]), np.array([0.5, 0.3, 0.1])
    fc = DemandForecast(40.0, 3.0, 1.0, 10.0)
    one = ((1.0, 1.0),)
    assert dp_bid_price(p, q, fc, nights=one, holds=True) == dp_bid_price(p, q, fc, nights=one)  # one-night stays
    # four-night stays: held, a room of the night is worth a room of the night (at most the dearest price);
    # not held, the check-in night's room is shared over the four nights a booking pays for
    four = ((4.0, 1.0),)
    held, spread = dp_bid_price(p, q, fc, nights=four, holds=True), dp_bid_price(p, q, fc, nights=four)
    assert 200.0 >= held > spread > 0.0
