"""The one stream runtime: poll a batch, parse, process, produce, make durable, commit; stop cleanly.

:class:`Runtime` drives a :class:`~events.runtime.step.Step`. One batch:

1. poll up to ``max_batch`` records (``read_committed``);
2. :meth:`Step.parse` each; a record whose parse raises goes to ``<topic>.dlq`` with the five
   DLQ headers (source topic, partition, offset, error class, message): a poison record never
   stops the service;
3. :meth:`Step.process` the parsed batch (an exception in :attr:`Step.record_errors` retries it
   record by record and dead-letters the records that still fail); produce its outputs;
4. when :meth:`Step.durable` says everything so far is durable: wait for the outputs'
   acknowledgement (at-least-once) or fold them into the transaction (transactional), let the
   step checkpoint its state, and commit the input offsets.

Stopping (``stop_event`` set, e.g. by SIGTERM in the CLI) ends the loop after the batch in hand:
the step is forced durable, offsets are committed, clients close. Idle for ``max_idle_s`` does
the same. A progress line (JSON fields through :mod:`logging`: records, dead letters, outputs,
consumer lag per topic) is logged every ``log_every_s``; ``/healthz`` and ``/metrics`` are served
when ``ops_port`` is set (:mod:`events.runtime.ops`).

Example (needs a broker, so not run here)::

    runtime = Runtime(RuntimeConfig(name="upper", inputs=("in",), group_id="g"), Upper())
    stats = runtime.run()   # until stop_event or max_idle_s
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from confluent_kafka import Message, TopicPartition
from prometheus_client import CollectorRegistry

from events.runtime.config import RuntimeConfig
from events.runtime.ops import OpsServer, Page, RuntimeMetrics
from events.runtime.sink import AtLeastOnceSink, TransactionalSink
from events.runtime.source import Source
from events.runtime.step import Output, Record, Step, offset_key

T = TypeVar("T")
log = logging.getLogger("pricestream.stream")
_LAG_EVERY_S = 1.0  # lag gauges refresh: watermarks are cached locally, so this is cheap
# Kafka's health is probed from the loop thread (a metadata request on the consumer blocks while
# another thread sits in consume()), at most this often; /healthz reports the latest verdict.
_PING_EVERY_S = 2.0
# Backoff while a dependency is down: first retry soon (a blip), then no more than every 5 s
# (a long outage must not spin a core; a stop request still ends the wait at once).
_RETRY_FIRST_S = 0.2
_RETRY_MAX_S = 5.0


@dataclass
class BatchResult:
    """What one :meth:`Runtime.batch` did."""

    consumed: int = 0
    dead_lettered: int = 0
    produced: int = 0
    committed: bool = False


@dataclass
class RunStats:
    """Totals of one :meth:`Runtime.run`."""

    batches: int = 0
    consumed: int = 0
    dead_lettered: int = 0
    produced: int = 0
    commits: int = 0
    busy_s: float = 0.0
    """Start to the end of the last batch with input (what the services report as elapsed)."""
    elapsed_s: float = 0.0
    stopped_by: str = ""
    dead_by_topic: dict[str, int] = field(default_factory=dict)
    step: dict[str, object] = field(default_factory=dict)
    """The step's own counters (:meth:`Step.counters`), set by :func:`~events.runtime.service.run_service`."""


class _Context:
    def __init__(self, source: Source, kafka_topic: Callable[[str], str]) -> None:
        self._source = source
        self._topic = kafka_topic

    def caught_up(self, topic: str, partition: int) -> bool:
        return self._source.caught_up(offset_key(self._topic(topic), partition))


