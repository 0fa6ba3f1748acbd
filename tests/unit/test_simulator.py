"""Market simulator: determinism, monotone demand, inventory safety, ordering, policy scoring, frames."""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta

import numpy as np
import pytest

from events.catalog import ALL_FEATURES, REQUEST_FEATURES
from events.models import dumps, parse_event
from market.config import MarketConfig
from market.errors import PolicyError, SimulatorError, UnknownKeyError
from market.evaluate import oracle_policy, run_policy, static_policy
from market.frames import FRAME_COLUMNS, training_frame
from market.generator import Offer, Simulation, simulate
from market.market import Market

AT = datetime(2026, 2, 1, 9, 30, tzinfo=UTC)


@pytest.fixture(scope="module")
def market() -> Market:
    return Market(MarketConfig(hotels=3, horizon_days=45, seed=11))


def _dump_all(market: Market, seed: int, hours: int = 12) -> list[bytes]:
    return [dumps(e) for e in simulate(market, duration=timedelta(hours=hours), rng_seed=seed)]


def test_same_seed_gives_identical_events(market: Market) -> None:
    first = _dump_all(market, 5)
    second = _dump_all(Market(market.config), 5)
    assert len(first) > 100
    assert first == second


def test_different_seed_gives_different_events(market: Market) -> None:
    assert _dump_all(market, 5) != _dump_all(market, 6)


def test_different_market_seed_changes_the_truth() -> None:
    a = Market(MarketConfig(hotels=2, seed=1))
    b = Market(MarketConfig(hotels=2, seed=2))
    assert a.reference_price("h0001", "standard") != b.reference_price("h0001", "standard")


@pytest.mark.parametrize(
    ("hotel", "room", "night", "segment", "channel"),
    [
        ("h0000", "standard", date(2026, 2, 3), "leisure", "web"),
        ("h0001", "deluxe", date(2026, 2, 14), "business", "corporate"),
        ("h0002", "suite", date(2026, 3, 10), "group", "direct"),
        ("h0002", "standard", date(2026, 2, 1), "business", "ota"),
    ],
)
def test_booking_prob_strictly_decreases_in_price(
    market: Market, hotel: str, room: str, night: date, segment: str, channel: str
) -> None:
    ref = market.reference_price(hotel, room)
    prices = ref * np.exp(np.linspace(-1.5, 1.5, 40))
    probs = [market.booking_prob(hotel, room, night, AT, float(p), segment=segment, channel=channel) for p in prices]
    assert all(0.0 < p < 1.0 for p in probs)
    assert all(a > b for a, b in zip(probs, probs[1:], strict=False))


def test_competitor_rate_raises_booking_prob(market: Market) -> None:
    low = market.booking_prob("h0000", "standard", date(2026, 2, 5), AT, 120.0, segment="leisure", competitor_rate=90.0)
    high = market.booking_prob(
        "h0000", "standard", date(2026, 2, 5), AT, 120.0, segment="leisure", competitor_rate=160.0
    )
    assert high > low


def test_business_is_less_price_sensitive_than_leisure(market: Market) -> None:
    def drop(segment: str) -> float:
        ref = market.reference_price("h0000", "standard")
        p1 = market.booking_prob("h0000", "standard", date(2026, 2, 20), AT, ref, segment=segment)
        p2 = market.booking_prob("h0000", "standard", date(2026, 2, 20), AT, ref * 1.3, segment=segment)
        return p2 / p1

    assert drop("business") > drop("leisure")


def test_arrival_rate_is_zero_outside_the_booking_window(market: Market) -> None:
    night = date(2026, 2, 10)
    assert market.arrival_rate("h0000", "standard", night, AT) > 0
    after_checkin = datetime(2026, 2, 10, 16, tzinfo=UTC)
    too_early = datetime(2025, 12, 1, tzinfo=UTC)
    assert market.arrival_rate("h0000", "standard", night, after_checkin) == 0.0
    assert market.arrival_rate("h0000", "standard", night, too_early) == 0.0


