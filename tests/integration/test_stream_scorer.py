"""The stream scorer on the real Kafka: requests in, one decision per valid request out, the rest in the DLQ."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Message

from events.admin import create_topics
from events.config import KafkaConfig
from events.consumer import DLQ_HEADERS
from events.models import PricingDecision, PricingRequest, SearchEvent, dumps
from events.producer import Producer
from events.topics import TOPICS
from market.synthetic import training_frame
from pricing.feature_source import MemoryFeatureSource
from pricing.models import DemandModelConfig
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from pricing.tiers import load_pricer
from pricing.training import train_bundle
from routing.router import TieredRouter
from serving.stream import StreamScorerConfig, run

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
RULES = Path(__file__).resolve().parents[2] / "pricing" / "rules" / "default.yaml"
N_VALID = 240


@pytest.fixture(scope="module")
def light_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bundles") / "light"
    return train_bundle(training_frame(1_500, seed=3), out, tier="light", config=DemandModelConfig(num_trees=15)).path


def _scorer(light: Path, cls: type[Scorer] = Scorer) -> Scorer:
    source = MemoryFeatureSource()
    for h in range(6):
        for d in range(10):
            source.put(f"h{h}", "std", date(2026, 12, 1) + timedelta(days=d),
                       {"occupancy": 0.1 * (h + 2), "rooms_left": 12.0, "capacity": 40.0, "searches_7d": 80.0},
                       version=7, event_time=T0 - timedelta(seconds=30))
    # a generous deadline: on a loaded CI machine a deadline fallback would be a (correct) degraded decision
    return cls(ScorerConfig(deadline_ms=60_000.0), rules=RuleSet.load(RULES), feature_source=source,
                  light=load_pricer(light), heavy=None, router=TieredRouter())


def _requests(n: int) -> list[PricingRequest]:
    return [PricingRequest(hotel_id=f"h{i % 6}", room_type="std", stay_date=date(2026, 12, 1) + timedelta(days=i % 10),
                           nights=1 + i % 3, event_time=T0 + timedelta(milliseconds=i)) for i in range(n)]


INVALID: tuple[bytes, ...] = (
    b"not json",
    b'{"event_type": "pricing_request", "hotel_id": "h1", "room_type": "std", "stay_date": "2026-12-02", "nights": 0}',
    b'{"event_type": "pricing_request", "room_type": "std", "stay_date": "2026-12-02"}',
    b"[1, 2]",
    # crashed serve-stream on every start before the contract bounded event_time (datetime overflow)
    b'{"event_type": "pricing_request", "hotel_id": "h1", "room_type": "std", "stay_date": "2026-12-02",'
    b' "nights": 1, "event_time": 1e20}',
)


def _drain(config: KafkaConfig, topic: str, expect: int, *, idle_polls: int = 6) -> list[Message]:
    consumer = Consumer({"bootstrap.servers": config.bootstrap_servers, "group.id": f"g{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([config.topic(topic)])
    out: list[Message] = []
    idle = 0
    while idle < idle_polls and (len(out) < expect or idle < 2):
        batch = [m for m in consumer.consume(num_messages=1000, timeout=1.0) if m.error() is None]
        idle = idle + 1 if not batch else 0
        out.extend(batch)
    consumer.close()
    return out


def test_one_decision_per_valid_request_and_invalid_ones_dead_lettered(
    kafka_config: KafkaConfig, light_bundle: Path
) -> None:
    names = ("pricing.requests", "pricing.requests.dlq", "pricing.decisions")
    create_topics(kafka_config, [TOPICS[n] for n in names])
    requests = _requests(N_VALID)
    search = SearchEvent(hotel_id="h1", room_type="std", stay_date=date(2026, 12, 2), event_time=T0)
    with Producer(kafka_config, topic="pricing.requests") as producer:
        producer.send_many(requests[: N_VALID // 2])
        for raw in (*INVALID, dumps(search)):
            producer.send_raw(b"h1", raw)
        producer.send_many(requests[N_VALID // 2 :])
    config = StreamScorerConfig(kafka=kafka_config, group_id=f"scorer-{uuid.uuid4().hex[:8]}", batch_size=64)

    stats = run(config, _scorer(light_bundle), max_idle_s=6.0)

    n_bad = len(INVALID) + 1
    assert (stats.polled, stats.decisions, stats.dead_lettered) == (N_VALID + n_bad, N_VALID, n_bad)
    assert stats.by_tier["light"] > 0 and stats.degraded == 0
    msgs = _drain(kafka_config, "pricing.decisions", N_VALID)
    got = [PricingDecision.model_validate_json(m.value()) for m in msgs]
    assert sorted(str(d.request_id) for d in got) == sorted(str(r.request_id) for r in requests)
    by_request = {r.request_id: r for r in requests}
    assert all(d.hotel_id == by_request[d.request_id].hotel_id and d.feature_version == 7 for d in got)
    assert all(m.key() == d.hotel_id.encode() for m, d in zip(msgs, got, strict=True))
    assert {m.key() for m in msgs} == {f"h{h}".encode() for h in range(6)}

    dlq = _drain(kafka_config, "pricing.requests.dlq", n_bad)
    assert sorted(m.value() for m in dlq) == sorted((*INVALID, dumps(search)))
    for msg in dlq:
        headers = dict(msg.headers() or [])
        assert tuple(headers)[:5] == DLQ_HEADERS and "payload_bytes" in headers
        assert headers["source_topic"] == kafka_config.topic("pricing.requests").encode()
        assert headers["error_class"] == b"EventValidationError"
    wrong_kind = next(m for m in dlq if m.value() == dumps(search))
    assert b"event_type" in dict(wrong_kind.headers() or [])["error_message"]


def test_offsets_committed_after_delivery_so_a_restart_prices_nothing_twice(
    kafka_config: KafkaConfig, light_bundle: Path
) -> None:
    create_topics(kafka_config, [TOPICS[n] for n in ("pricing.requests", "pricing.requests.dlq", "pricing.decisions")])
    with Producer(kafka_config, topic="pricing.requests") as producer:
        producer.send_many(_requests(50))
    config = StreamScorerConfig(kafka=kafka_config, group_id=f"scorer-{uuid.uuid4().hex[:8]}", batch_size=16)
    first = run(config, _scorer(light_bundle), max_idle_s=6.0)
    with Producer(kafka_config, topic="pricing.requests") as producer:
        producer.send_many(_requests(7))
    second = run(config, _scorer(light_bundle), max_idle_s=6.0)

    assert (first.decisions, second.decisions) == (50, 7)
    assert len(_drain(kafka_config, "pricing.decisions", 57)) == 57


class _FailsOn(Scorer):
    """The real scorer, except that it raises on one hotel (a request the scorer cannot price)."""

    def price_batch(self, requests: list[PricingRequest], **kwargs: object) -> list[PricingDecision]:  # type: ignore[override]
        if any(r.hotel_id == "h-poison" for r in requests):
            msg = "field 'hotel_id': got 'h-poison', expected a hotel this scorer can price"
            raise ValueError(msg)
        return super().price_batch(requests, **kwargs)  # type: ignore[arg-type]


def test_a_request_the_scorer_cannot_price_is_isolated_and_dead_lettered_the_batch_priced(
    kafka_config: KafkaConfig, light_bundle: Path
) -> None:
    create_topics(kafka_config, [TOPICS[n] for n in ("pricing.requests", "pricing.requests.dlq", "pricing.decisions")])
    requests = _requests(40)
    poison = requests[17].model_copy(update={"hotel_id": "h-poison"})
    with Producer(kafka_config, topic="pricing.requests") as producer:
        producer.send_many([*requests[:17], poison, *requests[18:]])
    config = StreamScorerConfig(kafka=kafka_config, group_id=f"scorer-{uuid.uuid4().hex[:8]}", batch_size=64)
    stats = run(config, _scorer(light_bundle, _FailsOn), max_idle_s=6.0)

    assert (stats.decisions, stats.dead_lettered) == (39, 1)
    decisions = _drain(kafka_config, "pricing.decisions", 39)
    got = {PricingDecision.model_validate_json(m.value()).request_id for m in decisions}
    assert got == {r.request_id for i, r in enumerate(requests) if i != 17}
    (dead,) = _drain(kafka_config, "pricing.requests.dlq", 1)
    assert PricingRequest.model_validate_json(dead.value()).request_id == poison.request_id
    headers = dict(dead.headers() or [])
    assert headers["error_class"] == b"ValueError" and b"h-poison" in headers["error_message"]
