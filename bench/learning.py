"""The deployed loop's learning inside an in-process benchmark: labels joined to decisions, guarded updates.

:class:`LabelJoin` is the label service's join done in process: a decision is booked if a booking of its
key (hotel, room type, night, channel) at its price follows, and not booked once ``LABEL_HORIZON_H`` has
passed without one. :class:`LoopTrainer` is the trainer service's update done in process: every ``every``
of simulated time each tier's bundle goes through :func:`feedback.continued.guarded_update` on the labels
since the last update, against a snapshot frame, and an accepted update becomes the live bundle through
:func:`feedback.continued.accepted_bundle` (the code the trainer service registers with). The snapshot
is the frame the models were trained on plus every batch of labels so far, as an operator who freezes a
labelled snapshot with each batch has it; the newest ``HELD_SHARE`` of the round's labels are its newest
rows and the guard's holdout, so an update is judged on outcomes that no model has seen. Every decision
is labelled (the deployed sampler picks some of them).

Example:
    >>> from datetime import UTC, datetime
    >>> seen = []
    >>> join = LabelJoin(lambda request, decision, booked: seen.append(booked))
    >>> join.flush(datetime(2026, 5, 1, tzinfo=UTC))
    >>> seen
    []
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from events.models import PricingDecision, PricingRequest
from feedback.continued import accepted_bundle, guarded_update
from pricing.cold_start import label_row
from pricing.training import read_meta

HELD_SHARE = 0.3
"""The newest share of a round's labels held out to judge it: rows that neither the live bundle nor a candidate
trained on (the snapshot's own newest rows are what the live bundle was fitted on, so a holdout cut from them
favours it: with it, resort from 1 November, seed 3, 15 updates of 16 were rejected)."""
MIN_HELD = 100
LABEL_HORIZON_H = 2.0
"""Hours after a decision with no booking of it: a 0, as the label service joins them."""

Sink = Callable[[PricingRequest, PricingDecision, bool], None]


class LabelJoin:
    """Decisions waiting for their outcome; ``sink(request, decision, booked)`` gets each once it is known."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.pending: deque[tuple[datetime, PricingRequest, PricingDecision]] = deque()

    def shown(self, request: PricingRequest, decision: PricingDecision) -> None:
        self.flush(request.event_time)
        self.pending.append((request.event_time, request, decision))

    def booked(self, event: Any) -> None:
        key = (event.hotel_id, event.room_type, event.stay_date, event.channel, event.price_paid)
        for i, (_, request, decision) in enumerate(self.pending):
            if (request.hotel_id, request.room_type, request.stay_date, request.channel, decision.price) == key:
                del self.pending[i]
                self.sink(request, decision, True)
                return

    def flush(self, now: datetime) -> None:
        while self.pending and now - self.pending[0][0] > timedelta(hours=LABEL_HORIZON_H):
            _, request, decision = self.pending.popleft()
            self.sink(request, decision, False)


class LoopTrainer:
    """Guarded updates of a light and a heavy bundle every ``every`` of simulated time (see the module).

    ``on_update(light, heavy)`` gets the live bundle paths after every update round; ``log`` collects one line
    per tier and round (accepted or why not). ``weight``: each new label's training weight (a snapshot row's is 1),
    the recency of an update.
    """

    def __init__(
        self,
        bundles: tuple[Path, Path],
        snapshot: pd.DataFrame,
        work: Path,
        *,
        every: timedelta,
        seed: int,
        on_update: Callable[[Path, Path], None],
        weight: float = 1.0,
    ) -> None:
        self.live = list(bundles)
        self.snapshot = snapshot.drop(columns=["true_prob"], errors="ignore")
        self.work, self.every, self.seed, self.on_update = work, every, seed, on_update
        self.weight = weight
        self.rows: list[dict[str, Any]] = []
        self.due: datetime | None = None
        self.log: list[str] = []
        self.accepted = 0

    def learn(self, request: PricingRequest, decision: PricingDecision, booked: bool) -> None:
        self.rows.append({**label_row(request, decision, booked), "event_time": request.event_time})

    def tick(self, now: datetime) -> None:
        """Run an update round if one is due at ``now`` (the first call starts the clock)."""
        if self.due is None:
            self.due = now + self.every
        if now < self.due or not self.rows:
            return
        self.due = now + self.every
        batch = pd.DataFrame(self.rows).sort_values("event_time", kind="stable").reset_index(drop=True)
        self.rows = []
        held = max(MIN_HELD, int(len(batch) * HELD_SHARE))
        if len(batch) < 2 * held:
            self.log.append(f"{now:%Y-%m-%d} {len(batch)} labels: too few to hold {held} out, kept for the next")
            self.rows = batch.to_dict("records")
            return
        fresh, newest = batch.iloc[: len(batch) - held], batch.iloc[len(batch) - held :]
        snapshot = pd.concat([self.snapshot, newest.reindex(columns=self.snapshot.columns)], ignore_index=True)
        tiers: tuple[Literal["light", "heavy"], ...] = ("light", "heavy")
        for i, tier in enumerate(tiers):
            current = self.live[i]
            columns = read_meta(current)["columns"]
            rows = fresh.reindex(columns=list(dict.fromkeys([*columns, *fresh.columns]))).assign(weight=self.weight)
            result = guarded_update(
                str(current), rows, snapshot, seed=self.seed, validation_fraction=held / len(snapshot)
            )
            self.log.append(f"{now:%Y-%m-%d} {tier} {len(rows)} labels, {held} held out: {result.reason}")
            if result.accepted:
                out = self.work / f"{tier}-{now:%Y%m%dT%H%M}"
                self.live[i] = accepted_bundle(result, current, out, tier=tier, seed=self.seed).path
                self.accepted += 1
        kept = batch.reindex(columns=self.snapshot.columns)
        self.snapshot = pd.concat([self.snapshot, kept], ignore_index=True)
        self.on_update(self.live[0], self.live[1])
