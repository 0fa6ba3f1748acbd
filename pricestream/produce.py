"""``pricestream produce``: publish simulated behaviour events at a steady rate."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from confluent_kafka import Consumer, TopicPartition

from events.config import KafkaConfig
from events.contract import HotelProfile
from events.errors import EventValidationError
from events.models import Record
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


def _ending_now(stream: Callable[[], Iterator[Record]]) -> Iterator[Record]:
    """The events of ``stream()`` moved back so that the last one is now (the stream is run twice, seeded alike).

    Event times move back by the stream's span; stay dates by its whole days only, so every lead time
    grows by less than a day and a stay date never falls before its event's (local) date. An event the
    second run places past now (it should not: same seed) is clamped to now.

    Example:
        >>> from datetime import date
        >>> from events.models import ViewEvent
        >>> t = datetime.now(tz=UTC) + timedelta(hours=30)
        >>> evs = [ViewEvent(hotel_id="h1", room_type="std", stay_date=date(2030, 1, 2), price_shown=90.0,
        ...                  event_time=t + timedelta(hours=h)) for h in (0, 2)]
        >>> moved = list(_ending_now(lambda: iter(evs)))
        >>> [e.event_time <= datetime.now(tz=UTC) for e in moved], [str(e.stay_date) for e in moved]
        ([True, True], ['2030-01-01', '2030-01-01'])
    """
    last = None
    for last in stream():  # noqa: B007 - only the last event time is wanted (before the clock of the rate starts)
        pass
    now = datetime.now(tz=UTC)
    if last is None or last.event_time <= now:
        return stream()
    return _shifted(stream(), now - last.event_time, now)


def _shifted(events: Iterator[Record], shift: timedelta, now: datetime) -> Iterator[Record]:
    days = timedelta(days=math.trunc(shift / timedelta(days=1)))  # toward zero: a lead time only grows
    for event in events:
        update: dict[str, object] = {"event_time": min(event.event_time + shift, now)}
        if hasattr(event, "stay_date"):
            update["stay_date"] = event.stay_date + days
        yield type(event).model_construct(**{**event.__dict__, **update})  # the producer validates it again


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

    Event times are simulated market time, so a few seconds of wall clock can hold days of market
    activity. From ``start`` when given; by default the stream ends now (:func:`_ending_now`): no event
    is in the future, so a snapshot as of now sees every one (issue 31 item 19: up to 24 h ahead).
    """
    begin = start or datetime.now(tz=UTC)
    target = int(rate * duration_s)

    def stream() -> Iterator[Record]:
        market = Market(MarketConfig(hotels=hotels, seed=seed, start=begin))
        return simulate(market, start=begin, duration=timedelta(days=365), max_events=target, rng_seed=seed)

    events = stream() if start is not None else _ending_now(stream)
    dlq_before = dlq_size(config)
    rejected = 0
    t0 = time.perf_counter()
    with Producer(config, topic="behaviour.events", hotels=profiles) as producer:
        for i, event in enumerate(events, start=1):
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