def test_spike_nights_attract_more_shoppers(market: Market) -> None:
    spikes = market.spike_dates("h0000", date(2026, 1, 1), date(2027, 12, 31))
    assert 5 <= len(spikes) <= 60  # ~3% of 730 nights
    night = spikes[0]
    h = market.hotel_index("h0000")
    assert market.spike(h, night.toordinal()) >= market.config.spike_multiplier[0]
    assert market.spike(h, night.toordinal() + 1000) in (1.0, market.spike(h, night.toordinal() + 1000))


def test_optimal_price_beats_reference_in_expected_revenue(market: Market) -> None:
    night = date(2026, 2, 20)
    best = market.optimal_price("h0001", "deluxe", night, AT)
    ref = market.reference_price("h0001", "deluxe")
    best_rev = market.expected_revenue("h0001", "deluxe", night, AT, best)
    assert best_rev >= market.expected_revenue("h0001", "deluxe", night, AT, ref)
    assert best_rev >= market.expected_revenue("h0001", "deluxe", night, AT, best * 1.05)
    assert best_rev >= market.expected_revenue("h0001", "deluxe", night, AT, best * 0.95)


def test_unknown_keys_and_bad_prices_are_named(market: Market) -> None:
    with pytest.raises(UnknownKeyError, match="hotel_id"):
        market.reference_price("h9999", "standard")
    with pytest.raises(UnknownKeyError, match="segment"):
        market.booking_prob("h0000", "standard", date(2026, 2, 5), AT, 100.0, segment="pirates")
    with pytest.raises(SimulatorError, match="price"):
        market.booking_prob("h0000", "standard", date(2026, 2, 5), AT, -1.0, segment="leisure")
    with pytest.raises(SimulatorError, match="at"):
        market.arrival_rate("h0000", "standard", date(2026, 2, 5), datetime(2026, 2, 1))  # noqa: DTZ001


def test_events_are_time_ordered_and_valid(market: Market) -> None:
    events = list(simulate(market, duration=timedelta(days=3), rng_seed=3))
    times = [e.event_time for e in events]
    assert times == sorted(times)
    kinds = {e.event_type for e in events}  # type: ignore[attr-defined]
    assert kinds == {"search", "view", "booking", "cancellation", "competitor_rate", "inventory"}
    for event in events:
        parsed = parse_event(dumps(event))
        assert parsed == event
    assert all(e.event_time.tzinfo is not None for e in events)


def test_max_events_and_policy_price_are_honoured(market: Market) -> None:
    seen: list[Offer] = []

    def policy(offer: Offer) -> float:
        seen.append(offer)
        return 99.5

    events = list(simulate(market, duration=timedelta(days=2), policy=policy, max_events=400))
    assert len(events) == 400
    views = [e for e in events if e.event_type == "view"]  # type: ignore[attr-defined]
    assert views and all(v.price_shown == 99.5 for v in views)  # type: ignore[attr-defined]
    assert all(0 < o.rooms_left <= o.capacity and o.lead_time_days >= 0 for o in seen)


def test_bad_policy_price_raises(market: Market) -> None:
    with pytest.raises(PolicyError, match="policy"):
        list(simulate(market, duration=timedelta(hours=6), policy=lambda o: math.nan))


def test_never_books_beyond_capacity_under_heavy_demand() -> None:
    heavy = Market(MarketConfig(hotels=2, horizon_days=20, seed=4, shoppers_per_room_night=40.0, spike_probability=0.2))
    sim = Simulation(heavy, duration=timedelta(days=12), rng_seed=9, warm_start=False)
    net: dict[tuple[str, str, date], int] = defaultdict(int)
    rooms: dict[object, int] = {}
    last_inventory: dict[tuple[str, str, date], int] = {}
    for e in sim:
        key = (e.hotel_id, e.room_type, e.stay_date)  # type: ignore[attr-defined]
        if e.event_type == "booking":  # type: ignore[attr-defined]
            net[key] += e.rooms  # type: ignore[attr-defined]
            rooms[e.booking_id] = e.rooms  # type: ignore[attr-defined]
        elif e.event_type == "cancellation":  # type: ignore[attr-defined]
            net[key] -= rooms.pop(e.booking_id)  # type: ignore[attr-defined]
        elif e.event_type == "inventory":  # type: ignore[attr-defined]
            assert e.rooms_left >= 0  # type: ignore[attr-defined]
            last_inventory[key] = e.rooms_left  # type: ignore[attr-defined]
        if key in net:
            assert net[key] <= heavy.capacity(key[0], key[1])
    sold_out = [k for k, v in net.items() if v == heavy.capacity(k[0], k[1])]
    assert len(sold_out) >= 5  # the demand really was heavy enough to bind
    for key, left in last_inventory.items():
        assert left == heavy.capacity(key[0], key[1]) - net[key]


