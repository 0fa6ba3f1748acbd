"""What the feedback services share beyond :mod:`events.runtime`: parsing a contract record, draining a topic.

The services themselves are :class:`~events.runtime.Step` s on the one stream runtime (the
label join and the sampler in its transactional mode, the trainer at-least-once with its own
checkpoint); :class:`~events.runtime.Checkpoints` is re-exported here for their callers.

Example:
    >>> parse_record(b'{"event_type": "search"}')  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ...
    events.errors.EventValidationError: field 'event_id': a required field is missing
"""

from __future__ import annotations

import itertools
import os

from confluent_kafka import Message

from events.config import KafkaConfig
from events.models import Record, parse_event
from events.runtime import Checkpoints, RuntimeConfig
from events.runtime.source import Source

__all__ = ["Checkpoints", "drain", "parse_record"]

_DRAIN_POLL_S = 0.5
_drains = itertools.count()


def parse_record(raw: bytes | None) -> Record:
    """:func:`events.models.parse_event` on a Kafka value (a tombstone is an empty, invalid record).

    Raises:
        EventValidationError: not a JSON object, or not a contract record.
    """
    return parse_event(raw or b"")


def drain(kafka: KafkaConfig, topic: str, *, idle_s: float = 3.0, limit: int = 1_000_000) -> list[Message]:
    """Every committed record of ``topic`` (read_committed, every partition, fresh group), until ``idle_s`` quiet."""
    config = RuntimeConfig(name="drain", kafka=kafka, inputs=(topic,), assignment="all_partitions",
                           group_id=f"drain-{os.getpid()}-{next(_drains)}")
    source = Source(config)
    source.assign_all({})
    out: list[Message] = []
    try:
        quiet = 0.0
        while quiet < idle_s and len(out) < limit:
            got = source.poll(max_records=5000, timeout_s=_DRAIN_POLL_S)
            quiet = quiet + _DRAIN_POLL_S if not got else 0.0
            out += got
    finally:
        source.close()
    return out