class Runtime(Generic[T]):
    """Drive ``step`` with ``config``'s consumer group, delivery mode, DLQ policy and stop.

    Args:
        config: runtime settings.
        step: the processing step.
        registry: Prometheus registry to add the runtime's series to and serve (a new one if ``None``).
        stop_event: set it to stop after the batch in hand.
    """

    def __init__(self, config: RuntimeConfig, step: Step[T], *, registry: CollectorRegistry | None = None,
                 stop_event: threading.Event | None = None, pages: Mapping[str, Page] | None = None) -> None:
        self.config = config
        self.pages = dict(pages or {})
        self.step = step
        self.registry = registry if registry is not None else CollectorRegistry()
        self.stop_event = stop_event or threading.Event()
        self.metrics = RuntimeMetrics(self.registry, config.name)
        self.stats = RunStats()
        self.state = "starting"
        self.source = Source(config, on_revoke=self._revoked)
        self.sink: AtLeastOnceSink | TransactionalSink
        if config.mode == "transactional":
            self.sink = TransactionalSink(config.kafka, transactional_id=str(config.transactional_id),
                                          timeout_s=config.delivery_timeout_s)
        else:
            self.sink = AtLeastOnceSink(config.kafka, timeout_s=config.delivery_timeout_s)
        self._ctx = _Context(self.source, config.kafka.topic)
        self._dirty = False
        self._abandoned = False
        self._unavailable: str | None = None
        self._closed = False
        self._lag: dict[str, int] = {}
        self._lag_at = self._logged_at = self._ping_at = 0.0
        self._kafka_problem: str | None = None
        self._assigned = 0
        self.ops: OpsServer | None = None
        self._start()

    # ------------------------------------------------------------------ lifecycle
    def _start(self) -> None:
        if self.config.assignment == "all_partitions":
            committed = self.source.committed()
            start = self.step.restore(committed)
            self.source.assign_all(committed if start is None else start)
        else:
            self.source.subscribe()
        if self.config.ops_port is not None:
            self.ops = OpsServer(self.config.ops_host, self.config.ops_port, registry=self.registry,
                                 checks=self.health, info=self.info, pages=self.pages)
        self.state = "running"
        log.info("started", extra=self._fields(event="started", mode=self.config.mode,
                                               inputs=list(self.config.inputs), group_id=self.config.group_id,
                                               ops_port=None if self.ops is None else self.ops.port))

    def run(self) -> RunStats:
        """Batches until ``stop_event`` is set or the inputs were idle ``max_idle_s``; then commit and close."""
        began = idle_since = time.monotonic()
        try:
            while not self.stop_event.is_set():
                result = self.batch()
                now = time.monotonic()
                if result.consumed:
                    idle_since = now
                    self.stats.busy_s = now - began
                elif self.config.max_idle_s is not None:
                    if not self.source.assigned():
                        idle_since = now  # idle counts from the group's assignment, not from the join
                    elif now - idle_since >= self.config.max_idle_s:
                        self.stats.stopped_by = "idle"
                        break
            else:
                self.stats.stopped_by = "stop"
            self.state = "stopping"
            self.commit(force=True)
        finally:
            self.stats.elapsed_s = time.monotonic() - began
            self.close()
        return self.stats

    def close(self) -> None:
        """Close the step, the producer, the consumer and the HTTP endpoint (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self.state = "stopped"
        try:
            self.step.close()
            self.sink.close()
            self.source.close()
        finally:
            if self.ops is not None:
                self.ops.close()
            log.info("stopped", extra=self._fields(event="stopped", stopped_by=self.stats.stopped_by))

    # ------------------------------------------------------------------ one batch
    def batch(self, *, before_commit: Callable[[int], None] | None = None) -> BatchResult:
        """Poll and process one batch, then commit if the step says it is durable.

        ``before_commit`` (tests, fault injection) is called with the number of records produced,
        after they were produced and checkpointed but before the commit.
        """
        result = BatchResult()
        msgs = self.source.poll(max_records=self.config.max_batch, timeout_s=self.config.poll_timeout_s)
        started = time.perf_counter()
        if msgs:
            self.sink.begin()
            produced_before = sum(self.sink.produced.values())
            pairs = self._parse(msgs, result)
            for out in self._process_retrying(pairs, result):
                self.sink.produce(out)
                self.metrics.outputs.labels(self.config.name, out.topic).inc()
            result.consumed = len(msgs)
            result.produced = sum(self.sink.produced.values()) - produced_before
            self._dirty = True
            self._tally(result)
        force = self.config.mode == "transactional"
        result.committed = self.commit(force=force, before_commit=before_commit, produced=result.produced)
        if msgs:
            self.metrics.batch_seconds.labels(self.config.name).observe(time.perf_counter() - started)
        self._observe()
        return result

    def _parse(self, msgs: list[Message], result: BatchResult) -> list[tuple[Record[T], Message]]:
        pairs: list[tuple[Record[T], Message]] = []
        for msg in msgs:
            topic = self.source.logical(str(msg.topic()))
            raw: Record[bytes] = Record(topic, int(msg.partition() or 0), int(msg.offset() or 0), msg.key(),
                                        msg.value() or b"", (msg.timestamp() or (0, None))[1])
            self.metrics.records.labels(self.config.name, topic).inc()
            try:
                pairs.append((raw.with_value(self.step.parse(raw)), msg))
            except Exception as exc:  # noqa: BLE001 - a parse is pure: whatever it raises is the record's fault
                self._dead_letter(topic, msg, exc, result)
        return pairs

    def _process_retrying(self, pairs: list[tuple[Record[T], Message]], result: BatchResult) -> Sequence[Output]:
        """:meth:`_process`, retried while the step says a dependency is down (the batch is kept, not lost).

        Raises:
            the step's transient error, if a stop is requested while it lasts (nothing is committed).
        """
        delay = _RETRY_FIRST_S
        while True:
            try:
                outs = self._process(pairs, result)
            except self.step.transient_errors as exc:
                self._unavailable = f"{type(exc).__name__}: {exc}"
                log.warning("dependency down, batch kept for retry", extra=self._fields(
                    event="retry", error_class=type(exc).__name__, error_message=str(exc)[:300], retry_in_s=delay))
                if self.stop_event.wait(delay):
                    self._dirty = False  # the batch in hand was not processed: its offsets must not be committed
                    self._abandoned = True
                    raise
                delay = min(delay * 2, _RETRY_MAX_S)
                continue
            self._unavailable = None
            return outs

    def _process(self, pairs: list[tuple[Record[T], Message]], result: BatchResult) -> Sequence[Output]:
        if not pairs:
            return []
        try:
            return self.step.process([r for r, _ in pairs], self._ctx)
        except self.step.record_errors:
            if len(pairs) == 1:
                record, msg = pairs[0]
                return self._isolate(record, msg, result)
        outs: list[Output] = []
        for record, msg in pairs:  # one bad record must not cost the batch: find it
            outs += self._isolate(record, msg, result)
        return outs

    def _isolate(self, record: Record[T], msg: Message, result: BatchResult) -> Sequence[Output]:
        try:
            return self.step.process([record], self._ctx)
        except self.step.record_errors as exc:
            self._dead_letter(record.topic, msg, exc, result)
            return []

    def _dead_letter(self, topic: str, msg: Message, exc: BaseException, result: BatchResult) -> None:
        self.sink.dead_letter(topic, msg, exc)
        result.dead_lettered += 1
        self.stats.dead_by_topic[topic] = self.stats.dead_by_topic.get(topic, 0) + 1
        self.metrics.dead_letters.labels(self.config.name, topic).inc()
        log.warning("dead-lettered", extra=self._fields(
            event="dead_letter", topic=topic, partition=msg.partition(), offset=msg.offset(),
            error_class=type(exc).__name__, error_message=str(exc)[:300]))

    def commit(self, *, force: bool, before_commit: Callable[[int], None] | None = None, produced: int = 0) -> bool:
        """Commit what was consumed if the step is durable (``force``: make it durable now)."""
        if self._abandoned or not self._dirty or not self.step.durable(force=force):
            return False
        offsets = dict(self.source.next_offsets)
        self.sink.flush()
        self.step.checkpoint(offsets)
        if before_commit is not None:
            before_commit(produced)
        self.sink.commit(offsets, self.source)
        self._dirty = False
        self.stats.commits += 1
        self.metrics.commits.labels(self.config.name).inc()
        return True

    def _revoked(self, parts: list[TopicPartition]) -> None:
        """A rebalance takes partitions away: commit what is held for them while they are still ours."""
        self.commit(force=True)

    # ------------------------------------------------------------------ operator view
    def _tally(self, result: BatchResult) -> None:
        self.stats.batches += 1
        self.stats.consumed += result.consumed
        self.stats.dead_lettered += result.dead_lettered
        self.stats.produced += result.produced

    def _observe(self) -> None:
        now = time.monotonic()
        if now - self._ping_at >= _PING_EVERY_S:
            self._ping_at = now
            self._kafka_problem = self.source.ping()
        if now - self._lag_at >= _LAG_EVERY_S:
            self._lag_at = now
            self._lag = self.source.lag()
            self._assigned = self.source.assigned()
            for topic, lag in self._lag.items():
                self.metrics.lag.labels(self.config.name, topic).set(lag)
        if now - self._logged_at >= self.config.log_every_s:
            self._logged_at = now
            log.info("progress", extra=self._fields(event="progress", **self.info(), **self.step.describe()))

    def info(self) -> dict[str, Any]:
        """State, totals and consumer lag (the progress line and ``/healthz`` carry them)."""
        return {"state": self.state, "assigned": self._assigned, "consumed": self.stats.consumed,
                "dead_lettered": self.stats.dead_lettered,
                "produced": self.stats.produced, "commits": self.stats.commits, "lag": dict(self._lag),
                "lag_total": sum(self._lag.values())}

    def health(self) -> dict[str, str | None]:
        """``{"kafka": ..., **step.health()}``: ``None`` for a dependency that is up."""
        deps: dict[str, str | None] = {"kafka": self._kafka_problem}
        deps.update(self.step.health())
        self.metrics.up.labels(self.config.name).set(0 if any(v is not None for v in deps.values()) else 1)
        return deps

    def _fields(self, **extra: object) -> dict[str, Any]:
        return {"service": self.config.name, **extra}
