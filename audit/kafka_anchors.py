"""The audit log's anchors on a Kafka topic (``audit.heads``): a second home for its heads, off the host.

:class:`TopicAnchorPublisher` is an :class:`~audit.log.AuditLog` ``on_anchor`` hook: every anchor
record the log appends to its anchor file is also produced to the topic, keyed by the log's id (one
topic serves every replica's log). :func:`read_topic_anchors` reads back the anchors of one log for
``pricestream audit verify``.

On a secure stack the topic has its own ACL (:data:`infra.kafka_security.GRANTS`): the scorer may
write it and nothing else (no read, no delete); only the admin reads it. An editor of the serving
host who deletes the ``.head`` and anchor files and cuts the log still leaves the topic's anchors,
and records there cannot be removed without ``DELETE`` on the topic. Each record is MAC'd with the
audit key, so an appended record without the key is refused by the check.

A failed send is logged (never raised): the file anchor is already durable, and a decision must not
wait for Kafka.

Example:
    >>> log_id("/srv/state/data/audit/decisions.jsonl")
    'srv-state-data-audit-decisions.jsonl'
"""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from audit.anchors import Anchors, check_anchors
from audit.errors import AuditLogError
from events.config import KafkaConfig

TOPIC = "audit.heads"
_READ_TIMEOUT_S = 10.0
_POLL_S = 0.5
_FLUSH_S = 10.0

_log = logging.getLogger(__name__)


def log_id(path: str | Path) -> str:
    """The key of one log's anchors on the topic: its absolute path, as a flat name."""
    return str(Path(path).resolve()).strip("/").replace("/", "-")


class TopicAnchorPublisher:
    """Produce each anchor record of one audit log to the anchors topic (an ``on_anchor`` hook).

    Args:
        kafka: the Kafka to publish to (the serving process's principal).
        log_path: the audit log (its :func:`log_id` keys the records).
        topic: logical topic name (the config's prefix is added).
    """

    def __init__(self, kafka: KafkaConfig, log_path: str | Path, *, topic: str = TOPIC) -> None:
        self.topic = kafka.topic(topic)
        self.key = log_id(log_path).encode("utf-8")
        self.failed = 0
        self._producer = Producer({**kafka.client_conf(), "enable.idempotence": True, "acks": "all",
                                   "linger.ms": 0, "log_level": 0})

    def __call__(self, record: dict[str, Any]) -> None:
        payload = json.dumps(record, sort_keys=True, separators=(",", ":")).encode("utf-8")
        try:
            self._producer.produce(self.topic, payload, key=self.key, on_delivery=self._delivered)
        except (KafkaException, BufferError) as exc:  # e.g. the topic is known to be refused: never raise here
            self.failed += 1
            _log.warning("audit anchor not published to %s: %s (the anchor file holds it)", self.topic, exc)
        self._producer.poll(0)

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.failed += 1
            _log.warning("audit anchor not published to %s: %s (the anchor file holds it)", self.topic, err.str())

    def close(self) -> None:
        """Wait (bounded) for the anchors in flight."""
        self._producer.flush(_FLUSH_S)


def read_topic_anchors(kafka: KafkaConfig, log_path: str | Path, key: bytes, *, topic: str = TOPIC,
                       timeout_s: float = _READ_TIMEOUT_S) -> tuple[str, Anchors]:
    """``(where, anchors)`` of one log read from the topic (every record up to its end), for :func:`verify`.

    Raises:
        AuditLogError: the topic cannot be read (names it and the broker's reason).
    """
    name = kafka.topic(topic)
    where = f"topic {name!r}"
    wanted = log_id(log_path).encode("utf-8")
    consumer = Consumer({**kafka.client_conf(), "group.id": f"pricestream-audit-verify-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "isolation.level": "read_committed", "log_level": 0})
    lines: list[bytes] = []
    try:
        meta = consumer.list_topics(name, timeout=timeout_s).topics.get(name)
        if meta is None or meta.error is not None:
            reason = "missing" if meta is None else meta.error.str()
            msg = f"audit anchors: {where} cannot be read ({reason}); expected the topic of the serving deployment"
            raise AuditLogError(msg)
        for partition in sorted(meta.partitions):
            lines += _records(consumer, TopicPartition(name, partition, OFFSET_BEGINNING), wanted, timeout_s)
    except KafkaException as exc:
        msg = f"audit anchors: {where} cannot be read ({exc}); expected a reachable broker and READ on it"
        raise AuditLogError(msg) from exc
    finally:
        consumer.close()
    return where, check_anchors(lines, key, where=where, chained=False)


def _records(consumer: Consumer, tp: TopicPartition, wanted: bytes, timeout_s: float) -> list[bytes]:
    """Values of the records keyed ``wanted`` in one partition, from its start to its end at the call."""
    _, high = consumer.get_watermark_offsets(tp, timeout=timeout_s)
    consumer.assign([tp])
    out: list[bytes] = []
    position, idle = 0, 0.0
    while position < high and idle < timeout_s:
        msg = consumer.poll(_POLL_S)
        if msg is None:
            idle += _POLL_S
            continue
        if msg.error() is not None:
            raise KafkaException(msg.error())
        idle, position = 0.0, int(msg.offset() or 0) + 1
        if msg.key() == wanted:
            out.append(msg.value() or b"")
    consumer.unassign()
    return out
