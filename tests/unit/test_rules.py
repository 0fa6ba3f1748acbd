"""Rules engine: validation on load, each rule kind, outright decisions, bounds invariants."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events.models import CHANNELS, PricingRequest
from pricing.errors import RuleSetError
from pricing.rules import RuleSet, is_closed

DEFAULT = Path(__file__).resolve().parents[2] / "pricing" / "rules" / "default.yaml"
NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)

HEAD = "min_price: 20\nmax_price: 1000\ndefault_base_rate: 100\n"


def req(lead: int = 30, *, hotel: str = "h1", room: str = "std", channel: str = "web", last: float | None = None):
    return PricingRequest(
        hotel_id=hotel,
        room_type=room,
        stay_date=NOW.date() + timedelta(days=lead),
        event_time=NOW,
        channel=channel,
        last_published_price=last,
    )


def rules(body: str) -> RuleSet:
    return RuleSet.from_yaml(HEAD + "rules:\n" + body)


# ---------------------------------------------------------------- validation


def test_default_file_loads_with_its_rule_ids() -> None:
    rs = RuleSet.load(DEFAULT)
    ids = [r.id for r in rs.spec.rules]
    assert "floor-default" in ids and "parity-ota-gds" in ids and len(ids) == len(set(ids))


def test_negative_floor_names_rule_and_field() -> None:
    with pytest.raises(RuleSetError) as info:
        rules("  - {id: floor-bad, kind: floor, price: -5}\n")
    assert (info.value.rule_id, info.value.field, info.value.value) == ("floor-bad", "price", -5)
    assert "floor-bad" in str(info.value) and "'price'" in str(info.value)


def test_unknown_kind_names_kind_field() -> None:
    with pytest.raises(RuleSetError) as info:
        rules("  - {id: weird, kind: surge, factor: 2}\n")
    assert (info.value.rule_id, info.value.field, info.value.value) == ("weird", "kind", "surge")


def test_unknown_field_and_missing_field_are_named() -> None:
    with pytest.raises(RuleSetError) as extra:
        rules("  - {id: lm, kind: last_minute, lead_time_at_most_days: 3, occupancy_below: 0.5, factor: 0.9, x: 1}\n")
    assert (extra.value.rule_id, extra.value.field) == ("lm", "x")
    with pytest.raises(RuleSetError) as missing:
        rules("  - {id: lm, kind: last_minute, occupancy_below: 0.5, factor: 0.9}\n")
    assert (missing.value.rule_id, missing.value.field) == ("lm", "lead_time_at_most_days")


def test_floor_above_ceiling_in_a_shared_scope_is_refused() -> None:
    with pytest.raises(RuleSetError) as info:
        rules("  - {id: f-h1, kind: floor, hotel: h1, price: 300}\n  - {id: c-all, kind: ceiling, price: 200}\n")
    assert info.value.rule_id == "f-h1" and "c-all" in info.value.expected


def test_more_specific_floor_may_undercut_a_default_floor() -> None:
    rs = rules(
        "  - {id: f-all, kind: floor, price: 300}\n"
        "  - {id: c-h2, kind: ceiling, hotel: h2, price: 200}\n"
        "  - {id: f-h2, kind: floor, hotel: h2, price: 50}\n"
    )
    out = rs.evaluate(req(hotel="h2"), {})
    assert (out.floor, out.ceiling, out.fired) == (50.0, 200.0, ("f-h2", "c-h2"))


def test_global_bounds_and_duplicate_ids() -> None:
    with pytest.raises(RuleSetError) as bounds:
        RuleSet.from_yaml("min_price: 100\nmax_price: 50\n")
    assert bounds.value.field == "max_price"
    with pytest.raises(RuleSetError) as dup:
        rules("  - {id: a, kind: floor, price: 30}\n  - {id: a, kind: ceiling, price: 300}\n")
    assert (dup.value.rule_id, dup.value.field) == ("a", "id")


def test_yaml_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(RuleSetError) as info:
        RuleSet.from_yaml("- just\n- a list\n")
    assert info.value.field == "<root>"


# ---------------------------------------------------------------- rule kinds


def test_base_rate_and_ladders() -> None:
    rs = RuleSet.from_yaml(
        HEAD + "base_rates: [{hotel: h1, room_type: suite, rate: 300}]\n"
        "occupancy_ladder: [{occupancy_at_least: 0.0, factor: 0.9}, {occupancy_at_least: 0.8, factor: 1.2}]\n"
        "lead_time_ladder: [{lead_time_at_most_days: 7, factor: 1.1}]\n"
    )
    assert rs.evaluate(req(room="suite"), {"occupancy": 0.85}).rule_price == pytest.approx(360.0)
    assert rs.evaluate(req(lead=3), {"occupancy": 0.5}).rule_price == pytest.approx(100 * 0.9 * 1.1)
    missing = rs.evaluate(req(), {"occupancy": None})
    assert missing.rule_price == 100.0 and "occupancy_ladder" not in missing.fired


def test_floor_and_ceiling_bound_the_rule_price() -> None:
    rs = rules("  - {id: f, kind: floor, price: 150}\n  - {id: c, kind: ceiling, price: 400}\n")
    out = rs.evaluate(req(), {})
    assert (out.floor, out.ceiling, out.rule_price) == (150.0, 400.0, 150.0)
    assert out.clamp(10.0) == 150.0 and out.clamp(1e9) == 400.0 and out.clamp(math.nan) == 150.0


def test_closed_dates_decide_at_ceiling() -> None:
    rs = rules(
        "  - {id: c, kind: ceiling, price: 400}\n"
        "  - {id: shut, kind: closed_dates, hotel: h1, ranges: [{start: 2026-06-10, end: 2026-06-12}]}\n"
    )
    out = rs.evaluate(req(lead=10), {})
    assert (out.decided_price, out.closed, out.floor, out.fired[-1]) == (400.0, True, 400.0, "shut")
    assert rs.evaluate(req(lead=13), {}).decided_price is None
    assert rs.evaluate(req(lead=10, hotel="h2"), {}).closed is False
    assert is_closed(rs, "h1", "std", date(2026, 6, 11)) is True


@pytest.mark.parametrize(
    ("action", "expected"),
    [("ceiling", 400.0), ("premium", 125.0)],
)
def test_last_rooms_decides_outright(action: str, expected: float) -> None:
    rs = rules(
        "  - {id: c, kind: ceiling, price: 400}\n"
        f"  - {{id: last, kind: last_rooms, rooms_left_at_most: 2, action: {action}, premium: 1.25}}\n"
    )
    out = rs.evaluate(req(), {"rooms_left": 2, "occupancy": 0.5})
    assert out.decided_price == expected and out.floor == out.ceiling == expected and "last" in out.fired
    assert rs.evaluate(req(), {"rooms_left": 3}).decided_price is None
    assert rs.evaluate(req(), {"rooms_left": None}).decided_price is None


def test_last_rooms_no_discount_blocks_last_minute_and_raises_floor() -> None:
    rs = rules(
        "  - {id: last, kind: last_rooms, rooms_left_at_most: 1, action: no_discount}\n"
        "  - {id: lm, kind: last_minute, lead_time_at_most_days: 3, occupancy_below: 0.6, factor: 0.8}\n"
    )
    out = rs.evaluate(req(lead=1), {"rooms_left": 1, "occupancy": 0.3})
    assert out.floor == 100.0 and out.rule_price == 100.0 and "lm" not in out.fired and out.decided_price is None


def test_last_minute_discount_needs_short_lead_and_low_occupancy() -> None:
    rs = rules("  - {id: lm, kind: last_minute, lead_time_at_most_days: 3, occupancy_below: 0.6, factor: 0.8}\n")
    assert rs.evaluate(req(lead=2), {"occupancy": 0.4}).rule_price == pytest.approx(80.0)
    assert rs.evaluate(req(lead=4), {"occupancy": 0.4}).rule_price == 100.0
    assert rs.evaluate(req(lead=2), {"occupancy": 0.7}).rule_price == 100.0
    assert rs.evaluate(req(lead=2), {"occupancy": math.nan}).rule_price == 100.0
    decided = rules(
        "  - {id: lm, kind: last_minute, lead_time_at_most_days: 3, occupancy_below: 0.6, factor: 0.8, decide: true}\n"
    )
    assert decided.evaluate(req(lead=0), {"occupancy": 0.1}).decided_price == pytest.approx(80.0)


def test_channel_parity_sets_price_and_band() -> None:
    rs = rules("  - {id: par, kind: channel_parity, channels: [ota], factor: 1.1, max_spread: 0.05}\n")
    ota = rs.evaluate(req(channel="ota"), {})
    assert ota.rule_price == pytest.approx(110.0)
    assert (ota.floor, ota.ceiling) == (pytest.approx(104.5), pytest.approx(115.5))
    web = rs.evaluate(req(channel="web"), {})
    assert (web.rule_price, web.floor, "par" in web.fired) == (100.0, 20.0, False)
    strict = rules("  - {id: par, kind: channel_parity, factor: 1.0}\n")
    assert strict.evaluate(req(channel="gds"), {}).decided_price == pytest.approx(100.0)


def test_channel_parity_not_below_only_raises_the_floor() -> None:
    rs = rules("  - {id: par, kind: channel_parity, channels: [ota], factor: 1.1, mode: not_below}\n")
    ota = rs.evaluate(req(channel="ota"), {})
    assert (ota.floor, ota.ceiling, ota.rule_price) == (pytest.approx(110.0), 1000.0, pytest.approx(110.0))
    assert ota.decided_price is None and "par" in ota.fired
    assert rs.evaluate(req(channel="web"), {}).floor == 20.0
    with pytest.raises(RuleSetError, match="mode"):
        rules("  - {id: par, kind: channel_parity, mode: above}\n")


def test_max_change_limits_move_from_last_published_price() -> None:
    rs = rules("  - {id: mc, kind: max_change, max_pct: 0.1}\n")
    out = rs.evaluate(req(last=200.0), {})
    assert (out.floor, out.ceiling, out.rule_price) == (
        pytest.approx(180.0),
        pytest.approx(220.0),
        pytest.approx(180.0),
    )
    assert "mc" in out.fired
    assert rs.evaluate(req(last=None), {}).floor == 20.0


def test_max_change_band_outside_hard_bounds_collapses_to_nearest_bound() -> None:
    rs = rules("  - {id: c, kind: ceiling, price: 300}\n  - {id: mc, kind: max_change, max_pct: 0.1}\n")
    out = rs.evaluate(req(last=900.0), {})
    assert out.decided_price == 300.0 and out.floor == out.ceiling == 300.0


# ---------------------------------------------------------------- invariants

_DEFAULT_RULES = RuleSet.load(DEFAULT)
_maybe = st.one_of(st.none(), st.just(math.nan), st.floats(-5, 500, allow_nan=False))


@settings(max_examples=300, deadline=None)
@given(
    lead=st.integers(0, 500),
    hotel=st.sampled_from(["h1", "h_city_7", "h_beach"]),
    room=st.sampled_from(["std", "double", "suite"]),
    channel=st.sampled_from(CHANNELS),
    last=st.one_of(st.none(), st.floats(1.0, 1e5)),
    occupancy=_maybe,
    rooms_left=_maybe,
    probe=st.floats(allow_nan=True, allow_infinity=True),
)
def test_every_price_is_finite_positive_and_inside_bounds(
    lead: int,
    hotel: str,
    room: str,
    channel: str,
    last: float | None,
    occupancy: float | None,
    rooms_left: float | None,
    probe: float,
) -> None:
    spec = _DEFAULT_RULES.spec
    out = _DEFAULT_RULES.evaluate(
        req(lead, hotel=hotel, room=room, channel=channel, last=last),
        {"occupancy": occupancy, "rooms_left": rooms_left},
    )
    assert spec.min_price <= out.floor <= out.ceiling <= spec.max_price
    prices = [out.rule_price, out.clamp(probe)] + ([out.decided_price] if out.decided_price is not None else [])
    for price in prices:
        assert math.isfinite(price) and price > 0 and out.floor <= price <= out.ceiling
