"""The consumer side of the runtime: read_committed, manual commits, offsets and lag per partition.

Two assignments (:class:`~events.runtime.config.RuntimeConfig`): ``group`` subscribes (instances
of a group share the partitions; a rebalance calls ``on_revoke`` first so the runtime can commit
what it holds), ``all_partitions`` assigns every partition of the inputs to this one instance
from given offsets (a stateful step whose state spans partitions).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, TopicPartition

from events.runtime.config import RuntimeConfig
from events.runtime.errors import StreamRuntimeError
from events.runtime.step import Offsets, offset_key, split_key

# A partition no fetch has answered for yet would otherwise count as "behind"; one metadata round
# trip settles it (bounded: a broker that does not answer leaves it behind).
_WATERMARK_TIMEOUT_S = 5.0
_METADATA_TIMEOUT_S = 30.0
_PING_TIMEOUT_S = 1.0


class Source:
    """A confluent-kafka consumer with the runtime's settings.

    Args:
        config: runtime settings.
        on_revoke: called with the partitions about to be taken away (``group`` assignment only),
            before they go: commit what is held for them there.
    """

    def __init__(self, config: RuntimeConfig, *, on_revoke: Callable[[list[TopicPartition]], None] | None = None):
        self.config = config
        self._kafka = config.kafka
        self.topics = tuple(config.kafka.topic(t) for t in config.inputs)
        self._logical = dict(zip(self.topics, config.inputs, strict=True))
        self._on_revoke = on_revoke
        self.next_offsets: Offsets = {}
        self._consumer = Consumer(
            {
                **config.kafka.client_conf(),
                "client.id": f"{config.kafka.client_id}-{config.name}",
                "group.id": config.group_id,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": config.auto_offset_reset,
                **({"group.instance.id": config.instance_id}
                   if config.instance_id and config.assignment == "group" else {}),
            }
        )

    def logical(self, topic: str) -> str:
        """The logical name of a physical input topic."""
        return self._logical.get(topic, topic)

    # ------------------------------------------------------------------ start
    def partitions(self) -> list[TopicPartition]:
        """Every partition of the inputs (raises naming a missing topic)."""
        meta = self._consumer.list_topics(timeout=_METADATA_TIMEOUT_S)
        parts: list[TopicPartition] = []
        for topic in self.topics:
            info = meta.topics.get(topic)
            if info is None or info.error is not None:
                msg = f"field 'inputs': topic {topic!r} does not exist (create it with events.admin.create_topics)"
                raise StreamRuntimeError(msg)
            parts += [TopicPartition(topic, p) for p in sorted(info.partitions)]
        return parts

    def committed(self) -> Offsets:
        """Offsets the group committed for every input partition (only partitions with a commit)."""
        try:
            parts = self._consumer.committed(self.partitions(), timeout=_METADATA_TIMEOUT_S)
        except KafkaException as exc:
            msg = f"could not read committed offsets of {self.topics}: {exc}"
            raise StreamRuntimeError(msg) from exc
        return {offset_key(tp.topic, tp.partition): tp.offset for tp in parts if tp.offset >= 0}

    def assign_all(self, offsets: Mapping[str, int]) -> None:
        """Start every partition at ``offsets`` (the beginning where none is given)."""
        parts = [
            TopicPartition(tp.topic, tp.partition, offsets.get(offset_key(tp.topic, tp.partition), OFFSET_BEGINNING))
            for tp in self.partitions()
        ]
        self._consumer.assign(parts)
        self.next_offsets = dict(offsets)

    def subscribe(self) -> None:
        self._consumer.subscribe(list(self.topics), on_revoke=self._revoked)

    def _revoked(self, consumer: object, parts: list[TopicPartition]) -> None:
        if self._on_revoke is not None:
            self._on_revoke(parts)
        for tp in parts:
            self.next_offsets.pop(offset_key(tp.topic, tp.partition), None)

    # ------------------------------------------------------------------ read
    def poll(self, *, max_records: int, timeout_s: float) -> list[Message]:
        """Up to ``max_records`` messages; advances :attr:`next_offsets` past them."""
        out = []
        for msg in self._consumer.consume(num_messages=max_records, timeout=timeout_s):
            err = msg.error()
            if err is None:
                out.append(msg)
                self.next_offsets[offset_key(str(msg.topic()), int(msg.partition() or 0))] = int(msg.offset() or 0) + 1
            elif err.code() != KafkaError._PARTITION_EOF:
                text = f"consumer error on {self.topics}: {err}"
                raise StreamRuntimeError(text)
        return out

    def high_watermark(self, key: str, *, ask: bool = False) -> int:
        """The partition's high watermark as of the last fetch (``ask``: from the broker if none yet; -1 unknown)."""
        topic, part = split_key(key)
        tp = TopicPartition(topic, part)
        try:
            _, high = self._consumer.get_watermark_offsets(tp, cached=True)
            if high < 0 and ask:
                _, high = self._consumer.get_watermark_offsets(tp, cached=False, timeout=_WATERMARK_TIMEOUT_S)
        except KafkaException:
            return -1
        return int(high)

    def position(self, key: str) -> int:
        """Next offset the consumer will fetch (past transaction markers, unlike the last record + 1); -1 unknown."""
        topic, part = split_key(key)
        try:
            pos = self._consumer.position([TopicPartition(topic, part)])[0].offset
        except KafkaException:
            pos = -1
        return max(int(pos), self.next_offsets.get(key, -1))

    def caught_up(self, key: str) -> bool:
        """Whether partition ``key`` has nothing left to read as of the last fetch."""
        high = self.high_watermark(key, ask=True)
        return high >= 0 and self.position(key) >= high

    def lag(self) -> dict[str, int]:
        """Records left to read per logical input topic (partitions with a known watermark and position).

        A transactional input ends with a commit marker that takes an offset but is no record; the
        consumer's position is past it, so a caught-up reader shows 0.
        """
        out: dict[str, int] = {self.logical(t): 0 for t in self.topics}
        for tp in self._assignment():
            key = offset_key(tp.topic, tp.partition)
            high = self.high_watermark(key)
            pos = self.position(key)
            if high >= 0 and pos >= 0:
                out[self.logical(tp.topic)] += max(0, high - pos)
        return out

    def assigned(self) -> int:
        """Partitions this instance holds now."""
        return len(self._assignment())

    def _assignment(self) -> list[TopicPartition]:
        try:
            return list(self._consumer.assignment())
        except KafkaException:
            return []

    def ping(self) -> str | None:
        """``None`` when a broker answers a metadata request, else what is wrong (call from the polling thread)."""
        try:
            self._consumer.list_topics(self.topics[0], timeout=_PING_TIMEOUT_S)
        except KafkaException as exc:
            return f"down: {exc.args[0] if exc.args else exc}"
        return None

    # ------------------------------------------------------------------ commit
    def commit(self, offsets: Mapping[str, int]) -> None:
        """Commit ``offsets`` to the group (outside any transaction), synchronously."""
        parts = [TopicPartition(*split_key(k), v) for k, v in offsets.items()]
        if not parts:
            return
        try:
            self._consumer.commit(offsets=parts, asynchronous=False)
        except KafkaException as exc:
            msg = f"could not commit offsets of {self.topics}: {exc}"
            raise StreamRuntimeError(msg) from exc

    def group_metadata(self) -> object:
        return self._consumer.consumer_group_metadata()

    def close(self) -> None:
        self._consumer.close()
