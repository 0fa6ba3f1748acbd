"""Label service: ``pricing.decisions`` ⋈ outcomes on ``behaviour.events`` -> ``feedback.labels``, exactly once.

A :class:`~events.runtime.Step` on the one stream runtime (transactional mode, every partition of
both topics in one process, read_committed). It feeds the
pure :class:`~feedback.labels.LabelJoiner`, and moves its watermark to the
highest event time seen minus ``allowed_lateness`` (while some partitions lag,
the lowest max among them, so a topic read ahead of the other cannot expire
decisions whose outcomes are still unread). Each batch's labels, its
dead letters and the input offsets commit in one Kafka transaction; the
joiner's state is checkpointed with the offsets that transaction commits (see
:mod:`events.runtime.checkpoints`), so a restart resumes from the state that
matches the committed output: no duplicate and no missing label.

Decisions carry the pricing features but not the request side of the model
matrix; the service adds ``lead_time_days``, ``stay_dow`` and ``channel_code``
(from the decision's own time, stay date and channel) to each decision's
``features`` before the join, so labels and training examples can be scored by
the tier models without the original request. ``nights`` is not on a decision
and stays missing.

Cold start: with a :class:`LabelCounts` store (the serving path's hotel history,
:class:`~delivery.cold_start.RedisHistoryStore`) the service keeps each hotel's count of
decisions labelled and of those booked (net of cancellations), checkpointed with the joiner, and
sets those totals in the store before each commit. The stage rule of ``serve`` reads them, so a new
hotel moves from ``transfer`` to ``own`` as its labels are joined. Totals, not increments: a batch
replayed after an aborted transaction recomputes them from the restored state, so the store ends
exact (it may show an aborted batch's labels until the replay). A store that cannot be written
keeps them for the next batch: the labels themselves never wait on it.

Example:
    >>> import uuid
    >>> from datetime import date, datetime, timezone
    >>> from events.models import PricingDecision
    >>> d = PricingDecision(hotel_id="h1", room_type="std", stay_date=date(2026, 2, 4),
    ...                     event_time=datetime(2026, 2, 1, tzinfo=timezone.utc), request_id=uuid.uuid4(),
    ...                     price=100.0, tier="light", complexity=0.3, latency_ms=2.0, channel="ota")
    >>> f = with_request_features(d).features
    >>> f["lead_time_days"], f["stay_dow"], f["channel_code"]
    (3.0, 2.0, 2.0)
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field
from redis.exceptions import RedisError

from events.config import KafkaConfig
from events.errors import EventValidationError
from events.models import (
    BEHAVIOUR_TYPES,
    BookingEvent,
    CancellationEvent,
    OutcomeLabel,
    PricingDecision,
    PricingRequest,
    dumps,
)
from events.runtime import (
    BatchContext,
    Checkpoints,
    Offsets,
    Output,
    Record,
    Runtime,
    RuntimeConfig,
    Step,
    offset_key,
    split_key,
)
from events.runtime.service import run_service, service_config
from feedback.differences import DifferenceCounter, DifferenceRules
from feedback.labels import LabelJoiner
from feedback.services.kafka_io import parse_record
from pricing.vectorize import request_values

DECISIONS = "pricing.decisions"
BEHAVIOUR = "behaviour.events"
LABELS = "feedback.labels"
_REQUEST_KEYS = ("lead_time_days", "stay_dow", "channel_code")
log = logging.getLogger("pricestream.labels")


class LabelCounts(Protocol):
    """Where each hotel's totals of labels written go (``serve``'s cold-start history)."""

    def set_joined(self, counts: Mapping[str, tuple[int, int]]) -> None:
        """Set ``hotel -> (labels, bookings)`` written so far."""
        ...


class LabelServiceConfig(BaseModel):
    """Settings of the label service."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kafka: KafkaConfig = KafkaConfig()
    checkpoint_dir: Path
    group_id: str = "feedback-labels"
    transactional_id: str = Field(default="feedback-labels-0", description="stable per instance")
    horizon: timedelta = timedelta(hours=24)
    grace: timedelta = timedelta(hours=6)
    allowed_lateness: timedelta = Field(default=timedelta(minutes=5), description="watermark = max time - this")
    max_batch: int = Field(default=5000, ge=1, description="records per transaction (and per checkpoint)")
    poll_timeout_s: float = Field(default=0.5, gt=0.0)
    differences: DifferenceRules = DifferenceRules()


@dataclass
class LabelBatchStats:
    """What one :meth:`LabelService.process_batch` did."""

    consumed: int = 0
    decisions: int = 0
    outcomes: int = 0
    ignored: int = 0
    dead_lettered: int = 0
    labels: int = 0
    by_reason: Counter[str] = field(default_factory=Counter)
    watermark: datetime | None = None


