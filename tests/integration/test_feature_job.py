"""The Flink feature job on the real Kafka, in the embedded MiniCluster.

One bounded run over a scripted sequence whose windows are computed by hand
below; every assertion reads ``features.v1`` / the DLQ with read_committed.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from events.catalog import VIEWS, derive
from events.config import KafkaConfig
from events.models import (
    BookingEvent,
    CancellationEvent,
    CompetitorRateEvent,
    InventoryEvent,
    SearchEvent,
    ViewEvent,
)
from features.config import FeaturesConfig
from features.online_writer import OnlineWriter
from features.rows import parse_row
from features.store import build_store
from infra.config import StackConfig
from pipelines.config import FeatureJobConfig
from pipelines.feature_job import run
from tests.integration._features_helpers import drop_project_keys
from tests.integration.flink_helpers import make_topics, publish, read_all

pytestmark = [pytest.mark.integration, pytest.mark.flink]

T0 = datetime(2026, 11, 1, 12, tzinfo=UTC)
STAY = date(2026, 11, 20)
KEY = {"hotel_id": "h1", "room_type": "std", "stay_date": STAY}


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _raw(event_type: str, seconds: float, **fields: object) -> bytes:
    body = {"event_type": event_type, "event_id": str(uuid.uuid4()), "schema_version": 1,
            "event_time": int(_at(seconds).timestamp() * 1000), **fields}
    return json.dumps(body).encode()


def scripted() -> list:
    booking = BookingEvent(**KEY, event_time=_at(240), price_paid=110.0, rooms=2)
    return [
        SearchEvent(**KEY, event_time=_at(0)),
        ViewEvent(**KEY, event_time=_at(60), price_shown=100.0),
        ViewEvent(**KEY, event_time=_at(120), price_shown=120.0),
        ViewEvent(**KEY, event_time=_at(117), price_shown=90.0),  # out of order, within the 5 s bound
        CompetitorRateEvent(**KEY, event_time=_at(180), competitor_id="c1", rate=80.0),
        CompetitorRateEvent(**KEY, event_time=_at(181), competitor_id="c2", rate=100.0),
        CompetitorRateEvent(**KEY, event_time=_at(182), competitor_id="c3", rate=95.0),
        booking,
        InventoryEvent(**KEY, event_time=_at(240), rooms_left=8, capacity=10),
        SearchEvent(**KEY, event_time=_at(7200)),
        ViewEvent(**KEY, event_time=_at(30), price_shown=70.0),  # two hours late: DLQ
        b"{garbage",
        _raw("view", 7201, hotel_id="h1", room_type="std", stay_date="2026-11-20", price_shown=-3),
        _raw("search", 7202, hotel_id="h1", room_type="std", stay_date="2026-10-01"),
        _raw("teleport", 7203, hotel_id="h1", room_type="std", stay_date="2026-11-20"),
        SearchEvent(hotel_id="h2", room_type="std", stay_date=STAY, event_time=_at(7201)),
        CancellationEvent(**KEY, event_time=_at(10800), booking_id=booking.booking_id, rooms=1),
    ]


def publish_scripted(stack: StackConfig, tag: str, **job: object) -> tuple[KafkaConfig, FeatureJobConfig]:
    """The scripted events on fresh ``tag``-prefixed topics, and a bounded job config that reads them."""
    kafka = KafkaConfig(bootstrap_servers=stack.kafka_bootstrap, topic_prefix=f"{tag}{uuid.uuid4().hex[:8]}-")
    make_topics(kafka, partitions=1)
    publish(kafka, scripted())
    config = FeatureJobConfig.model_validate({
        "bootstrap_servers": stack.kafka_bootstrap, "topic_prefix": kafka.topic_prefix,
        "connector_jar": stack.flink_kafka_connector_jar, "bounded": True, "startup": "earliest-offset",
        "out_of_orderness_ms": 5000, "watermark_emit": "on-event", "checkpoint_interval_ms": 1000, **job,
    })
    return kafka, config


@pytest.fixture(scope="module")
def job_output(stack: StackConfig) -> tuple[KafkaConfig, list[dict], list]:
    kafka, config = publish_scripted(stack, "fj")
    run(config)
    rows = [json.loads(m.value()) for m in read_all(kafka, "features.v1")]
    dlq = read_all(kafka, "behaviour.events.dlq")
    return kafka, rows, dlq


def _latest(rows: list[dict], view: str, hotel: str = "h1") -> dict:
    mine = [r for r in rows if r["view"] == view and r["hotel_id"] == hotel]
    return max(mine, key=lambda r: r["version"])


def test_windows_match_hand_computed_values(job_output: tuple) -> None:
    _, rows, _ = job_output
    assert _latest(rows, "stay_1h")["features"] == {"searches_1h": 1.0, "views_1h": 0.0, "bookings_1h": 0.0}
    day = _latest(rows, "stay_24h")["features"]
    assert day["searches_24h"] == 2.0 and day["views_24h"] == 3.0
    assert day["bookings_24h"] == 2.0 and day["cancellations_24h"] == 1.0
    assert day["mean_price_shown_24h"] == pytest.approx((100 + 120 + 90) / 3)
    assert day["comp_rate_median_24h"] == 95.0 and day["comp_rate_min_24h"] == 80.0
    week = _latest(rows, "stay_7d")["features"]
    assert (week["searches_7d"], week["views_7d"], week["bookings_7d"], week["cancellations_7d"]) == (2, 3, 2, 1)
    assert week["lead_time_mean_days_7d"] == 18.0 and week["lead_time_std_days_7d"] == 0.0
    assert _latest(rows, "stay_14d")["features"] == {"bookings_14d": 2.0}
    inventory = _latest(rows, "stay_inventory")["features"]
    assert inventory == pytest.approx({"rooms_left": 8.0, "capacity": 10.0, "occupancy": 0.2})
    hotel = _latest(rows, "hotel_stats")["features"]
    assert hotel == {"hotel_searches_24h": 2.0, "hotel_bookings_24h": 2.0, "hotel_views_24h": 3.0}
    assert _latest(rows, "hotel_stats", "h2")["features"]["hotel_searches_24h"] == 1.0
    derived = derive({**week, **_latest(rows, "stay_14d")["features"]})
    assert (derived["bookings_prev_7d"], derived["booking_pace_7d"], derived["look_to_book_7d"]) == (0.0, 2.0, 1.5)


def test_out_of_order_event_within_bound_is_counted_at_its_time(job_output: tuple) -> None:
    _, rows, _ = job_output
    views = sorted((r for r in rows if r["view"] == "stay_24h" and r["hotel_id"] == "h1"), key=lambda r: r["version"])
    at_117 = next(r for r in views if r["feature_time"] == int(_at(117).timestamp() * 1000))
    # in event-time order the 90 view comes before the 120 view
    assert at_117["features"]["views_24h"] == 2.0
    assert at_117["features"]["mean_price_shown_24h"] == pytest.approx(95.0)


def test_every_valid_event_yields_one_row_per_view_with_increasing_versions(job_output: tuple) -> None:
    _, rows, _ = job_output
    per_key: dict[tuple, list[int]] = defaultdict(list)
    for r in rows:
        per_key[(r["view"], r["hotel_id"], r["room_type"], r["stay_date"])].append(r["version"])
    for view in ("stay_1h", "stay_24h", "stay_7d", "stay_14d", "hotel_stats"):
        stay = (None, None) if view == "hotel_stats" else ("std", "2026-11-20")
        versions = per_key[(view, "h1", *stay)]
        assert len(versions) == 11  # 11 valid events for h1, none for the 5 rejected ones
        assert len(set(versions)) == 11
    assert len(per_key[("stay_inventory", "h1", "std", "2026-11-20")]) == 1


def test_bad_and_late_events_reach_the_dlq_with_reasons(job_output: tuple) -> None:
    kafka, _, dlq = job_output
    assert len(dlq) == 5
    by_class: dict[str, list[str]] = defaultdict(list)
    for msg in dlq:
        headers = {k: v.decode() for k, v in msg.headers()}
        assert headers["source_topic"] == kafka.topic("behaviour.events")
        assert int(headers["source_offset"]) >= 0
        by_class[headers["error_class"]].append(headers["error_message"])
    assert len(by_class["LateEvent"]) == 1
    assert [m.split(" (")[0] for m in by_class["MalformedRecord"]] == ["record: not JSON"]
    reasons = " | ".join(by_class["ValidationError"])
    assert "field price_shown: got -3" in reasons
    assert 'field stay_date: got "2026-10-01", expected a stay_date on or after the event\'s local date 2026-11-01' \
        in reasons
    assert "field event_type: got teleport" in reasons


def test_feast_online_read_returns_the_hand_computed_values(
    job_output: tuple, stack: StackConfig, tmp_path: Path
) -> None:
    """features.v1 → online writer (Lua compare-and-set) → Redis → Feast get_online_features."""
    _, rows, _ = job_output
    config = FeaturesConfig(project=f"fj{uuid.uuid4().hex[:8]}", state_dir=tmp_path, redis_url=stack.redis_url)
    store = build_store(config)
    try:
        shuffled = sorted(rows, key=lambda r: (r["version"] * 7919) % 1000003)  # arrival order must not matter
        OnlineWriter(config).write_rows([parse_row(r) for r in shuffled])
        refs = [f"{view}:{name}" for view, (_, names) in VIEWS.items() for name in names]
        entity = {"hotel_id": "h1", "room_type": "std", "stay_date": "2026-11-20"}
        got = {k.split("__")[-1]: v[0] for k, v in store.get_online_features(refs, [entity]).to_dict().items()}
        assert got["searches_24h"] == 2.0 and got["views_24h"] == 3.0 and got["bookings_24h"] == 2.0
        assert got["mean_price_shown_24h"] == pytest.approx(310 / 3)
        assert got["comp_rate_median_24h"] == 95.0 and got["comp_rate_min_24h"] == 80.0
        assert got["searches_1h"] == 1.0 and got["bookings_14d"] == 2.0 and got["cancellations_7d"] == 1.0
        assert got["rooms_left"] == 8.0 and got["occupancy"] == pytest.approx(0.2)
        assert got["hotel_views_24h"] == 3.0
    finally:
        drop_project_keys(config)
