"""Kafka plumbing shared by the feedback services: a reader, a transactional writer, checkpoints.

* :class:`InputReader` reads every partition of its input topics (static
  assignment, no group rebalancing: the label join needs decisions and outcomes
  in one process) with ``isolation.level=read_committed`` and tracks the next
  offset of every partition it has handed out.
* :class:`TransactionalWriter` wraps a transactional producer whose
  ``transactional.id`` is stable per service instance, so a restarted instance
  fences its zombie and aborts whatever the dead one left open. A batch's output
  records and the input offsets go into one transaction
  (``send_offsets_to_transaction``): consume-transform-produce exactly once.
* :class:`Checkpoints` keeps operator state that must move in step with those
  offsets. The state after batch *n* is written (atomically, fsynced) *before*
  transaction *n* commits, tagged with the offsets that the transaction commits.
  On restart, the broker's committed offsets say which transaction won, and the
  checkpoint carrying exactly those offsets is the matching state. The previous
  checkpoint is kept until the next commit succeeds, so an aborted transaction
  always has its predecessor to fall back to.

Example:
    >>> import tempfile
    >>> ck = Checkpoints(tempfile.mkdtemp())
    >>> _ = ck.save(1, {"t:0": 5}, {"n": 1}); _ = ck.save(2, {"t:0": 9}, {"n": 2})
    >>> ck.restore({"t:0": 5}), ck.restore({"t:0": 9}), ck.restore({})
    ({'n': 1, '_seq': 1}, {'n': 2, '_seq': 2}, None)
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from events.config import KafkaConfig
from events.consumer import dlq_headers
from events.models import Record, parse_event
from feedback.errors import FeedbackError

Offsets = dict[str, int]
"""``"topic:partition" -> next offset to read``."""

_CKPT_PREFIX = "ckpt-"
_KEEP = 2  # the last committed state and the one being committed
# A partition no fetch has answered for yet would otherwise count as "behind" and hold event time
# back; one metadata round trip settles it (bounded: a broker that does not answer leaves it behind).
_WATERMARK_TIMEOUT_S = 5.0


def parse_record(raw: bytes | None) -> Record:
    """:func:`events.models.parse_event` on a Kafka value (a tombstone is an empty, invalid record).

    Raises:
        EventValidationError: not a JSON object, or not a contract record.
    """
    return parse_event(raw or b"")


def _key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


class InputReader:
    """Read all partitions of ``topics`` from given offsets, read_committed, no auto-commit.

    Args:
        kafka: connection settings (its prefix is applied to ``topics``).
        topics: logical topic names.
        group_id: consumer group that stores the committed offsets.
    """

    def __init__(self, kafka: KafkaConfig, *, topics: Sequence[str], group_id: str) -> None:
        self.topics = tuple(kafka.topic(t) for t in topics)
        self._consumer = Consumer(
            {
                **kafka.client_conf(),
                "group.id": group_id,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
            }
        )
        meta = self._consumer.list_topics(timeout=30)
        self._partitions = []
        for topic in self.topics:
            info = meta.topics.get(topic)
            if info is None or info.error is not None:
                msg = f"field 'topics': topic {topic!r} does not exist (create it with events.admin.create_topics)"
                raise FeedbackError(msg)
            self._partitions += [TopicPartition(topic, p) for p in sorted(info.partitions)]
        self.next_offsets: Offsets = {}

    def committed(self) -> Offsets:
        """Offsets the group committed (only partitions with a commit)."""
        try:
            parts = self._consumer.committed(self._partitions, timeout=30)
        except KafkaException as exc:
            msg = f"could not read committed offsets of {self.topics}: {exc}"
            raise FeedbackError(msg) from exc
        return {_key(tp.topic, tp.partition): tp.offset for tp in parts if tp.offset >= 0}

    def assign(self, offsets: Mapping[str, int]) -> None:
        """Start every partition at ``offsets`` (the beginning where none is given)."""
        parts = [
            TopicPartition(tp.topic, tp.partition, offsets.get(_key(tp.topic, tp.partition), OFFSET_BEGINNING))
            for tp in self._partitions
        ]
        self._consumer.assign(parts)
        self.next_offsets = {k: v for k, v in offsets.items()}

    def poll(self, *, max_records: int, timeout_s: float) -> list[Message]:
        """Up to ``max_records`` messages; advances :attr:`next_offsets` past them."""
        out = []
        for msg in self._consumer.consume(num_messages=max_records, timeout=timeout_s):
            err = msg.error()
            if err is None:
                out.append(msg)
                self.next_offsets[_key(str(msg.topic()), int(msg.partition() or 0))] = int(msg.offset() or 0) + 1
            elif err.code() != KafkaError._PARTITION_EOF:
                msg_text = f"consumer error on {self.topics}: {err}"
                raise FeedbackError(msg_text)
        return out

    def caught_up(self, key: str) -> bool:
        """Whether partition ``key`` (``topic:partition``) has nothing left to read as of the last fetch."""
        topic, part = key.rsplit(":", 1)
        tp = TopicPartition(topic, int(part))
        try:
            _, high = self._consumer.get_watermark_offsets(tp, cached=True)
            if high < 0:  # no fetch answered for it yet (just assigned, e.g. after a restart): ask the broker
                _, high = self._consumer.get_watermark_offsets(tp, cached=False, timeout=_WATERMARK_TIMEOUT_S)
        except KafkaException:
            return False
        return high >= 0 and self.next_offsets.get(key, -1) >= high

    def commit(self, offsets: Mapping[str, int]) -> None:
        """Commit ``offsets`` to the group outside a transaction (readers that produce nothing)."""
        parts = [TopicPartition(k.rsplit(":", 1)[0], int(k.rsplit(":", 1)[1]), v) for k, v in offsets.items()]
        if parts:
            self._consumer.commit(offsets=parts, asynchronous=False)

    def group_metadata(self) -> Any:
        return self._consumer.consumer_group_metadata()

    def close(self) -> None:
        self._consumer.close()


class TransactionalWriter:
    """One transaction per batch: records plus the input offsets, committed together.

    Args:
        kafka: connection settings.
        transactional_id: stable per service instance (a restart fences the old one).
        timeout_s: for init, offset sends and commits.
    """

    def __init__(self, kafka: KafkaConfig, *, transactional_id: str, timeout_s: float = 30.0) -> None:
        self._kafka = kafka
        self._timeout = timeout_s
        self._producer = Producer(
            {
                **kafka.client_conf(),
                "transactional.id": transactional_id,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": kafka.linger_ms,
                "compression.type": "lz4",
            }
        )
        self._producer.init_transactions(timeout_s)
        self._open = False

    def begin(self) -> None:
        self._producer.begin_transaction()
        self._open = True

    def produce(
        self, topic: str, key: bytes, value: bytes, headers: list[tuple[str, str | bytes | None]] | None = None
    ) -> None:
        """Send inside the open transaction (``topic`` is logical; the prefix is applied)."""
        while True:
            try:
                self._producer.produce(self._kafka.topic(topic), value=value, key=key, headers=headers)
                return
            except BufferError:
                self._producer.poll(0.05)  # local queue full: let it drain, then retry

    def dead_letter(self, topic: str, msg: Message, exc: BaseException) -> None:
        """Send ``msg`` to ``<topic>.dlq`` with the five DLQ headers, inside the transaction."""
        headers: list[tuple[str, str | bytes | None]] = list(dlq_headers(msg, exc))
        self.produce(f"{topic}.dlq", msg.key() or b"", msg.value() or b"", headers=headers)

    def commit(self, offsets: Mapping[str, int], group_metadata: Any) -> None:
        """Add the input offsets to the transaction and commit it.

        Raises:
            FeedbackError: the commit failed (the transaction was aborted; nothing of it is visible).
        """
        parts = [TopicPartition(k.rsplit(":", 1)[0], int(k.rsplit(":", 1)[1]), v) for k, v in offsets.items()]
        try:
            if parts:
                self._producer.send_offsets_to_transaction(parts, group_metadata, self._timeout)
            self._producer.commit_transaction(self._timeout)
        except KafkaException as exc:
            self.abort()
            msg = f"transaction commit failed, batch aborted: {exc}"
            raise FeedbackError(msg) from exc
        self._open = False

    def abort(self) -> None:
        """Abort the open transaction (its records never become visible to read_committed readers)."""
        if self._open:
            self._producer.abort_transaction(self._timeout)
            self._open = False

    def close(self) -> None:
        self.abort()
        self._producer.flush(self._timeout)


class Checkpoints:
    """Operator state tagged with the offsets of the transaction that carries it.

    Args:
        root: directory (created); files are ``ckpt-<seq>.json``.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def save(self, seq: int, offsets: Mapping[str, int], state: Mapping[str, Any]) -> Path:
        """Write state ``seq`` atomically (temp file, fsync, rename) and keep only the newest two."""
        target = self.root / f"{_CKPT_PREFIX}{seq:012d}.json"
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            # dumps, not dump: json.dump streams through the pure-Python encoder (~6x slower here)
            fh.write(json.dumps({"seq": seq, "offsets": dict(offsets), "state": state}, separators=(",", ":")))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
        for old in self._files()[:-_KEEP]:
            old.unlink(missing_ok=True)
        return target

    def restore(self, committed: Mapping[str, int]) -> dict[str, Any] | None:
        """The state whose offsets equal ``committed`` (newest first); ``None`` if none does."""
        if not committed:
            return None
        for path in reversed(self._files()):
            body = json.loads(path.read_text(encoding="utf-8"))
            if body["offsets"] == dict(committed):
                state: dict[str, Any] = body["state"]
                state["_seq"] = body["seq"]
                return state
        return None

    def _files(self) -> list[Path]:
        return sorted(self.root.glob(f"{_CKPT_PREFIX}*.json"))


