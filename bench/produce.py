"""Producer throughput with validation on, against raw confluent-kafka sending the same bytes.

Run: ``.venv/bin/python bench/produce.py [--events 200000] [--rounds 3] [--bootstrap 127.0.0.1:9092]``

Both sides send the same simulator records to the same broker (private uuid-named
topics, six partitions, deleted afterwards) with the same producer settings
(:func:`events.producer.producer_conf`: idempotent, ``acks=all``, lz4):

* **raw**: ``confluent_kafka.Producer.produce`` of pre-serialised key/value bytes,
  with a counting delivery callback and ``poll(0)`` per record (what any producer
  that checks deliveries does);
* **sdk bytes**: :meth:`events.producer.Producer.send_raw` of the same bytes (the
  SDK's own bookkeeping, no validation), to split the gap between SDK and validation;
* **sdk**: :meth:`events.producer.Producer.send` of the record objects, which
  re-validates every record, serialises it and keys it by hotel.

A round runs raw, sdk bytes, then sdk; the clock stops when ``flush`` has every record
acknowledged. Printed: median events/s over the rounds on the wall clock and per
CPU second of the calling thread (the "one core" the caller pays for; the
librdkafka threads run beside it), and the sdk/raw ratio. The simulator's own
rate is printed too, because ``pricestream produce`` generates and sends in one
thread, so its ceiling is ``1 / (1/simulate + 1/send)``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import timedelta

from confluent_kafka import KafkaError, Message
from confluent_kafka import Producer as KafkaProducer

from events.admin import create_topics, delete_topics
from events.config import KafkaConfig
from events.models import Record, dumps
from events.producer import Producer, producer_conf
from events.topics import TopicSpec
from market.config import MarketConfig
from market.generator import simulate
from market.market import Market

_PARTITIONS = 6  # as behaviour.events


class Timing:
    """Wall and calling-thread CPU seconds of one run."""

    def __init__(self) -> None:
        self._wall = time.perf_counter()
        self._cpu = time.thread_time()
        self.wall = self.cpu = 0.0

    def stop(self) -> Timing:
        self.wall = time.perf_counter() - self._wall
        self.cpu = time.thread_time() - self._cpu
        return self


def generate(hotels: int, n: int, seed: int) -> tuple[list[Record], Timing]:
    market = Market(MarketConfig(hotels=hotels, seed=seed))
    list(simulate(market, duration=timedelta(hours=2), max_events=2000))  # warm caches
    clock = Timing()
    events = list(simulate(market, duration=timedelta(days=365), max_events=n, rng_seed=seed + 1))
    return events, clock.stop()


def run_raw(config: KafkaConfig, topic: str, wire: Sequence[tuple[bytes, bytes]]) -> Timing:
    producer = KafkaProducer(producer_conf(config))
    delivered = 0

    def count(err: KafkaError | None, _msg: Message) -> None:
        nonlocal delivered
        delivered += err is None

    clock = Timing()
    for key, value in wire:
        while True:
            try:
                producer.produce(topic, value=value, key=key, on_delivery=count)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    left = producer.flush(120)
    clock.stop()
    if left or delivered != len(wire):
        msg = f"raw producer delivered {delivered} of {len(wire)} ({left} left)"
        raise RuntimeError(msg)
    return clock


def run_sdk(config: KafkaConfig, topic: str, events: Sequence[Record]) -> Timing:
    producer = Producer(config, topic=topic)
    clock = Timing()
    send = producer.send
    for event in events:
        send(event)
    producer.flush(120)
    clock.stop()
    if producer.stats.delivered != len(events):
        msg = f"sdk producer delivered {producer.stats.delivered} of {len(events)}"
        raise RuntimeError(msg)
    return clock


def run_sdk_bytes(config: KafkaConfig, topic: str, wire: Sequence[tuple[bytes, bytes]]) -> Timing:
    producer = Producer(config, topic=topic)
    clock = Timing()
    send_raw = producer.send_raw
    for key, value in wire:
        send_raw(key, value)
    producer.flush(120)
    clock.stop()
    if producer.stats.delivered != len(wire):
        msg = f"sdk producer delivered {producer.stats.delivered} of {len(wire)}"
        raise RuntimeError(msg)
    return clock


def _median_rate(n: int, runs: list[Timing], pick: Callable[[Timing], float]) -> float:
    return statistics.median(n / pick(t) for t in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--hotels", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--bootstrap", default=KafkaConfig().bootstrap_servers)
    args = parser.parse_args()

    events, sim = generate(args.hotels, args.events, args.seed)
    n = len(events)
    wire = [(e.key.encode(), dumps(e)) for e in events]
    config = KafkaConfig(bootstrap_servers=args.bootstrap, topic_prefix=f"bench{uuid.uuid4().hex[:8]}-")
    specs = [TopicSpec(name=name, partitions=_PARTITIONS) for name in ("raw", "sdk")]
    create_topics(config, specs)
    raw: list[Timing] = []
    sdk_bytes: list[Timing] = []
    sdk: list[Timing] = []
    try:
        run_raw(config, config.topic("raw"), wire[:5000])  # warm-up: connections, metadata
        run_sdk(config, "sdk", events[:5000])
        for _ in range(args.rounds):
            raw.append(run_raw(config, config.topic("raw"), wire))
            sdk_bytes.append(run_sdk_bytes(config, "sdk", wire))
            sdk.append(run_sdk(config, "sdk", events))
    finally:
        delete_topics(config, [spec.name for spec in specs])

    size = sum(len(v) for _, v in wire) / n
    print(f"{n} simulator events ({size:.0f} B avg), {args.rounds} rounds, {_PARTITIONS} partitions, {args.bootstrap}")
    print(f"{'':34}{'wall ev/s':>12}{'thread-cpu ev/s':>17}")
    rows = {
        "raw confluent-kafka (bytes)": raw,
        "Producer.send_raw (bytes)": sdk_bytes,
        "Producer.send (validated)": sdk,
    }
    for name, runs in rows.items():
        print(f"{name:34}{_median_rate(n, runs, lambda t: t.wall):>12,.0f}"
              f"{_median_rate(n, runs, lambda t: t.cpu):>17,.0f}")
    wall_ratio = _median_rate(n, sdk, lambda t: t.wall) / _median_rate(n, raw, lambda t: t.wall)
    cpu_ratio = _median_rate(n, sdk, lambda t: t.cpu) / _median_rate(n, raw, lambda t: t.cpu)
    print(f"ratio sdk / raw: wall {wall_ratio:.2f}, thread-cpu {cpu_ratio:.2f}")
    sim_rate = n / sim.cpu
    send_rate = _median_rate(n, sdk, lambda t: t.cpu)
    print(f"simulate(): {sim_rate:,.0f} events/s (thread-cpu); simulate+send in one thread: "
          f"{1 / (1 / sim_rate + 1 / send_rate):,.0f} events/s")


if __name__ == "__main__":
    main()
