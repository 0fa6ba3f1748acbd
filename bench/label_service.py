"""Label service throughput on the real Kafka vs the pure LabelJoiner on the same events, same run.

Prints labels/s of both and their ratio: what the Kafka plumbing (read_committed reads of two topics,
one transaction per batch with the offsets, a checkpoint per batch) costs on top of the join itself.

    .venv/bin/python bench/label_service.py --decisions 20000
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np

from events.admin import create_topics, delete_topics
from events.config import KafkaConfig
from events.models import BookingEvent, CancellationEvent, PricingDecision, Record, SearchEvent
from events.producer import Producer
from events.topics import TOPICS
from feedback.labels import LabelJoiner
from feedback.services.label_service import LabelServiceConfig, run, with_request_features

HORIZON = timedelta(hours=24)
LATENESS = timedelta(minutes=5)


def scenario(n: int, seed: int = 0) -> tuple[list[PricingDecision], list[Record]]:
    """Decisions every ~10 s over 20 hotels; 30% booked within the horizon, 10% of those cancelled."""
    rng = np.random.default_rng(seed)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    features = {f"f{i}": 0.5 for i in range(25)}
    decisions, outcomes = [], []
    for i in range(n):
        d = PricingDecision(hotel_id=f"h{i % 20}", room_type="std", stay_date=date(2026, 3, 1),
                            event_time=t0 + timedelta(seconds=10 * i), request_id=uuid.uuid4(), price=100.0,
                            tier="light", complexity=0.3, latency_ms=1.0, expected_booking_prob=0.3,
                            features=features)
        decisions.append(d)
        if rng.random() < 0.3:
            b = BookingEvent(hotel_id=d.hotel_id, room_type="std", stay_date=d.stay_date, price_paid=100.0,
                             event_time=d.event_time + timedelta(hours=float(rng.uniform(0, 20))),
                             decision_id=d.decision_id)
            outcomes.append(b)
            if rng.random() < 0.1:
                cancel_at = b.event_time + timedelta(hours=1)
                outcomes.append(CancellationEvent(hotel_id=d.hotel_id, room_type="std", stay_date=d.stay_date,
                                                  booking_id=b.booking_id, event_time=cancel_at))
        if i % 5 == 0:
            outcomes.append(SearchEvent(hotel_id=d.hotel_id, room_type="std", stay_date=d.stay_date,
                                        event_time=d.event_time))
    outcomes.sort(key=lambda e: e.event_time)
    return decisions, outcomes


def pure(decisions: list[PricingDecision], outcomes: list[Record], batch: int) -> tuple[int, float]:
    joiner = LabelJoiner(HORIZON)
    merged = sorted([*decisions, *outcomes], key=lambda e: e.event_time)
    start = time.perf_counter()
    n = 0
    for i in range(0, len(merged), batch):
        top = merged[i]
        for ev in merged[i : i + batch]:
            top = ev if ev.event_time > top.event_time else top
            if isinstance(ev, PricingDecision):
                n += len(joiner.add_decision(with_request_features(ev)))
            elif isinstance(ev, BookingEvent | CancellationEvent):
                n += len(joiner.add_outcome(ev))
        n += len(joiner.advance(top.event_time - LATENESS))
    return n, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--decisions", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=1000)
    args = parser.parse_args()
    decisions, outcomes = scenario(args.decisions)
    kafka = KafkaConfig(topic_prefix=f"bench{uuid.uuid4().hex[:8]}-")
    names = ("pricing.decisions", "behaviour.events", "feedback.labels", "pricing.decisions.dlq",
             "behaviour.events.dlq")
    create_topics(kafka, [TOPICS[n] for n in names])
    try:
        with Producer(kafka, topic="pricing.decisions") as p:
            p.send_many(decisions)
        with Producer(kafka, topic="behaviour.events") as p:
            p.send_many(outcomes)
        n_pure, s_pure = pure(decisions, outcomes, args.batch)
        with tempfile.TemporaryDirectory() as tmp:
            cfg = LabelServiceConfig(kafka=kafka, checkpoint_dir=Path(tmp), max_batch=args.batch,
                                     transactional_id=f"bench-{uuid.uuid4().hex[:6]}", allowed_lateness=LATENESS)
            stats = run(cfg, max_idle_s=3.0)
    finally:
        delete_topics(kafka, names)
    records = len(decisions) + len(outcomes)
    print(f"records={records} decisions={len(decisions)}")
    print(f"pure joiner   : {n_pure} labels in {s_pure:.2f}s = {n_pure / s_pure:,.0f} labels/s "
          f"({records / s_pure:,.0f} records/s)")
    print(f"kafka service : {stats.labels} labels in {stats.elapsed_s:.2f}s = {stats.labels_per_s:,.0f} labels/s "
          f"({stats.records_per_s:,.0f} records/s, {stats.batches} transactions)")
    print(f"ratio service/pure = {stats.labels_per_s / (n_pure / s_pure):.2f}")


if __name__ == "__main__":
    main()