def test_oracle_revenue_beats_static_over_a_few_days(market: Market) -> None:
    gains = []
    for seed in (1, 2):
        result = run_policy(market, static_policy(market), days=3, seed=seed)
        assert result.policy.total_revenue == result.static.total_revenue
        gains.append(result.oracle.total_revenue / result.static.total_revenue)
        assert result.oracle.total_expected_revenue > result.static.total_expected_revenue
        assert result.frame()["static_offers"].tolist() == [d.offers for d in result.static.days]
        assert [d.day for d in result.static.days] == [date(2026, 1, 1), date(2026, 1, 2), date(2026, 1, 3)]
        occ = [d.occupancy for d in result.static.days]
        assert all(o is not None and 0.0 <= o <= 1.0 for o in occ)
    assert sum(gains) / len(gains) > 1.0


def test_oracle_policy_quotes_the_optimum(market: Market) -> None:
    offer = Offer("h0001", "standard", date(2026, 2, 9), AT, "leisure", "web", 8, 10, 40)
    assert oracle_policy(market)(offer) == market.optimal_price(
        "h0001", "standard", date(2026, 2, 9), AT, channel="web"
    )


def test_training_frame_columns_and_values(market: Market) -> None:
    df = training_frame(market, n=3000, seed=2)
    assert list(df.columns) == list(ALL_FEATURES + REQUEST_FEATURES) + [
        "base_rate",
        "booked",
        "hotel_id",
        "room_type",
        "stay_date",
        "event_time",
        "true_prob",
    ]
    assert tuple(df.columns) == FRAME_COLUMNS
    assert len(df) == 3000
    assert not df[list(REQUEST_FEATURES)].isna().any().any()
    refs = {(h, r): market.reference_price(h, r) for h, r in set(zip(df["hotel_id"], df["room_type"], strict=True))}
    assert df["base_rate"].tolist() == [refs[(h, r)] for h, r in zip(df["hotel_id"], df["room_type"], strict=True)]
    assert set(df["booked"].unique()) <= {0, 1}
    assert 0.05 < df["booked"].mean() < 0.35
    assert abs(df["booked"].mean() - df["true_prob"].mean()) < 0.03
    s = df.dropna(subset=["searches_1h", "searches_24h", "searches_7d", "rooms_left"])  # NaN: past the TTL
    assert (s["searches_1h"] <= s["searches_24h"]).all() and (s["searches_24h"] <= s["searches_7d"]).all()
    assert (s["rooms_left"] >= 1).all() and (s["rooms_left"] <= s["capacity"]).all() and len(s) > 1000
    assert df["price"].std() / df["price"].mean() > 0.2  # prices are explored
    # elasticity is learnable: offers priced above the reference book less often
    ref = np.array([market.reference_price(h, r) for h, r in zip(df["hotel_id"], df["room_type"], strict=True)])
    assert df.loc[df["price"] > ref * 1.2, "booked"].mean() < df.loc[df["price"] < ref / 1.2, "booked"].mean()


def test_training_frame_is_seeded(market: Market) -> None:
    a = training_frame(market, n=300, seed=5, days=5)
    b = training_frame(market, n=300, seed=5, days=5)
    c = training_frame(market, n=300, seed=6, days=5)
    assert a.equals(b)
    assert not a.equals(c)


def test_training_frame_with_policy_uses_its_price(market: Market) -> None:
    df = training_frame(market, n=200, seed=1, days=5, policy=lambda o: 111.0)
    assert (df["price"] == 111.0).all()
