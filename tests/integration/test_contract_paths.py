"""One contract, every path: the SDK's parser and the Flink job give the same verdict and name the same field.

One bounded job run over generated events (200 valid, 200 with one defect each, drawn from the
contract spec), the issue's hostile records and the public dataset's edge cases, on the real Kafka.
The job's DLQ headers name the field (``error_field``); a valid event shows up in the feature rows:
the offsets not dead-lettered are taken as valid only when every stay among them has a final
``stay_24h`` row whose version is the greatest offset of its events (the tile operator's version).
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime

import confluent_kafka
import pytest

from events.catalog import SPECS
from events.config import KafkaConfig
from events.contract import HotelProfile
from events.errors import EventValidationError
from events.models import BookingEvent, CancellationEvent, SearchEvent, ViewEvent, dumps, parse_event
from infra.config import StackConfig
from pipelines.config import FeatureJobConfig
from pipelines.feature_job import run
from tests.integration.flink_helpers import make_topics, read_all
from tests.strategies import draw_examples, encode, invalid_event, stay_before_event, valid_event

pytestmark = [pytest.mark.integration, pytest.mark.flink]

EVENING_NY = datetime(2026, 7, 1, 23, 30, tzinfo=UTC)  # 19:30 in New York on July 1, already July 2 in UTC
STAY = date(2026, 7, 1)


def _hostile() -> list[tuple[bytes, str | None]]:
    """The records of issue 11, each with the field the contract names (None: valid)."""
    view = json.loads(dumps(ViewEvent(hotel_id="h1", room_type="std", stay_date=date(2026, 12, 24),
                                      event_time=datetime(2026, 6, 1, tzinfo=UTC), price_shown=120.0)))
    raw = json.dumps(view).encode()

    def patched(**patch: object) -> bytes:
        return json.dumps(view | patch).encode()

    booking = json.loads(dumps(BookingEvent(hotel_id="h1", room_type="std", stay_date=date(2026, 12, 24),
                                            event_time=datetime(2026, 6, 1, tzinfo=UTC), price_paid=90.0)))
    no_booking_id = {k: v for k, v in booking.items() if k not in ("booking_id", "price_paid")}
    return [
        (patched(price_shown="NaN"), "price_shown"),
        (raw.replace(b"120.0", b"NaN"), "price_shown"),
        (raw.replace(b"120.0", b"Infinity"), "price_shown"),
        (raw.replace(b"120.0", b"1e309"), "price_shown"),
        (json.dumps(booking | {"rooms": -2}).encode(), "rooms"),
        (patched(schema_version=2), "schema_version"),
        (patched(hotel_id=42), "hotel_id"),
        (patched(room_type=7), "room_type"),
        (patched(hotel_id="h" * 200), "hotel_id"),
        (patched(event_id="not-a-uuid"), "event_id"),
        (json.dumps(no_booking_id | {"event_type": "cancellation"}).encode(), "booking_id"),
        (raw.replace(b'"h1"', b'"h\xff("'), "<record>"),
        (raw.replace(b'"h1"', b'"h\\ud800"'), "<record>"),
        (raw + b" trailing garbage", "<record>"),
        (patched(event_time=-1), "event_time"),
        (patched(event_time=1e20), "event_time"),
        (json.dumps(booking | {"nights": 61}).encode(), "nights"),
        (patched(price_shown=1e9), "price_shown"),
        (patched(hotel_id="h\u2028"), "hotel_id"),
        (b'{"event_type": "view", "pad": "' + b"x" * 2_000_000 + b'"}', "<record>"),  # once crashed the job
        (raw[:-1] + b', "hotel_id": "h2"}', "hotel_id"),  # a key twice: readers disagree on which value wins
        (patched(hotel_id="h\u200b1"), "hotel_id"),  # a zero-width space: prints like h1
        (patched(room_type="   "), "room_type"),  # all spaces
    ]


def _dataset_edges() -> list[tuple[bytes, str | None]]:
    """Hotel Booking Demand edge cases, as decided in events/contract.py: all accepted."""
    resort = {"hotel_id": "Resort Hotel", "room_type": "A", "stay_date": STAY, "event_time": EVENING_NY}
    return [
        (dumps(BookingEvent(**resort, price_paid=0.0, nights=3, segment="Complementary")), None),
        (dumps(BookingEvent(**resort, price_paid=0.0, nights=0)), None),
        (dumps(BookingEvent(**resort, price_paid=5400.0, nights=1)), None),
        (dumps(CancellationEvent(**resort, booking_id=uuid.uuid4())), None),
        (dumps(SearchEvent(hotel_id="City Hotel", room_type="A", stay_date=STAY, event_time=EVENING_NY)), None),
    ]


def _sdk_field(raw: bytes, hotels: dict[str, HotelProfile]) -> str | None:
    try:
        parse_event(raw, context={"hotels": hotels})
    except EventValidationError as exc:
        return exc.field
    return None


@pytest.fixture(scope="module")
def verdicts(stack: StackConfig) -> tuple[list[tuple[bytes, str | None]], dict[int, str | None], list]:
    valid = sorted(draw_examples(valid_event(), 200), key=lambda e: e["event_time"])
    samples = [(encode(e), None) for e in valid] + _dataset_edges()
    samples += [(encode(e), f) for e, f in draw_examples(invalid_event(), 200)]
    samples += [(encode(e), f) for e, f in draw_examples(stay_before_event(), 20)]
    samples += _hostile()
    kafka = KafkaConfig(bootstrap_servers=stack.kafka_bootstrap, topic_prefix=f"cp{uuid.uuid4().hex[:8]}-")
    make_topics(kafka, partitions=1)
    # a third-party client (not our SDK, which refuses it) that lets a 2 MB record through (lz4 packs
    # it far below the broker's limit)
    producer = confluent_kafka.Producer({"bootstrap.servers": stack.kafka_bootstrap, "compression.type": "lz4",
                                         "message.max.bytes": 4_000_000, "enable.idempotence": True})
    for raw, _ in samples:
        producer.produce(kafka.topic("behaviour.events"), key=b"k", value=raw)
        producer.poll(0)
    assert producer.flush(30) == 0
    hotels = {"Resort Hotel": HotelProfile(zone="America/New_York", price_range=(40.0, 500.0))}
    config = FeatureJobConfig(bootstrap_servers=stack.kafka_bootstrap, topic_prefix=kafka.topic_prefix,
                              connector_jar=stack.flink_kafka_connector_jar, bounded=True, startup="earliest-offset",
                              out_of_orderness_ms=5000, watermark_emit="on-event",
                              checkpoint_interval_ms=1000, hotels=hotels, group_id=f"cp-{uuid.uuid4().hex[:6]}")
    run(config)
    job: dict[int, str | None] = {}
    dlq = read_all(kafka, "behaviour.events.dlq")
    for msg in dlq:
        headers = {k: v.decode() for k, v in msg.headers()}
        job[int(headers["source_offset"])] = headers["error_field"]
        assert len(msg.value()) <= min(int(headers["payload_bytes"]), 262_144)
    rows = [json.loads(m.value()) for m in read_all(kafka, "features.v1")]
    final = _final_rows(rows, "stay_24h")
    newest: dict[tuple, int] = {}  # stay -> greatest offset of its events not dead-lettered
    rest = [offset for offset in range(len(samples)) if offset not in job]
    for offset in rest:
        body = json.loads(samples[offset][0])
        stay = (body["hotel_id"], body["room_type"], body["stay_date"])
        newest[stay] = max(newest.get(stay, -1), offset)
    if {stay: final[stay]["version"] for stay in newest if stay in final} == newest:
        job.update(dict.fromkeys(rest))
    return samples, job, rows


def _final_rows(rows: list[dict], view: str) -> dict[tuple, dict]:
    """The newest value row of each entity of ``view``."""
    out: dict[tuple, dict] = {}
    for r in rows:
        key = (r["hotel_id"], r.get("room_type"), r.get("stay_date"))
        if r["view"] == view and (key not in out or r["version"] > out[key]["version"]):
            out[key] = r
    return out


def test_sdk_and_flink_give_the_same_verdict_and_field(verdicts: tuple) -> None:
    samples, job, _ = verdicts
    hotels = {"Resort Hotel": HotelProfile(zone="America/New_York", price_range=(40.0, 500.0))}
    assert len(samples) >= 400 + len(_hostile())
    disagreements = []
    for offset, (raw, expected) in enumerate(samples):
        sdk = _sdk_field(raw, hotels)
        if offset not in job or sdk != expected or job[offset] != expected:
            disagreements.append((offset, expected, sdk, job.get(offset, "<lost>"), raw[:120]))
    assert disagreements == []


_HOSTILE_IDS = ["nan-string", "nan", "infinity", "1e309", "rooms-2", "schema-v2", "numeric-hotel", "numeric-room",
                "long-hotel", "bad-uuid", "cancel-no-booking", "bad-utf8", "lone-surrogate", "trailing", "time-minus-1",
                "time-1e20", "nights-61", "price-1e9", "u2028", "2mb", "duplicate-key", "zero-width", "all-space"]


@pytest.mark.parametrize("index", range(len(_HOSTILE_IDS)), ids=_HOSTILE_IDS)
def test_each_hostile_record_of_the_issue_is_dead_lettered_naming_its_field(verdicts: tuple, index: int) -> None:
    samples, job, _ = verdicts
    offset = len(samples) - len(_HOSTILE_IDS) + index
    raw, field = samples[offset]
    assert (field, job.get(offset, "<lost>")) == (_hostile()[index][1], field)
    assert _sdk_field(raw, {}) == field


def test_dataset_edge_cases_are_counted_and_kept_out_of_prices(verdicts: tuple) -> None:
    """The two ADR-0 bookings count as bookings; the 5,400 outlier counts too, but no price moves."""
    _, _, rows = verdicts
    stays = [r for r in _final_rows(rows, "stay_24h").values() if r["hotel_id"] == "Resort Hotel"]
    last = max(stays, key=lambda r: r["version"])["features"]
    assert set(last) == set(SPECS["stay_24h"].names)
    assert last["bookings_24h"] == 3.0 and last["cancellations_24h"] == 1.0
    assert last["mean_price_shown_24h"] is None