class TransactionalStage:
    """Consume-transform-produce skeleton: subclasses define the transform and their state.

    One :meth:`step` polls a batch, opens a transaction, lets :meth:`_transform`
    produce into it, checkpoints the state with the offsets, then commits both.

    Args:
        kafka: connection settings.
        inputs: logical input topics.
        group_id: consumer group for the committed offsets.
        transactional_id: stable per instance.
        checkpoint_dir: where :class:`Checkpoints` go.
    """

    def __init__(
        self,
        kafka: KafkaConfig,
        *,
        inputs: Sequence[str],
        group_id: str,
        transactional_id: str,
        checkpoint_dir: str | os.PathLike[str],
    ) -> None:
        self.reader = InputReader(kafka, topics=inputs, group_id=group_id)
        self.writer = TransactionalWriter(kafka, transactional_id=transactional_id)
        self.checkpoints = Checkpoints(checkpoint_dir)
        committed = self.reader.committed()
        state = self.checkpoints.restore(committed)
        self.restored_seq: int | None = None if state is None else int(state["_seq"])
        self._seq = self.restored_seq or 0
        if state is not None:
            self._load_state(state)
        self.reader.assign(committed)

    def step(
        self, *, max_records: int, timeout_s: float, before_commit: Callable[[int], None] | None = None
    ) -> list[Message]:
        """Process one batch exactly once; returns the messages it consumed (empty when idle).

        ``before_commit`` (tests, fault injection) is called with the number of records
        produced, after they were produced and checkpointed but before the commit.
        """
        msgs = self.reader.poll(max_records=max_records, timeout_s=timeout_s)
        if not msgs:
            return msgs
        self.writer.begin()
        produced = self._transform(msgs)
        offsets = dict(self.reader.next_offsets)
        self._seq += 1
        self.checkpoints.save(self._seq, offsets, self._state())
        if before_commit is not None:
            before_commit(produced)
        # A failed commit aborts the batch but this object's state is already past it:
        # the caller must build a new instance, which restores the matching checkpoint.
        self.writer.commit(offsets, self.reader.group_metadata())
        return msgs

    def close(self) -> None:
        self.writer.close()
        self.reader.close()

    # ------------------------------------------------------------------ for subclasses
    def _transform(self, msgs: list[Message]) -> int:
        """Produce the outputs of ``msgs`` through :attr:`writer`; returns how many records."""
        raise NotImplementedError

    def _state(self) -> dict[str, Any]:
        raise NotImplementedError

    def _load_state(self, state: dict[str, Any]) -> None:
        raise NotImplementedError