@dataclass
class LabelRunStats:
    """Totals of a :func:`run`."""

    batches: int = 0
    consumed: int = 0
    labels: int = 0
    dead_lettered: int = 0
    elapsed_s: float = 0.0
    restored_seq: int | None = None
    differences: dict[str, Any] = field(default_factory=dict)

    @property
    def labels_per_s(self) -> float:
        return self.labels / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def records_per_s(self) -> float:
        return self.consumed / self.elapsed_s if self.elapsed_s > 0 else 0.0


def with_request_features(decision: PricingDecision) -> PricingDecision:
    """The decision with the request-side model inputs added to ``features`` (existing keys win)."""
    request = PricingRequest(
        hotel_id=decision.hotel_id,
        room_type=decision.room_type,
        stay_date=decision.stay_date,
        event_time=decision.event_time,
        channel=decision.channel,
        request_id=decision.request_id,
    )
    values = request_values(request)
    extra = {k: values[k] for k in _REQUEST_KEYS if decision.features.get(k) is None}
    if not extra:
        return decision
    return decision.model_copy(update={"features": {**decision.features, **extra}})


class LabelService(Step[Any]):
    """The label join as a transactional runtime step (every partition of both inputs in one instance).

    Args:
        config: settings; a restart with the same ``checkpoint_dir``, ``group_id`` and
            ``transactional_id`` resumes where the last committed batch ended.
        runtime: runtime settings (``None``: :func:`runtime_config` of ``config``).
        registry: Prometheus registry of the runtime's series.
        stop_event: set it to stop :meth:`run` after the batch in hand.
        counts: the hotels' label totals are set there before each commit (``None``: not kept).
    """

    def __init__(self, config: LabelServiceConfig, *, runtime: RuntimeConfig | None = None,
                 registry: CollectorRegistry | None = None, stop_event: threading.Event | None = None,
                 counts: LabelCounts | None = None) -> None:
        self.config = config
        self.counts = counts
        self.by_hotel: dict[str, tuple[int, int]] = {}
        """Decisions labelled and booked (their last label 1) per hotel, checkpointed with the offsets."""
        self._unsent: set[str] = set()
        self.joiner = LabelJoiner(config.horizon, grace=config.grace)
        self.differences = DifferenceCounter(config.differences)
        self.checkpoints = Checkpoints(config.checkpoint_dir)
        self.restored_seq: int | None = None
        self._seq = 0
        self._max_time: dict[str, datetime] = {}
        self._batch = LabelBatchStats()
        self.totals = LabelRunStats()
        self.runtime = Runtime(runtime or runtime_config(config), self, registry=registry, stop_event=stop_event)
        self.totals.restored_seq = self.restored_seq

    def process_batch(self, *, before_commit: Callable[[int], None] | None = None) -> LabelBatchStats:
        """Poll, join and commit one batch (labels and offsets in one transaction)."""
        self._batch = LabelBatchStats()
        result = self.runtime.batch(before_commit=before_commit)
        self._batch.consumed, self._batch.dead_lettered = result.consumed, result.dead_lettered
        self._batch.watermark = self.joiner.watermark
        return self._batch

    def close(self) -> None:
        self.runtime.close()

    # ------------------------------------------------------------------ step
    def parse(self, record: Record[bytes]) -> Any:
        event = parse_record(record.value)
        kind = getattr(event, "event_type", None)
        field_name = "event_type"
        if record.topic == DECISIONS and not isinstance(event, PricingDecision):
            raise EventValidationError(field_name, kind, "'pricing_decision'")
        if record.topic != DECISIONS and kind not in BEHAVIOUR_TYPES:
            raise EventValidationError(field_name, kind, f"one of {list(BEHAVIOUR_TYPES)}")
        return event

    def process(self, batch: Sequence[Record[Any]], ctx: BatchContext | None) -> list[Output]:
        outs: list[Output] = []
        for record in batch:
            for label, price_paid in self._one(record):
                outs.append(self._emit(label, price_paid))
        watermark = self._watermark(ctx)
        if watermark is not None:
            outs += [self._emit(label, None) for label in self.joiner.advance(watermark)]
        self.totals.labels += len(outs)
        return outs

    def _one(self, record: Record[Any]) -> list[tuple[OutcomeLabel, float | None]]:
        event = record.value
        part = offset_key(record.topic, record.partition)
        if part not in self._max_time or event.event_time > self._max_time[part]:
            self._max_time[part] = event.event_time
        if isinstance(event, PricingDecision):
            self._batch.decisions += 1
            # a booking read before its decision settles it now: keep its price for the difference cases
            held = {b.event_time: b.price_paid for b in self.joiner.waiting_bookings(event.decision_id)}
            labels = self.joiner.add_decision(with_request_features(event))
            return [(lab, held.get(lab.event_time) if lab.label == 1 else None) for lab in labels]
        if isinstance(event, BookingEvent | CancellationEvent):
            self._batch.outcomes += 1
            paid = event.price_paid if isinstance(event, BookingEvent) else None
            return [(lab, paid if lab.label == 1 else None) for lab in self.joiner.add_outcome(event)]
        self._batch.ignored += 1
        return []

    def _watermark(self, ctx: BatchContext | None) -> datetime | None:
        """Event time minus ``allowed_lateness``: the lowest per-partition max among partitions that still
        have data to read, or the highest max once every partition is caught up.

        A partition that is behind holds event time back (its outcomes are still to come); a caught-up
        partition cannot, so it drops out (otherwise a topic that went quiet would stall every label).
        """
        if not self._max_time:
            return None
        lagging = [t for k, t in self._max_time.items() if ctx is not None and not ctx.caught_up(*split_key(k))]
        top = min(lagging) if lagging else max(self._max_time.values())
        return top - self.config.allowed_lateness

    def _emit(self, label: OutcomeLabel, price_paid: float | None) -> Output:
        self.differences.update(label, price_paid=price_paid)
        labels, bookings = self.by_hotel.get(label.hotel_id, (0, 0))
        # a revision flips its decision's label (cancelled 1 -> 0, late booking 0 -> 1): decisions, not records
        first = label.revision == 0
        booked = 1 if label.label == 1 else (-1 if not first else 0)
        self.by_hotel[label.hotel_id] = (labels + first, bookings + booked)
        self._unsent.add(label.hotel_id)
        self._batch.labels += 1
        self._batch.by_reason[label.reason] += 1
        return Output(LABELS, label.key.encode(), dumps(label))

    def durable(self, *, force: bool) -> bool:
        """Set the totals of the hotels labelled since the last write in the counts store (see the module)."""
        if self.counts is None or not self._unsent:
            return True
        sent = {hotel: self.by_hotel[hotel] for hotel in self._unsent}
        try:
            self.counts.set_joined(sent)
        except (RedisError, OSError) as exc:
            log.warning("label counts not written, kept for the next batch", extra={
                "event": "label_counts_unwritten", "hotels": len(sent), "error_class": type(exc).__name__,
                "error_message": str(exc)[:300]})
            return True
        self._unsent.clear()
        return True

    # ------------------------------------------------------------------ state
    def restore(self, committed: Mapping[str, int]) -> Offsets | None:
        state = self.checkpoints.restore(committed)
        if state is not None:
            self.restored_seq = self._seq = int(state["_seq"])
            self.joiner.load_state(state["joiner"])
            self.by_hotel = {h: (int(n), int(b)) for h, (n, b) in state.get("by_hotel", {}).items()}
            self._unsent = set(self.by_hotel)  # the store may hold an aborted batch's totals: set them again
            prefix = self.config.kafka.topic_prefix
            # keys are logical "topic:partition"; checkpoints before the runtime held physical names
            self._max_time = {k.removeprefix(prefix) if prefix else k: datetime.fromisoformat(v)
                              for k, v in state["max_time"].items()}
        return None

    def checkpoint(self, offsets: Mapping[str, int]) -> None:
        self._seq += 1
        state = {"joiner": self.joiner.state_dict(), "max_time": {k: v.isoformat() for k, v in self._max_time.items()},
                 "by_hotel": {h: list(c) for h, c in self.by_hotel.items()}}
        self.checkpoints.save(self._seq, offsets, state)

    def describe(self) -> dict[str, Any]:
        watermark = self.joiner.watermark
        return {"labels": self.totals.labels, "watermark": None if watermark is None else watermark.isoformat()}


