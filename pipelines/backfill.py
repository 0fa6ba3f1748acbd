"""Backfill: replay a historical topic or a set of event files through the feature job, bounded.

A file set is first published, line by line and unchanged (the job, not the publisher, applies the
contract: a bad line reaches the DLQ with its reason like any event), to its own backfill topic;
then the job reads that topic (or the historical topic given) from the earliest offset to the
offsets that were latest at its start, with a fresh consumer group, its own checkpoints and an
allowed lateness of years by default: historical files are rarely in event-time order (the Hotel
Booking Demand dataset is in file order), and a late event within the lateness updates its old
tile instead of going to the DLQ.

Example:
    >>> from pathlib import Path
    >>> from pipelines.config import FeatureJobConfig
    >>> base = FeatureJobConfig(connector_jar=Path("/x.jar"), checkpoint_dir=Path("/s/ck"))
    >>> job = backfill_config(base, source_topic="history.2017", run_id="r1")
    >>> job.bounded, job.startup, job.group_id, job.allowed_lateness_ms // 86_400_000
    (True, 'earliest-offset', 'pricestream-backfill-r1', 3650)
    >>> str(job.checkpoint_dir)
    '/s/ck-backfill-r1'
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from events.admin import create_topics
from events.config import KafkaConfig
from events.errors import EventValidationError
from events.producer import Producer
from events.topics import TopicSpec
from pipelines.config import FeatureJobConfig

BACKFILL_LATENESS_MS = 3650 * 86_400_000
"""Default allowed lateness of a backfill: ten years, so that no historical event is refused as late."""
BACKFILL_TOPIC = "behaviour.events.backfill"
"""Where a file set is published before the job reads it (suffixed with the run id)."""
BACKFILL_PARTITIONS = 6


@dataclass
class Published:
    """What :func:`publish_files` sent: records, and the lines it could not (too large), as ``file:line``."""

    records: int = 0
    refused: list[str] = field(default_factory=list)


def backfill_config(base: FeatureJobConfig, *, source_topic: str, run_id: str,
                    allowed_lateness_ms: int | None = None) -> FeatureJobConfig:
    """``base`` turned into a bounded replay of ``source_topic``: earliest offset, fresh group and checkpoints."""
    checkpoints = base.checkpoint_dir.with_name(f"{base.checkpoint_dir.name}-backfill-{run_id}") \
        if base.checkpoint_dir is not None else None
    return base.model_copy(update={
        "source_topic": source_topic, "bounded": True, "startup": "earliest-offset",
        "group_id": f"pricestream-backfill-{run_id}", "restore_from": None, "checkpoint_dir": checkpoints,
        "transactional_id_prefix": f"{base.transactional_id_prefix}-backfill-{run_id}",
        "allowed_lateness_ms": BACKFILL_LATENESS_MS if allowed_lateness_ms is None else allowed_lateness_ms,
    })


def prepare_topics(kafka: KafkaConfig, source_topic: str) -> None:
    """The replayed topic's dead-letter topic (``<topic>.dlq``), where its refused records go."""
    create_topics(kafka, [TopicSpec(name=f"{source_topic}.dlq", partitions=1)])


def lines(paths: Iterable[Path]) -> Iterator[tuple[str, bytes]]:
    """(``file:line``, the line's bytes) of every non-blank line of the files, in order."""
    for path in paths:
        with path.open("rb") as fh:
            for number, raw in enumerate(fh, start=1):
                line = raw.rstrip(b"\r\n")
                if line.strip():
                    yield f"{path}:{number}", line


def _key(line: bytes) -> bytes:
    """The hotel id as the record key (a hotel's events share a partition), or empty when unreadable."""
    try:
        body = json.loads(line)
    except ValueError:
        return b""
    hotel = body.get("hotel_id") if isinstance(body, dict) else None
    return hotel.encode() if isinstance(hotel, str) else b""


def publish_files(kafka: KafkaConfig, topic: str, paths: Iterable[Path], *,
                  progress: Callable[[int], None] | None = None) -> Published:
    """Publish every line of ``paths`` unchanged to ``topic`` (created if missing); returns what was sent."""
    create_topics(kafka, [TopicSpec(name=topic, partitions=BACKFILL_PARTITIONS)])
    done = Published()
    with Producer(kafka, topic=topic) as producer:
        for where, line in lines(paths):
            try:
                producer.send_raw(_key(line), line)
            except EventValidationError as exc:
                done.refused.append(f"{where}: {exc}")
                continue
            done.records += 1
            if progress is not None and done.records % 1000 == 0:
                progress(done.records)
    return done
