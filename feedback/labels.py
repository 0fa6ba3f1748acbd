"""Event-time join of pricing decisions with booking and cancellation outcomes.

A decision becomes a positive label when a booking that names its ``decision_id``
arrives with an event time inside ``[decision_time, decision_time + horizon]``.
It becomes a negative label (``no_booking``) once the watermark passes
``decision_time + horizon`` with no such booking. Later facts revise an emitted
label with ``revision + 1``: a cancellation of every booking of a booked decision
(``cancelled``, label 0) and a booking that arrives after the negative was
emitted but whose event time is inside the horizon (``late_booking``, label 1).
A booking after the horizon is never a positive.

Each label's ``event_time`` is the time of the outcome that settled it (the
booking, the cancellation, or the horizon end for ``no_booking``), so a label
only uses outcomes with event time at or before its own. Label ``event_id`` is
derived from ``(decision_id, revision)``, so replays produce the same ids.

State is bounded: decisions older than ``watermark - horizon - grace`` are
evicted, with their booking index and any outcome still waiting for them.

Example:
    >>> import uuid
    >>> from datetime import date, datetime, timedelta, timezone
    >>> from events.models import BookingEvent, PricingDecision
    >>> t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    >>> d = PricingDecision(hotel_id="h1", room_type="std", stay_date=date(2026, 2, 1),
    ...                     event_time=t0, request_id=uuid.uuid4(), price=100.0,
    ...                     tier="light", complexity=0.3, latency_ms=2.0)
    >>> joiner = LabelJoiner(timedelta(hours=24))
    >>> joiner.add_decision(d)
    []
    >>> [x.reason for x in joiner.add_outcome(BookingEvent(hotel_id="h1", room_type="std",
    ...     stay_date=date(2026, 2, 1), event_time=t0 + timedelta(hours=2), price_paid=100.0,
    ...     decision_id=d.decision_id))]
    ['booked']
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from events.models import BookingEvent, CancellationEvent, OutcomeLabel, PricingDecision
from feedback.errors import LabelJoinError, require

Reason = Literal["booked", "no_booking", "cancelled", "late_booking"]
_STATE_FORMAT = 1
_LABEL_NAMESPACE = uuid.UUID("5b0c1b0e-6c1a-4f57-9f0a-3d7f1c2b9a10")


@dataclass
class _Tracked:
    """One decision and what has been said about it so far."""

    decision: PricingDecision
    label: int | None = None
    revision: int = -1
    reason: str | None = None
    bookings: dict[uuid.UUID, datetime] = field(default_factory=dict)
    cancelled: set[uuid.UUID] = field(default_factory=set)


def _require_aware(name: str, value: datetime) -> None:
    if value.tzinfo is None:
        msg = f"field {name!r}: got naive {value!r}, expected a timezone-aware datetime"
        raise LabelJoinError(msg)


class LabelJoiner:
    """Pure, event-time driven join of decisions with outcomes.

    Args:
        horizon: how long after a decision a booking still counts as its outcome.
        grace: how long past the horizon a decision is kept, so that late
            outcomes and cancellations still revise its label.
    """

    def __init__(self, horizon: timedelta, *, grace: timedelta = timedelta(hours=6)) -> None:
        require(horizon > timedelta(0), "horizon", horizon, "a positive timedelta")
        require(grace >= timedelta(0), "grace", grace, "a non-negative timedelta")
        self.horizon = horizon
        self.grace = grace
        self._reset()

    def _reset(self) -> None:
        self._decisions: dict[uuid.UUID, _Tracked] = {}
        self._booking_index: dict[uuid.UUID, uuid.UUID] = {}
        self._waiting_bookings: dict[uuid.UUID, list[BookingEvent]] = {}
        self._waiting_cancels: dict[uuid.UUID, CancellationEvent] = {}
        self._watermark: datetime | None = None
        self._stats: Counter[str] = Counter()

    # ------------------------------------------------------------------ properties
    @property
    def watermark(self) -> datetime | None:
        """Highest watermark seen (``None`` before the first :meth:`advance`)."""
        return self._watermark

    @property
    def n_tracked(self) -> int:
        """Decisions held in state."""
        return len(self._decisions)

    @property
    def n_waiting(self) -> int:
        """Outcomes held while they wait for their decision or booking."""
        return sum(len(v) for v in self._waiting_bookings.values()) + len(self._waiting_cancels)

    @property
    def stats(self) -> dict[str, int]:
        """Counters of ignored or unusual inputs (``post_horizon_booking``, ``unlinked_booking``...)."""
        return dict(self._stats)

    def waiting_bookings(self, decision_id: uuid.UUID) -> tuple[BookingEvent, ...]:
        """Bookings held until decision ``decision_id`` arrives (they settle it in :meth:`add_decision`)."""
        return tuple(self._waiting_bookings.get(decision_id, ()))

    # ------------------------------------------------------------------ inputs
    def add_decision(self, decision: PricingDecision) -> list[OutcomeLabel]:
        """Track a decision; returns labels settled by outcomes that were waiting for it."""
        if decision.decision_id in self._decisions:
            self._stats["duplicate_decision"] += 1
            return []
        tracked = _Tracked(decision)
        self._decisions[decision.decision_id] = tracked
        labels: list[OutcomeLabel] = []
        for booking in sorted(self._waiting_bookings.pop(decision.decision_id, []), key=lambda b: b.event_time):
            labels += self._apply_booking(tracked, booking)
        return labels

    def add_outcome(self, event: BookingEvent | CancellationEvent) -> list[OutcomeLabel]:
        """Apply a booking or a cancellation; returns the labels it emits or revises.

        Raises:
            LabelJoinError: for any other event type.
        """
        if isinstance(event, BookingEvent):
            if event.decision_id is None:
                self._stats["unlinked_booking"] += 1
                return []
            tracked = self._decisions.get(event.decision_id)
            if tracked is None:
                self._waiting_bookings.setdefault(event.decision_id, []).append(event)
                return []
            return self._apply_booking(tracked, event)
        if isinstance(event, CancellationEvent):
            decision_id = self._booking_index.get(event.booking_id)
            if decision_id is None:
                self._waiting_cancels[event.booking_id] = event
                return []
            return self._apply_cancel(self._decisions[decision_id], event)
        kind = getattr(event, "event_type", type(event).__name__)
        msg = f"field 'event_type': got {kind!r}, expected 'booking' or 'cancellation'"
        raise LabelJoinError(msg)

    def advance(self, watermark: datetime) -> list[OutcomeLabel]:
        """Move event time forward: emit ``no_booking`` negatives due by ``watermark``, then evict.

        A watermark lower than the current one is ignored (watermarks never regress).
        """
        _require_aware("watermark", watermark)
        if self._watermark is not None and watermark < self._watermark:
            self._stats["watermark_regress"] += 1
            return []
        self._watermark = watermark
        due = [t for t in self._decisions.values() if t.label is None and self._deadline(t) <= watermark]
        due.sort(key=lambda t: (self._deadline(t), str(t.decision.decision_id)))
        labels = [self._emit(t, 0, "no_booking", self._deadline(t)) for t in due]
        self._evict(watermark - self.horizon - self.grace)
        return labels

    # ------------------------------------------------------------------ rules
    def _deadline(self, tracked: _Tracked) -> datetime:
        return tracked.decision.event_time + self.horizon

    def _apply_booking(self, tracked: _Tracked, booking: BookingEvent) -> list[OutcomeLabel]:
        if booking.event_time < tracked.decision.event_time:
            self._stats["booking_before_decision"] += 1
            return []
        if booking.event_time > self._deadline(tracked):
            self._stats["post_horizon_booking"] += 1
            return []
        if booking.booking_id in tracked.bookings or booking.booking_id in tracked.cancelled:
            self._stats["duplicate_booking"] += 1
            return []
        tracked.bookings[booking.booking_id] = booking.event_time
        self._booking_index[booking.booking_id] = tracked.decision.decision_id
        labels: list[OutcomeLabel] = []
        if tracked.label != 1:
            reason: Reason = "late_booking" if tracked.reason == "no_booking" else "booked"
            labels.append(self._emit(tracked, 1, reason, booking.event_time))
        waiting = self._waiting_cancels.pop(booking.booking_id, None)
        if waiting is not None:
            labels += self._apply_cancel(tracked, waiting)
        return labels

    def _apply_cancel(self, tracked: _Tracked, cancel: CancellationEvent) -> list[OutcomeLabel]:
        booked_at = tracked.bookings.get(cancel.booking_id)
        if booked_at is None:
            self._stats["duplicate_cancellation"] += 1
            return []
        if cancel.event_time < booked_at:
            self._stats["cancellation_before_booking"] += 1
            return []
        del tracked.bookings[cancel.booking_id]
        tracked.cancelled.add(cancel.booking_id)
        if tracked.label == 1 and not tracked.bookings:
            return [self._emit(tracked, 0, "cancelled", cancel.event_time)]
        return []

    def _emit(self, tracked: _Tracked, label: Literal[0, 1], reason: Reason, at: datetime) -> OutcomeLabel:
        tracked.label = label
        tracked.reason = reason
        tracked.revision += 1
        d = tracked.decision
        return OutcomeLabel(
            event_id=uuid.uuid5(_LABEL_NAMESPACE, f"{d.decision_id}:{tracked.revision}"),
            event_time=at,
            hotel_id=d.hotel_id,
            room_type=d.room_type,
            stay_date=d.stay_date,
            decision_id=d.decision_id,
            label=label,
            price=d.price,
            tier=d.tier,
            model_version=d.model_version,
            feature_version=d.feature_version,
            predicted_prob=d.expected_booking_prob,
            revision=tracked.revision,
            reason=reason,
            features=dict(d.features),
        )

    def _evict(self, cutoff: datetime) -> None:
        for decision_id in [k for k, t in self._decisions.items() if t.decision.event_time < cutoff]:
            tracked = self._decisions.pop(decision_id)
            for booking_id in (*tracked.bookings, *tracked.cancelled):
                self._booking_index.pop(booking_id, None)
            self._stats["evicted_decision"] += 1
        for decision_id, waiting in list(self._waiting_bookings.items()):
            kept = [b for b in waiting if b.event_time >= cutoff]
            self._stats["evicted_orphan_booking"] += len(waiting) - len(kept)
            if kept:
                self._waiting_bookings[decision_id] = kept
            else:
                del self._waiting_bookings[decision_id]
        for booking_id in [k for k, c in self._waiting_cancels.items() if c.event_time < cutoff]:
            del self._waiting_cancels[booking_id]
            self._stats["evicted_orphan_cancellation"] += 1

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """A JSON-serialisable snapshot of the whole state (for checkpoints)."""
        return {
            "format": _STATE_FORMAT,
            "horizon_s": self.horizon.total_seconds(),
            "grace_s": self.grace.total_seconds(),
            "watermark": None if self._watermark is None else self._watermark.isoformat(),
            "decisions": [
                {
                    "decision": t.decision.model_dump(mode="json"),
                    "label": t.label,
                    "revision": t.revision,
                    "reason": t.reason,
                    "bookings": {str(k): v.isoformat() for k, v in t.bookings.items()},
                    "cancelled": sorted(str(k) for k in t.cancelled),
                }
                for t in self._decisions.values()
            ],
            "waiting_bookings": [b.model_dump(mode="json") for v in self._waiting_bookings.values() for b in v],
            "waiting_cancels": [c.model_dump(mode="json") for c in self._waiting_cancels.values()],
            "stats": dict(self._stats),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Replace the state with a :meth:`state_dict` snapshot.

        Raises:
            LabelJoinError: if the snapshot has another format or another horizon.
        """
        if state.get("format") != _STATE_FORMAT:
            msg = f"field 'format': got {state.get('format')!r}, expected {_STATE_FORMAT}"
            raise LabelJoinError(msg)
        if state.get("horizon_s") != self.horizon.total_seconds():
            msg = f"field 'horizon_s': got {state.get('horizon_s')!r}, expected {self.horizon.total_seconds()}"
            raise LabelJoinError(msg)
        self._reset()
        wm = state.get("watermark")
        self._watermark = None if wm is None else datetime.fromisoformat(wm)
        for row in state["decisions"]:
            tracked = _Tracked(
                decision=PricingDecision.model_validate(row["decision"]),
                label=row["label"],
                revision=row["revision"],
                reason=row["reason"],
                bookings={uuid.UUID(k): datetime.fromisoformat(v) for k, v in row["bookings"].items()},
                cancelled={uuid.UUID(k) for k in row["cancelled"]},
            )
            self._decisions[tracked.decision.decision_id] = tracked
            for booking_id in (*tracked.bookings, *tracked.cancelled):
                self._booking_index[booking_id] = tracked.decision.decision_id
        for raw in state["waiting_bookings"]:
            booking = BookingEvent.model_validate(raw)
            if booking.decision_id is not None:
                self._waiting_bookings.setdefault(booking.decision_id, []).append(booking)
        for raw in state["waiting_cancels"]:
            cancel = CancellationEvent.model_validate(raw)
            self._waiting_cancels[cancel.booking_id] = cancel
        self._stats = Counter(state.get("stats", {}))
