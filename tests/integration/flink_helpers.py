"""Helpers for tests that run the feature job on the real Kafka."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable

from confluent_kafka import Consumer

from events.admin import create_topics
from events.config import KafkaConfig
from events.models import Record
from events.producer import Producer
from events.topics import TopicSpec


def make_topics(config: KafkaConfig, *, partitions: int = 1) -> None:
    names = ("behaviour.events", "behaviour.events.dlq", "features.v1")
    create_topics(config, [TopicSpec(name=n, partitions=partitions) for n in names])


def publish(config: KafkaConfig, events: Iterable[Record | bytes]) -> None:
    with Producer(config, topic="behaviour.events") as producer:
        for event in events:
            if isinstance(event, bytes):
                producer.send_raw(b"h1", event)
            else:
                producer.send(event)


def read_all(config: KafkaConfig, topic: str, *, idle_polls: int = 6) -> list:
    """Every committed record of a topic (read_committed), in partition order."""
    consumer = Consumer(
        {
            "bootstrap.servers": config.bootstrap_servers,
            "group.id": f"read-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([config.topic(topic)])
    out, idle = [], 0
    while idle < idle_polls:
        batch = [m for m in consumer.consume(num_messages=1000, timeout=1.0) if m.error() is None]
        idle = 0 if batch else idle + 1
        out.extend(batch)
    consumer.close()
    return out


def feature_rows(config: KafkaConfig) -> list[dict]:
    return [json.loads(m.value()) for m in read_all(config, "features.v1")]


def reflected_events(config: KafkaConfig, topic: str = "features.v1") -> int:
    """Source events that the newest ``stay_7d`` row of their stay reflects: its version is at or past their offset.

    A row's version is the greatest source offset of the stay's events (the tile operator's), and a
    stay's events share a partition, so an event is in the served values once a row of its stay with a
    version at or past its offset was written. Records that are not valid JSON with a stay are skipped.
    """
    newest: dict[tuple, int] = {}
    for r in (json.loads(m.value()) for m in read_all(config, topic, idle_polls=2)):
        if r["view"] == "stay_7d":
            stay = (r["hotel_id"], r["room_type"], r["stay_date"])
            newest[stay] = max(newest.get(stay, -1), r["version"])
    counted = 0
    for msg in read_all(config, "behaviour.events", idle_polls=2):
        try:
            body = json.loads(msg.value())
            stay = (body["hotel_id"], body["room_type"], body["stay_date"])
        except (ValueError, KeyError, TypeError):
            continue
        counted += newest.get(stay, -1) >= msg.offset()
    return counted
