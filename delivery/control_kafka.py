"""The control plane on Kafka: publish state changes, and follow them in every serving replica.

:class:`ControlPublisher` sends one :class:`~delivery.control_plane.ControlRecord` per change
(``acks=all``, idempotent) and returns its version, the offset the broker gave it.
:class:`ControlFollower` reads the single-partition compacted topic from its start:
:meth:`ControlFollower.catch_up` reads it to the end before a replica serves (so a replica
started later has the same state as the others, from the topic alone), and a background thread
then applies each new record as it arrives (``poll`` blocks at most ``poll_s``, so a change is
in effect within a poll and a model load). Records apply in offset order; re-reads are ignored
(:meth:`~delivery.control_plane.ControlState.apply`). A record that cannot be applied (bad bytes,
a bundle whose sha256 differs) is counted, kept in :attr:`ControlFollower.errors` and shown in
``/healthz``; serving goes on with the state it had.

Example (needs a broker, so not run here)::

    publisher = ControlPublisher({"bootstrap.servers": "127.0.0.1:9092"}, "control.v1")
    version = publisher.publish(ControlRecord.registry_change(view))
    follower = ControlFollower({"bootstrap.servers": "127.0.0.1:9092"}, "control.v1", store=Path("/models"))
    follower.catch_up(timeout_s=30)
    follower.start(on_change=lambda kind, state: ...)
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer, TopicPartition

from delivery.control_plane import ControlPlaneError, ControlRecord, ControlState, Kind, parse_record

log = logging.getLogger(__name__)

OnChange = Callable[[Kind, ControlState], None]
"""Called in the follower's thread after a record of ``kind`` was applied to the state."""

DEFAULT_POLL_S = 0.05
"""Longest block of one poll: a stop request and the thread's liveness are checked this often. New
records wake the poll at once, so this bounds nothing on the propagation path."""

_KEPT_ERRORS = 20


class ControlPublisher:
    """Publish control records to ``topic`` (one partition, compacted).

    Args:
        conf: librdkafka settings (bootstrap servers, security).
        topic: the physical topic name (with any prefix).
    """

    def __init__(self, conf: Mapping[str, Any], topic: str) -> None:
        self.topic = topic
        self._producer = Producer({**conf, "acks": "all", "enable.idempotence": True, "linger.ms": 0})

    def publish(self, record: ControlRecord, *, timeout_s: float = 30.0) -> int:
        """Send ``record`` and wait for the broker; returns its version (offset).

        Raises:
            ControlPlaneError: the broker did not acknowledge it within ``timeout_s``.
        """
        outcome: dict[str, Any] = {}

        def delivered(err: KafkaError | None, msg: Message) -> None:
            outcome["err"], outcome["offset"] = err, msg.offset()

        self._producer.produce(self.topic, key=record.key, value=record.model_dump_json().encode(),
                               partition=0, on_delivery=delivered)
        self._producer.flush(timeout_s)
        if outcome.get("err") is not None or "offset" not in outcome:
            msg = (f"control topic {self.topic!r}: record of kind {record.kind!r} not acknowledged within "
                   f"{timeout_s}s ({outcome.get('err')})")
            raise ControlPlaneError(msg)
        return int(outcome["offset"])


class ControlFollower:
    """Follow the control topic into a :class:`~delivery.control_plane.ControlState`.

    Args:
        conf: librdkafka settings (bootstrap servers, security).
        topic: the physical topic name.
        store: the shared model store (bundles are verified there).
        poll_s: longest block of one poll (see :data:`DEFAULT_POLL_S`).
    """

    def __init__(self, conf: Mapping[str, Any], topic: str, *, store: Path, poll_s: float = DEFAULT_POLL_S) -> None:
        self.topic = topic
        self.state = ControlState(store)
        self.poll_s = poll_s
        self.applied = 0
        self.refused = 0
        self.errors: list[str] = []
        self.in_effect_at: dict[str, float] = {}
        """Epoch seconds when the newest record of each kind was in effect (applied and acted on)."""
        self._on_change: OnChange | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # no group offsets: every replica reads the whole (compacted) topic from its start, on its own
        self._consumer = Consumer({**conf, "group.id": f"pricestream-control-{uuid.uuid4().hex}",
                                   "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                   "fetch.wait.max.ms": 10})
        self._consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])

    def catch_up(self, *, timeout_s: float = 30.0) -> int:
        """Apply every record up to the topic's end as of now; returns how many were applied.

        Raises:
            ControlPlaneError: the end was not reached within ``timeout_s`` (broker down, topic missing).
        """
        deadline = time.monotonic() + timeout_s
        try:
            low, high = self._consumer.get_watermark_offsets(TopicPartition(self.topic, 0), timeout=timeout_s)
        except Exception as exc:  # noqa: BLE001 - librdkafka raises KafkaException or a RuntimeError here
            msg = f"control topic {self.topic!r}: cannot read its end offsets ({exc})"
            raise ControlPlaneError(msg) from exc
        before, position = self.applied, low - 1
        while position < high - 1:
            if time.monotonic() > deadline:
                msg = f"control topic {self.topic!r}: read to offset {position}, expected {high - 1} in {timeout_s}s"
                raise ControlPlaneError(msg)
            message = self._consumer.poll(self.poll_s)
            if message is not None and not message.error():
                position = int(message.offset() or 0)
                self._handle(message)
        return self.applied - before

    def start(self, on_change: OnChange | None = None) -> None:
        """Apply new records in a background thread, calling ``on_change`` after each."""
        self._on_change = on_change
        self._thread = threading.Thread(target=self._loop, name="pricestream-control", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._consumer.close()

    def health(self) -> dict[str, Any]:
        """Versions applied per kind, counts, the last error (for ``/healthz``)."""
        return {"topic": self.topic, "versions": dict(self.state.versions), "applied": self.applied,
                "in_effect_at": dict(self.in_effect_at), "refused": self.refused,
                "last_error": self.errors[-1] if self.errors else None,
                "change": None if self.state.registry is None else self.state.registry.change}

    def _loop(self) -> None:
        while not self._stop.is_set():
            message = self._consumer.poll(self.poll_s)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    self._error(f"consumer: {error}")
                continue
            record = self._handle(message)
            if record is None:
                continue
            try:
                if self._on_change is not None:
                    self._on_change(record.kind, self.state)
            except Exception as exc:  # noqa: BLE001 - a failed swap keeps serving the previous state
                self._error(f"applying {record.kind} v{message.offset()}: {exc}")
            else:
                self.in_effect_at[record.kind] = time.time()

    def _handle(self, message: Message) -> ControlRecord | None:
        version = int(message.offset() or 0)
        try:
            record = parse_record(message.value())
            fresh = self.state.apply(version, record)
        except ControlPlaneError as exc:
            self.refused += 1
            self._error(f"refused v{version}: {exc}")
            return None
        if not fresh:
            return None
        self.applied += 1
        return record

    def _error(self, message: str) -> None:
        log.warning("control plane %s", message)
        self.errors.append(message)
        del self.errors[:-_KEPT_ERRORS]
