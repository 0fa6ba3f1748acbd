"""Create the registry's topics (idempotent) and describe them."""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from events.config import KafkaConfig
from events.errors import TopicError
from events.topics import TOPICS, TopicSpec


def admin_client(config: KafkaConfig) -> AdminClient:
    return AdminClient({**config.client_conf(), "log_level": 0})


def create_topics(
    config: KafkaConfig, specs: Iterable[TopicSpec] | None = None, *, timeout_s: float = 30.0
) -> dict[str, str]:
    """Create every topic that does not exist yet; returns name -> "created" | "exists".

    On a cluster of three brokers or more, topics get replication factor 3 and ``min.insync.replicas`` 2.

    Raises:
        TopicError: a topic could not be created for another reason than existing.
    """
    admin = admin_client(config)
    wanted = list(TOPICS.values() if specs is None else specs)
    meta = admin.list_topics(timeout=timeout_s)
    existing = set(meta.topics)
    # three brokers or more: every topic on three of them, and an acks=all write on two before it is acknowledged
    replication, insync = (3, {"min.insync.replicas": "2"}) if len(meta.brokers) >= 3 else (1, {})
    result: dict[str, str] = {}
    new = []
    for spec in wanted:
        name = config.topic(spec.name)
        if name in existing:
            result[name] = "exists"
            continue
        new.append(
            NewTopic(name, num_partitions=spec.partitions, replication_factor=replication,
                     config={"retention.ms": str(spec.retention_ms), "cleanup.policy": spec.cleanup_policy, **insync})
        )
    if not new:
        return result
    for name, future in admin.create_topics(new, operation_timeout=timeout_s).items():
        try:
            future.result(timeout=timeout_s)
            result[name] = "created"
        except KafkaException as exc:
            if exc.args and getattr(exc.args[0], "name", lambda: "")() == "TOPIC_ALREADY_EXISTS":
                result[name] = "exists"
                continue
            msg = f"could not create topic {name!r}: {exc}"
            raise TopicError(msg) from exc
    return result


def create_topic(config: KafkaConfig, name: str, *, partitions: int = 3) -> str:
    """Create one ad-hoc topic (tests, tenants) with the registry's defaults."""
    return create_topics(config, [TopicSpec(name=name, partitions=partitions)])[config.topic(name)]


def delete_topics(config: KafkaConfig, names: Iterable[str], *, timeout_s: float = 30.0) -> None:
    admin = admin_client(config)
    futures = admin.delete_topics([config.topic(n) for n in names], operation_timeout=timeout_s)
    for future in futures.values():
        try:
            future.result(timeout=timeout_s)
        except KafkaException:
            continue  # already gone is fine for a cleanup
