"""The Flink feature job on the real Kafka, in the embedded MiniCluster.

One bounded run over a scripted sequence whose windows are computed by hand
below; value rows and dead letters are read from ``features.v1`` / the DLQ, window values as
Feast serves them after the online writer wrote the rows to Redis.
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
        ViewEvent(**KEY, event_time=_at(30), price_shown=70.0),  # two hours late, lateness 1 h: DLQ
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
        "out_of_orderness_ms": 5000, "allowed_lateness_ms": 3_600_000, "watermark_emit": "on-event",
        "checkpoint_interval_ms": 1000, **job,
    })
    return kafka, config


@pytest.fixture(scope="module")
def job_output(stack: StackConfig) -> tuple[KafkaConfig, list[dict], list]:
    kafka, config = publish_scripted(stack, "fj")
    run(config)
    rows = [json.loads(m.value()) for m in read_all(kafka, "features.v1")]
    dlq = read_all(kafka, "behaviour.events.dlq")
    return kafka, rows, dlq


def _final_rows(rows: list[dict]) -> dict[tuple, dict]:
    """The newest row of each (view, entity): what the online writer's compare-and-set leaves."""
    out: dict[tuple, dict] = {}
    for r in rows:
        key = (r["view"], r["hotel_id"], r.get("room_type"), r.get("stay_date"))
        if key not in out or r["version"] > out[key]["version"]:
            out[key] = r
    return out


def _served(rows: list[dict], stack: StackConfig, tmp_path: Path, *, passes: int = 1) -> tuple[dict, dict]:
    """features.v1 → online writer (tiles merged in Redis) → Feast get_online_features, for h1's stay key and h2."""
    config = FeaturesConfig(project=f"fj{uuid.uuid4().hex[:8]}", state_dir=tmp_path, redis_url=stack.redis_url)
    store = build_store(config, ttl_on_read=False)  # the events are of November 2026: past every TTL by now
    try:
        writer = OnlineWriter(config)
        for i in range(passes):  # arrival order must not matter, nor a second delivery
            shuffled = sorted(rows, key=lambda r: (r["version"] * 7919 + i) % 1000003)
            writer.write_rows([parse_row(r) for r in shuffled])
        refs = [f"{view}:{name}" for view, (_, names) in VIEWS.items() for name in names]
        entities = [{"hotel_id": "h1", "room_type": "std", "stay_date": "2026-11-20"},
                    {"hotel_id": "h2", "room_type": "std", "stay_date": "2026-11-20"}]
        table = store.get_online_features(refs, entities).to_dict()
        got = [{k.split("__")[-1]: v[i] for k, v in table.items()} for i in range(2)]
        return got[0], got[1]
    finally:
        drop_project_keys(config)


def test_served_windows_match_hand_computed_values(job_output: tuple, stack: StackConfig, tmp_path: Path) -> None:
    """Every feature, as Feast serves it: the windows as of h1's newest event (the cancellation at 3 h)."""
    _, rows, _ = job_output
    h1, h2 = _served(rows, stack, tmp_path, passes=2)
    # 1 h window of 5-min tiles: tiles from 2:00 on; the search at exactly 2:00 is in (closed tail)
    assert (h1["searches_1h"], h1["views_1h"], h1["bookings_1h"]) == (1.0, 0.0, 0.0)
    assert (h1["searches_24h"], h1["views_24h"], h1["bookings_24h"], h1["cancellations_24h"]) == (2, 3, 2, 1)
    assert h1["mean_price_shown_24h"] == pytest.approx((100 + 120 + 90) / 3)
    # the latest rate of each of c1, c2, c3 (80, 100, 95): median 95, minimum 80
    assert h1["comp_rate_median_24h"] == 95.0 and h1["comp_rate_min_24h"] == 80.0
    assert (h1["searches_7d"], h1["views_7d"], h1["bookings_7d"], h1["cancellations_7d"]) == (2, 3, 2, 1)
    assert h1["lead_time_mean_days_7d"] == 18.0 and h1["lead_time_std_days_7d"] == 0.0
    assert h1["bookings_14d"] == 2.0
    assert (h1["rooms_left"], h1["capacity"]) == (8.0, 10.0) and h1["occupancy"] == pytest.approx(0.2)
    assert (h1["hotel_searches_24h"], h1["hotel_bookings_24h"], h1["hotel_views_24h"]) == (2.0, 2.0, 3.0)
    assert h2["hotel_searches_24h"] == 1.0 and h2["searches_1h"] == 1.0 and h2["comp_rate_median_24h"] is None
    derived = derive(dict(h1))
    assert (derived["bookings_prev_7d"], derived["booking_pace_7d"], derived["look_to_book_7d"]) == (0.0, 2.0, 1.5)


def test_rows_are_window_values_as_of_the_newest_event(job_output: tuple) -> None:
    """The tile operator emits values, not partials: each view's features as of the stay's newest event."""
    _, rows, _ = job_output
    final = _final_rows(rows)
    day = final[("stay_24h", "h1", "std", "2026-11-20")]
    assert set(day["features"]) == set(VIEWS["stay_24h"][1])
    assert day["feature_time"] == int(_at(10800).timestamp() * 1000)  # the cancellation at 3 h
    # the view at 117 s came after the one at 120 s: a tile does not care about order
    assert day["features"]["mean_price_shown_24h"] == pytest.approx((100 + 120 + 90) / 3)
    week = final[("stay_7d", "h1", "std", "2026-11-20")]["features"]
    assert (week["lead_time_mean_days_7d"], week["lead_time_std_days_7d"]) == (18.0, 0.0)
    hotel = final[("hotel_stats", "h1", None, None)]
    assert hotel["features"] == {"hotel_searches_24h": 2.0, "hotel_bookings_24h": 2.0, "hotel_views_24h": 3.0}


def test_each_view_of_a_stay_gets_growing_versions_and_rejected_events_count_nowhere(job_output: tuple) -> None:
    _, rows, _ = job_output
    per_view: dict[tuple, list[int]] = defaultdict(list)
    for r in rows:  # in the order the job wrote them: each row of a (view, entity) has a greater version
        per_view[(r["view"], r["hotel_id"], r.get("room_type"), r.get("stay_date"))].append(r["version"])
    assert all(v == sorted(set(v)) for v in per_view.values())
    final = _final_rows(rows)
    # 11 valid events for h1 (offsets 0-9 and 16), none of the 5 rejected ones: the version is the last one's
    assert final[("stay_1h", "h1", "std", "2026-11-20")]["version"] == 16
    week = final[("stay_7d", "h1", "std", "2026-11-20")]["features"]
    assert (week["searches_7d"], week["views_7d"], week["bookings_7d"], week["cancellations_7d"]) == (2, 3, 2, 1)
    assert len([r for r in rows if r["view"] == "stay_inventory"]) == 1


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
    assert 'field event_type: got "teleport"' in reasons
