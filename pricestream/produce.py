"""``pricestream produce``: publish simulated behaviour events at a steady rate."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from confluent_kafka import Consumer, TopicPartition

from events.config import KafkaConfig
from events.contract import HotelProfile
from events.errors import EventValidationError
from events.producer import Producer
from market import Market, MarketConfig, simulate

_PACE_CHUNK = 500  # events sent between pacing checks: small enough for a smooth rate


@dataclass(frozen=True)
class ProduceReport:
    sent: int
    delivered: int
    failed: int
    rejected: int
    dlq_records: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.sent / self.seconds if self.seconds else 0.0


def dlq_size(config: KafkaConfig, topic: str = "behaviour.events.dlq") -> int:
    """Records currently in the DLQ topic (sum of high watermarks)."""
    consumer = Consumer({**config.client_conf(), "group.id": "pricestream-dlq-peek"})
    name = config.topic(topic)
    meta = consumer.list_topics(name, timeout=10).topics.get(name)
    total = 0
    for pid in (meta.partitions if meta and meta.partitions else {}):
        low, high = consumer.get_watermark_offsets(TopicPartition(name, pid), timeout=10)
        total += high - low
    consumer.close()
    return total


def produce(
    config: KafkaConfig,
    *,
    hotels: int,
    rate: float,
    duration_s: float,
    seed: int = 7,
    start: datetime | None = None,
    profiles: Mapping[str, HotelProfile] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> ProduceReport:
    """Publish ``rate × duration_s`` simulated events, paced to ``rate`` per second.

    Event times are simulated market time starting at ``start`` (default: now), so a
    few seconds of wall clock can hold days of market activity.
    """
    begin = start or datetime.now(tz=UTC)
    market = Market(MarketConfig(hotels=hotels, seed=seed, start=begin))
    target = int(rate * duration_s)
    dlq_before = dlq_size(config)
    rejected = 0
    t0 = time.perf_counter()
    with Producer(config, topic="behaviour.events", hotels=profiles) as producer:
        stream = simulate(market, start=begin, duration=timedelta(days=365), max_events=target, rng_seed=seed)
        for i, event in enumerate(stream, start=1):
            try:
                producer.send(event)
            except EventValidationError:
                rejected += 1
            if i % _PACE_CHUNK == 0:
                ahead = i / rate - (time.perf_counter() - t0)
                if ahead > 0:
                    time.sleep(ahead)
                if on_progress is not None:
                    on_progress(_PACE_CHUNK)
    seconds = time.perf_counter() - t0
    stats = producer.stats
    return ProduceReport(
        sent=stats.sent, delivered=stats.delivered, failed=stats.failed, rejected=rejected,
        dlq_records=dlq_size(config) - dlq_before, seconds=seconds,
    )