def runtime_config(config: LabelServiceConfig, **overrides: object) -> RuntimeConfig:
    """Runtime settings of the label service (transactional, every partition) plus ``overrides``."""
    return service_config({
        "name": "labels", "kafka": config.kafka, "inputs": (DECISIONS, BEHAVIOUR), "group_id": config.group_id,
        "mode": "transactional", "assignment": "all_partitions", "transactional_id": config.transactional_id,
        "max_batch": config.max_batch, "poll_timeout_s": config.poll_timeout_s,
    }, **overrides)


def run(
    config: LabelServiceConfig,
    *,
    stop_event: threading.Event | None = None,
    max_idle_s: float | None = None,
    runtime: RuntimeConfig | None = None,
    registry: CollectorRegistry | None = None,
    counts: LabelCounts | None = None,
) -> LabelRunStats:
    """Run the label service until ``stop_event`` is set or the inputs were idle for ``max_idle_s``."""
    rc = runtime or runtime_config(config, max_idle_s=max_idle_s)
    service = LabelService(config, runtime=rc, registry=registry, stop_event=stop_event, counts=counts)
    out = service.totals
    try:
        totals = run_service(service.runtime)
    finally:
        out.differences = service.differences.summary()
    out.batches, out.consumed, out.dead_lettered = totals.batches, totals.consumed, totals.dead_lettered
    out.elapsed_s = totals.busy_s
    return out