def drain(kafka: KafkaConfig, topic: str, *, idle_s: float = 3.0, limit: int = 1_000_000) -> list[Message]:
    """Every committed record of ``topic`` (read_committed, fresh group), until ``idle_s`` without news."""
    reader = InputReader(kafka, topics=(topic,), group_id=f"drain-{os.getpid()}-{id(kafka)}")
    reader.assign({})
    out: list[Message] = []
    try:
        quiet = 0.0
        while quiet < idle_s and len(out) < limit:
            got = reader.poll(max_records=5000, timeout_s=0.5)
            quiet = quiet + 0.5 if not got else 0.0
            out += got
    finally:
        reader.close()
    return out


def drive(
    step: Callable[[], Any],
    on_batch: Callable[[Any], None],
    *,
    stop_event: threading.Event | None,
    max_idle_s: float | None,
) -> float:
    """Call ``step`` until ``stop_event`` is set or nothing was consumed for ``max_idle_s``.

    ``on_batch`` sees every batch that consumed something; returns the busy time in
    seconds (start to the last batch with input), which the services report as elapsed.
    """
    start = idle_since = time.perf_counter()
    while stop_event is None or not stop_event.is_set():
        batch = step()
        now = time.perf_counter()
        if batch.consumed:
            idle_since = now
            on_batch(batch)
        elif max_idle_s is not None and now - idle_since >= max_idle_s:
            break
    return idle_since - start
