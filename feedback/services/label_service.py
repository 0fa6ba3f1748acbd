"""Label service: ``pricing.decisions`` ⋈ outcomes on ``behaviour.events`` -> ``feedback.labels``, exactly once.

One process reads every partition of both topics (read_committed), feeds the
pure :class:`~feedback.labels.LabelJoiner`, and moves its watermark to the
highest event time seen minus ``allowed_lateness`` (while some partitions lag,
the lowest max among them, so a topic read ahead of the other cannot expire
decisions whose outcomes are still unread). Each batch's labels, its
dead letters and the input offsets commit in one Kafka transaction; the
joiner's state is checkpointed with the offsets that transaction commits (see
:mod:`feedback.services.kafka_io`), so a restart resumes from the state that
matches the committed output: no duplicate and no missing label.

Decisions carry the pricing features but not the request side of the model
matrix; the service adds ``lead_time_days``, ``stay_dow`` and ``channel_code``
(from the decision's own time, stay date and channel) to each decision's
``features`` before the join, so labels and training examples can be scored by
the tier models without the original request. ``nights`` is not on a decision
and stays missing.

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

import threading
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from confluent_kafka import Message
from pydantic import BaseModel, ConfigDict, Field

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
from feedback.differences import DifferenceCounter, DifferenceRules
from feedback.labels import LabelJoiner
from feedback.services.kafka_io import TransactionalStage, drive, parse_record
from pricing.vectorize import request_values

DECISIONS = "pricing.decisions"
BEHAVIOUR = "behaviour.events"
LABELS = "feedback.labels"
_REQUEST_KEYS = ("lead_time_days", "stay_dow", "channel_code")


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


class LabelService(TransactionalStage):
    """The label join as a Kafka consume-transform-produce stage.

    Args:
        config: settings; a restart with the same ``checkpoint_dir``, ``group_id`` and
            ``transactional_id`` resumes where the last committed batch ended.
    """

    def __init__(self, config: LabelServiceConfig) -> None:
        self.config = config
        self.joiner = LabelJoiner(config.horizon, grace=config.grace)
        self.differences = DifferenceCounter(config.differences)
        self._max_time: dict[str, datetime] = {}
        self._decisions_topic = config.kafka.topic(DECISIONS)
        super().__init__(
            config.kafka,
            inputs=(DECISIONS, BEHAVIOUR),
            group_id=config.group_id,
            transactional_id=config.transactional_id,
            checkpoint_dir=config.checkpoint_dir,
        )
        self._batch = LabelBatchStats()

    def process_batch(self, *, before_commit: Any = None) -> LabelBatchStats:
        """Poll, join and commit one batch (labels and offsets in one transaction)."""
        self._batch = LabelBatchStats()
        self.step(max_records=self.config.max_batch, timeout_s=self.config.poll_timeout_s, before_commit=before_commit)
        self._batch.watermark = self.joiner.watermark
        return self._batch

    # ------------------------------------------------------------------ transform
    def _transform(self, msgs: list[Message]) -> int:
        stats = self._batch
        stats.consumed = len(msgs)
        for msg in msgs:
            for label, price_paid in self._one(msg):
                self._emit(label, price_paid)
        watermark = self._watermark()
        if watermark is not None:
            for label in self.joiner.advance(watermark):
                self._emit(label, None)
        return stats.labels + stats.dead_lettered

    def _one(self, msg: Message) -> list[tuple[OutcomeLabel, float | None]]:
        from_decisions = msg.topic() == self._decisions_topic
        source = DECISIONS if from_decisions else BEHAVIOUR
        try:
            event = parse_record(msg.value())
            kind = getattr(event, "event_type", None)
            if from_decisions and not isinstance(event, PricingDecision):
                field_name = "event_type"
                raise EventValidationError(field_name, kind, "'pricing_decision'")
            if not from_decisions and kind not in BEHAVIOUR_TYPES:
                field_name = "event_type"
                raise EventValidationError(field_name, kind, f"one of {list(BEHAVIOUR_TYPES)}")
        except EventValidationError as exc:
            self.writer.dead_letter(source, msg, exc)
            self._batch.dead_lettered += 1
            return []
        part = f"{msg.topic()}:{msg.partition()}"
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

    def _watermark(self) -> datetime | None:
        """Event time minus ``allowed_lateness``: the lowest per-partition max among partitions that still
        have data to read, or the highest max once every partition is caught up.

        A partition that is behind holds event time back (its outcomes are still to come); a caught-up
        partition cannot, so it drops out (otherwise a topic that went quiet would stall every label).
        """
        if not self._max_time:
            return None
        lagging = [t for k, t in self._max_time.items() if not self.reader.caught_up(k)]
        top = min(lagging) if lagging else max(self._max_time.values())
        return top - self.config.allowed_lateness

    def _emit(self, label: OutcomeLabel, price_paid: float | None) -> None:
        self.writer.produce(LABELS, label.key.encode(), dumps(label))
        self.differences.update(label, price_paid=price_paid)
        self._batch.labels += 1
        self._batch.by_reason[label.reason] += 1

    # ------------------------------------------------------------------ state
    def _state(self) -> dict[str, Any]:
        return {
            "joiner": self.joiner.state_dict(),
            "max_time": {k: v.isoformat() for k, v in self._max_time.items()},
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        self.joiner.load_state(state["joiner"])
        self._max_time = {k: datetime.fromisoformat(v) for k, v in state["max_time"].items()}


def run(
    config: LabelServiceConfig,
    *,
    stop_event: threading.Event | None = None,
    max_idle_s: float | None = None,
) -> LabelRunStats:
    """Run the label service until ``stop_event`` is set or the inputs were idle for ``max_idle_s``."""
    service = LabelService(config)
    out = LabelRunStats(restored_seq=service.restored_seq)

    def tally(batch: LabelBatchStats) -> None:
        out.batches += 1
        out.consumed += batch.consumed
        out.labels += batch.labels
        out.dead_lettered += batch.dead_lettered

    try:
        out.elapsed_s = drive(service.process_batch, tally, stop_event=stop_event, max_idle_s=max_idle_s)
    finally:
        out.differences = service.differences.summary()
        service.close()
    return out
