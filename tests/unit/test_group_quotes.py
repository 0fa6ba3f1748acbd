"""Group quotes by displacement: the domain rule on the real scorer, and the HTTP endpoint's refusals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pricing.feature_source import MemoryFeatureSource
from pricing.groups import GroupQuoter, NightValue, quote_group
from pricing.models import DemandModelConfig
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from pricing.tiers import load_pricer
from pricing.training import train_bundle
from routing.router import Thresholds, TieredRouter
from serving.http import ServiceConfig, create_app
from tests.unit._light_frame import light_frame

TODAY = datetime.now(UTC).date()
QUIET = TODAY + timedelta(days=20)
BUSY = TODAY + timedelta(days=10)
RULES = "min_price: 60\nmax_price: 500\ndefault_base_rate: 150\n"
SCARCE = {"searches_7d": 80.0, "views_7d": 80.0, "rooms_left": 12.0, "occupancy": 0.9}
PLENTIFUL = {"searches_7d": 2.0, "views_7d": 2.0, "rooms_left": 150.0, "occupancy": 0.1}


@pytest.fixture(scope="module")
def scorer(tmp_path_factory: pytest.TempPathFactory) -> Scorer:
    source = MemoryFeatureSource()
    for night in range(60):
        day = TODAY + timedelta(days=night)
        source.put("h1", "std", day, SCARCE if day == BUSY else PLENTIFUL)
    root = Path(tmp_path_factory.mktemp("groups"))
    bundle = train_bundle(light_frame(), root / "light", tier="light", config=DemandModelConfig(num_trees=30)).path
    return Scorer(ScorerConfig(stale_after_s=None), rules=RuleSet.from_yaml(RULES), feature_source=source,
                  light=load_pricer(bundle), heavy=None,
                  router=TieredRouter(Thresholds(rules_below=0.0, heavy_above=1.0)))


def test_the_quote_is_the_floor_where_nothing_is_displaced_and_rises_on_a_night_near_selling_out(
    scorer: Scorer,
) -> None:
    quoter = GroupQuoter(scorer, margin=0.1)
    from events.models import PricingRequest

    def ask(day: object, rooms: int) -> tuple[PricingRequest, int]:
        return PricingRequest(hotel_id="h1", room_type="std", stay_date=day, event_time=datetime.now(UTC)), rooms

    quiet, quiet_nights = quoter.quote([ask(QUIET, 10), ask(QUIET + timedelta(days=1), 10)])
    assert [n.bid for n in quiet_nights] == [0.0, 0.0]
    assert (quiet.minimum_rate, quiet.displaced_revenue, quiet.feasible) == (60.0, 0.0, True)
    assert quiet.recommended_rate == 66.0
    busy, busy_nights = quoter.quote([ask(BUSY, 10)])
    assert busy_nights[0].bid > 60.0  # the last rooms of a busy night are worth more than the floor
    assert busy.minimum_rate == round(busy_nights[0].bid, 2) > quiet.minimum_rate
    assert busy.displaced_revenue == round(10 * busy_nights[0].bid, 2)
    too_many, _ = quoter.quote([ask(BUSY, 20)])
    assert (too_many.feasible, too_many.short_nights) == (False, (BUSY,))


def test_displacement_sums_over_nights_and_the_margin_stays_under_the_ceiling() -> None:
    nights = [NightValue(QUIET, rooms=5, bid=100.0, floor=60.0, ceiling=500.0),
              NightValue(BUSY, rooms=5, bid=300.0, floor=60.0, ceiling=210.0)]
    q = quote_group(nights, margin=0.5)
    assert (q.displaced_revenue, q.room_nights, q.minimum_rate) == (2000.0, 10, 200.0)
    assert q.recommended_rate == 210.0  # +50% capped at the lowest ceiling of the stay


@pytest.mark.parametrize(("body", "field"), [
    ({"hotel_id": "h1", "room_type": "std", "nights": []}, "nights"),
    ({"hotel_id": "h1", "room_type": "std", "nights": [{"stay_date": str(QUIET), "rooms": -2}]}, "nights[0].rooms"),
    ({"hotel_id": "h1", "room_type": "std", "block": {"arrival": str(QUIET), "nights": 3, "rooms": 0}},
     "block.rooms"),
    ({"hotel_id": "h1", "room_type": "std", "block": {"arrival": str(TODAY + timedelta(days=900)), "nights": 2,
                                                      "rooms": 5}}, "block.arrival"),
    ({"hotel_id": "h1", "room_type": "std", "nights": [{"stay_date": str(QUIET), "rooms": 2},
                                                       {"stay_date": str(QUIET), "rooms": 2}]},
     "nights[1].stay_date"),
])
def test_the_group_endpoint_refuses_a_bad_block_with_a_4xx_naming_the_field(
    scorer: Scorer, body: dict[str, object], field: str
) -> None:
    client = TestClient(create_app(scorer, ServiceConfig(freeze_gc=False), groups=GroupQuoter(scorer)))
    r = client.post("/v1/quote:group", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"] == field


def test_the_group_endpoint_quotes_and_audits_a_block(scorer: Scorer) -> None:
    audited: list[dict[str, object]] = []
    client = TestClient(create_app(scorer, ServiceConfig(freeze_gc=False), groups=GroupQuoter(scorer),
                                   group_audit=audited.append))
    body = {"hotel_id": "h1", "room_type": "std", "block": {"arrival": str(QUIET), "nights": 3, "rooms": 8}}
    r = client.post("/v1/quote:group", json=body)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert (answer["room_nights"], answer["minimum_rate"], answer["feasible"]) == (24, 60.0, True)
    assert [n["stay_date"] for n in answer["nights"]] == [str(QUIET + timedelta(days=i)) for i in range(3)]
    assert audited == [answer]
