"""Requests/s of the stream scorer (``serving.stream.run``) next to the same scorer called in-process.

Writes seeded features to Redis (a throwaway Feast project), produces ``--requests``
pricing requests to a uuid-prefixed ``pricing.requests`` topic on the local Kafka, then
runs the consumer-group service until the topic is drained. Prints

* ``price_batch in-process``: the scorer alone, batches of ``--batch`` (Redis reads included);
* ``price one by one``: ``Scorer.price`` per request (what the HTTP path does);
* ``stream service``: decisions/s while records flow (poll, parse, price, produce, wait
  for the acks, commit), and decisions/s of its busy time (price + produce + acks);

with each rate's ratio to the in-process batch rate.

    .venv/bin/python bench/stream_scorer.py [--requests 20000] [--batch 500] [--quick]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from decide import build_scorer, drop_features, requests_for, stay_keys, train_bundles, write_features

from events.admin import create_topics, delete_topics
from events.config import KafkaConfig
from events.producer import Producer
from events.topics import TOPICS
from features.config import FeaturesConfig
from serving.stream import StreamScorerConfig, run

TOPIC_NAMES = ("pricing.requests", "pricing.requests.dlq", "pricing.decisions")


def _rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("nan")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--hotels", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="small models (fast to train)")
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args(argv)
    kafka = KafkaConfig(bootstrap_servers=args.bootstrap, topic_prefix=f"bench{uuid.uuid4().hex[:8]}-")
    with tempfile.TemporaryDirectory() as tmp:
        features = FeaturesConfig(project=f"bench{uuid.uuid4().hex[:8]}", state_dir=Path(tmp), redis_url=args.redis_url)
        keys = stay_keys(args.hotels, seed=args.seed)
        try:
            write_features(features, keys, seed=args.seed)
            bundles = train_bundles(Path(tmp), quick=args.quick, seed=args.seed)
            requests = requests_for(keys, args.requests, seed=args.seed)
            scorer = build_scorer(bundles, keys, config=features, seed=args.seed)
            scorer.price_batch(requests[:500])  # warm-up
            t0 = time.perf_counter()
            for i in range(0, len(requests), args.batch):
                scorer.price_batch(requests[i : i + args.batch])
            batch_rate = _rate(len(requests), time.perf_counter() - t0)
            one = requests[: min(len(requests), 5_000)]
            t0 = time.perf_counter()
            for request in one:
                scorer.price(request)
            one_rate = _rate(len(one), time.perf_counter() - t0)

            create_topics(kafka, [TOPICS[n] for n in TOPIC_NAMES])
            with Producer(kafka, topic="pricing.requests") as producer:
                producer.send_many(requests)
            config = StreamScorerConfig(kafka=kafka, group_id=f"bench-{uuid.uuid4().hex[:8]}", batch_size=args.batch)
            stats = run(config, build_scorer(bundles, keys, config=features, seed=args.seed), max_idle_s=5.0)
        finally:
            drop_features(features)
            delete_topics(kafka, TOPIC_NAMES)
    print(f"{'path':<34}{'decisions':>10}{'req/s':>10}{'ratio':>8}")
    print(f"{'price_batch in-process':<34}{len(requests):>10}{batch_rate:>10,.0f}{1.0:>8.2f}")
    print(f"{'price one by one in-process':<34}{len(one):>10}{one_rate:>10,.0f}{one_rate / batch_rate:>8.2f}")
    print(f"{'stream service (flowing)':<34}{stats.decisions:>10}{stats.throughput:>10,.0f}"
          f"{stats.throughput / batch_rate:>8.2f}")
    print(f"{'stream service (busy time)':<34}{stats.decisions:>10}{stats.busy_rate:>10,.0f}"
          f"{stats.busy_rate / batch_rate:>8.2f}")
    print(f"batches {stats.batches}, by tier {dict(stats.by_tier)}, degraded {stats.degraded}, "
          f"dead-lettered {stats.dead_lettered}, run {stats.elapsed_s:.1f}s (group join and 5 s idle tail included)")


if __name__ == "__main__":
    main()
