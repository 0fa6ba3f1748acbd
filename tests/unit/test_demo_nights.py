"""Closed stay nights without the stack: which nights, that they close, and what a hotel reports on them."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from market import Market, MarketConfig, static_policy
from market.closed_nights import (
    ClosedNightsSimulation,
    HotelFigures,
    NightLedger,
    StayNights,
    choose_nights,
    play,
    shopper_phases,
)
from market.errors import SimulatorError

MARKET = Market(MarketConfig(hotels=2, horizon_days=30, seed=3, stays_hold_nights=True))


def test_figures_are_the_hotel_arithmetic() -> None:
    f = HotelFigures(revenue=12_600.0, rooms_sold=90, rooms_available=120)
    assert f.occupancy == 0.75 and f.adr == 140.0 and f.revpar == 105.0
    both = f + HotelFigures(revenue=3_000.0, rooms_sold=30, rooms_available=120)
    assert (both.revenue, both.rooms_sold, both.rooms_available) == (15_600.0, 120, 240)
    assert both.revpar == 65.0 and both.occupancy == 0.5 and both.adr == 130.0
    empty = HotelFigures(revenue=0.0, rooms_sold=0, rooms_available=50)
    assert (empty.adr, empty.occupancy, empty.revpar) == (0.0, 0.0, 0.0)


def test_nights_played_counted_and_the_window() -> None:
    n = StayNights(first=date(2026, 3, 10), count=3, lead_in=2, window_days=90)
    assert n.counted == (date(2026, 3, 10), date(2026, 3, 11), date(2026, 3, 12))
    assert n.played[:2] == (date(2026, 3, 8), date(2026, 3, 9)) and n.played[2:] == n.counted
    assert n.window(MARKET) == 30  # capped at the horizon
    checkin = datetime(2026, 3, 8, MARKET.config.check_in_hour, tzinfo=UTC)
    assert n.start(MARKET) == checkin - timedelta(days=30)
    assert n.end(MARKET) > datetime(2026, 3, 12, MARKET.config.check_in_hour, tzinfo=UTC)
    with pytest.raises(SimulatorError, match="count"):
        StayNights(first=date(2026, 3, 10), count=0)


def test_chosen_nights_start_after_the_given_day_and_cover_their_window() -> None:
    n = choose_nights(MARKET, count=4, after=date(2026, 5, 1), lead_in=1, window_days=20)
    assert n.start(MARKET).date() >= date(2026, 5, 1) and n.window(MARKET) == 20
    assert (n.first - n.start(MARKET).date()).days == 20 + 1  # the window, then the lead-in night


def test_every_counted_night_closes_and_the_ledger_matches_the_inventory() -> None:
    n = StayNights(first=date(2026, 4, 6), count=4, lead_in=2, window_days=30)
    ledger = play(MARKET, static_policy(MARKET), n, seed=9)
    assert ledger.closed()
    cfg = MARKET.config
    sold = 0
    for hotel in cfg.hotel_ids:
        for room in cfg.room_types:
            for night in n.counted:
                left = ledger.sim.checkins[(hotel, room, night)]  # type: ignore[union-attr]
                assert ledger.rooms_sold(hotel, room, night) == MARKET.capacity(hotel, room) - left
                assert ledger.history_rooms(hotel, room, night) == 0  # nothing warm-started
                sold += MARKET.capacity(hotel, room) - left
    total = ledger.total()
    assert total.rooms_sold == sold > 0
    assert total.rooms_available == ledger.capacity() * 4
    nights = ledger.per_night()
    assert abs(sum(f.revenue for f in nights.values()) - total.revenue) < 0.05
    assert abs(total.adr * total.occupancy - total.revpar) < 1e-9 and 0.0 < total.occupancy <= 1.0


def test_a_night_still_open_is_not_closed() -> None:
    n = StayNights(first=date(2026, 4, 6), count=2, lead_in=0, window_days=10)
    sim = ClosedNightsSimulation(MARKET, n, policy=static_policy(MARKET), rng_seed=1)
    ledger = NightLedger(MARKET, n, sim)
    for event in sim:
        ledger.add(event)
        if event.event_time >= datetime(2026, 4, 6, 16, tzinfo=UTC):
            break
    assert not ledger.closed()  # the first night closed, the second had not


def test_only_the_played_nights_shop_and_their_shoppers_do_not_depend_on_the_policy() -> None:
    n = StayNights(first=date(2026, 4, 6), count=2, lead_in=1, window_days=15)
    cheap = list(ClosedNightsSimulation(MARKET, n, policy=lambda o: 40.0, rng_seed=4))
    dear = list(ClosedNightsSimulation(MARKET, n, policy=lambda o: 400.0, rng_seed=4))
    assert {e.stay_date for e in cheap if e.event_type == "search"} <= set(n.played)  # type: ignore[attr-defined]
    searches = [[(e.event_time, e.hotel_id, e.stay_date) for e in run if e.event_type == "search"]  # type: ignore[attr-defined]
                for run in (cheap, dear)]
    assert searches[0] == searches[1] and len(searches[0]) > 50
    booked = [sum(e.event_type == "booking" for e in run) for run in (cheap, dear)]
    assert booked[0] > booked[1]


def test_background_nights_sell_at_the_static_price_and_history_counts_at_it() -> None:
    n = StayNights(first=date(2026, 4, 6), count=3, lead_in=0, window_days=10)
    asked: list[date] = []

    def policy(offer: object) -> float:
        asked.append(offer.stay_date)  # type: ignore[attr-defined]
        return 500.0

    ledger = play(MARKET, policy, n, seed=2, background=True)
    assert set(asked) <= set(n.counted) and asked
    cfg = MARKET.config
    history = sum(ledger.history_rooms(h, r, d) for h in cfg.hotel_ids for r in cfg.room_types for d in n.counted)
    assert history > 0  # the counted nights were open, with bookings, when the window began
    night = n.counted[0]
    by_hand = ledger.night(night)
    sold = sum(MARKET.capacity(h, r) - ledger.sim.checkins[(h, r, night)]  # type: ignore[union-attr]
               for h in cfg.hotel_ids for r in cfg.room_types)
    assert by_hand.rooms_sold == sold


def test_phases_hold_about_equal_shoppers() -> None:
    n = StayNights(first=date(2026, 4, 6), count=3, lead_in=0, window_days=30)
    cuts = shopper_phases(MARKET, n, phases=3)
    searches = [e.event_time for e in ClosedNightsSimulation(MARKET, n, rng_seed=5) if e.event_type == "search"]
    per = [sum(a <= t < b for t in searches) for a, b in zip(cuts, cuts[1:], strict=False)]
    assert sum(per) == len(searches)
    assert min(per) > 0.6 * len(searches) / 3  # shoppers come late: equal times would not come close
    assert (cuts[1] - cuts[0]) > (cuts[3] - cuts[2])
