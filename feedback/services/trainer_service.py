"""Trainer service: ``training.examples`` -> river online model, guarded LightGBM updates, model registry.

Every example is learned at once by the river
:class:`~feedback.online.OnlineDemandModel` (with its importance weight) and
buffered. Every ``train_every`` buffered examples (or on :meth:`TrainerService.train_now`, or as soon as
``request_min_examples`` are buffered after a drift alarm appended an update request to
``<registry root>/update_requests.jsonl``: :mod:`feedback.monitors.alarms`),
the buffer goes to the :class:`~feedback.services.trainer_update.BatchUpdater` (the poisoning
guard first, then a guarded update judged on a time-ordered holdout of the batch's newest labels,
never rows of the snapshot the live model was trained on, with training rows weighed by recency;
an accepted update is registered, and promoted or rolled out).

With a :class:`~feedback.hotel_refit.HotelRefitter` (``refitter``; the composition root passes one when
cold start is on), every example also goes to it, and after each batch it refits and publishes the
models of each new hotel that reached cold-start stage ``own``, continued from the live pooled bundles
on that hotel's own examples (:mod:`feedback.hotel_refit`); ``serve`` loads them per hotel.

A rejection (stage ``poison`` or ``guard``) is returned and appended to
``<registry root>/rejections.jsonl``, an attempt that judged nothing (stage ``skipped``) to
``skipped.jsonl`` beside it. The trainer produces nothing to Kafka, so
its state (online model, guard history, buffer) and its input offsets are one
atomic checkpoint file; a restart resumes from it. A crash between a
registration and the next checkpoint replays the same batch, retrains the same
bytes and gets the same version back (registration is idempotent).

Example:
    >>> import pandas as pd
    >>> rows = [{"decision_id": "a", "event_time": 1, "booked": 1}, {"decision_id": "a", "event_time": 2, "booked": 0}]
    >>> latest_per_decision(pd.DataFrame(rows))["booked"].tolist()
    [0]
"""

from __future__ import annotations

import os
import pickle
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field

from events.config import KafkaConfig
from events.errors import EventValidationError
from events.models import TrainingExample
from events.runtime import BatchContext, Offsets, Output, Record, RunStats, Runtime, RuntimeConfig, Step
from events.runtime.service import run_service, service_config
from feedback.continued import GuardConfig
from feedback.errors import FeedbackError
from feedback.hotel_refit import HotelRefitter
from feedback.monitors.alarms import UPDATE_REQUESTS, UpdateRequests
from feedback.online import OnlineDemandModel, OnlineModelConfig
from feedback.poisoning import PoisonConfig, PoisonGuard
from feedback.registry import ModelRegistry
from feedback.services.kafka_io import parse_record
from feedback.services.trainer_update import (
    REJECTIONS,
    SKIPPED,
    BatchUpdater,
    Snapshot,
    SnapshotSource,
    UpdateOutcome,
    latest_per_decision,
)
from pricing.models import DemandModelConfig

EXAMPLES = "training.examples"
CHECKPOINT = "trainer.ckpt"

__all__ = [
    "CHECKPOINT", "EXAMPLES", "REJECTIONS", "SKIPPED", "Snapshot", "SnapshotSource", "TrainerBatchStats",
    "TrainerRunStats", "TrainerService", "TrainerServiceConfig", "UpdateOutcome", "example_row", "latest_per_decision",
    "run", "runtime_config",
]


class TrainerServiceConfig(BaseModel):
    """Settings of the trainer service."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kafka: KafkaConfig = KafkaConfig()
    state_dir: Path
    registry_root: Path
    tier: Literal["light", "heavy"] = "light"
    group_id: str = "feedback-trainer"
    train_every: int = Field(default=1000, ge=1, description="buffered examples that trigger a guarded update")
    max_buffer: int = Field(default=20_000, ge=1, description="oldest examples drop past this")
    auto_promote: bool = False
    seed: int = 0
    online: OnlineModelConfig = OnlineModelConfig()
    guard: GuardConfig = GuardConfig()
    poison: PoisonConfig = PoisonConfig()
    bundle: DemandModelConfig | None = Field(default=None, description="None: the tier's default")
    max_batch: int = Field(default=500, ge=1)
    poll_timeout_s: float = Field(default=0.5, gt=0.0)
    update_requests: Path | None = Field(
        default=None, description="drift alarms' update requests (None: <registry_root>/update_requests.jsonl)")
    request_min_examples: int = Field(
        default=200, ge=2, description="buffered examples a requested update waits for (its holdout needs some)")

    @property
    def requests_path(self) -> Path:
        """Where the drift alarm appends update requests (:class:`~feedback.monitors.alarms.UpdateRequests`)."""
        return self.update_requests or self.registry_root / UPDATE_REQUESTS


@dataclass
class TrainerBatchStats:
    """What one :meth:`TrainerService.process_batch` did."""

    consumed: int = 0
    learned: int = 0
    dead_lettered: int = 0
    buffered: int = 0
    update: UpdateOutcome | None = None
    requested: int = 0
    """Drift alarms' update requests this batch's update answered."""


@dataclass
class TrainerRunStats:
    """The trainer's own totals (a :func:`run`'s ``step`` counters; the runtime counts records and batches)."""

    learned: int = 0
    updates: list[UpdateOutcome] = field(default_factory=list)


def example_row(example: TrainingExample) -> dict[str, Any]:
    """A training-frame row: features, price, ``booked``, ``weight`` and the keys the guards need."""
    return {
        **example.features,
        "price": example.price,
        "booked": example.label,
        "weight": example.weight,
        "event_time": example.event_time,
        "hotel_id": example.hotel_id,
        "decision_id": str(example.decision_id),
    }


class TrainerService(Step[TrainingExample]):
    """Online learning on every example, guarded batch updates into the registry (an at-least-once runtime step).

    Args:
        config: settings.
        snapshot: the newest snapshot, or a callable returning it (called per update).
        runtime: runtime settings (``None``: :func:`runtime_config` of ``config``).
        registry: Prometheus registry of the runtime's series.
        stop_event: set it to stop :meth:`run` after the batch in hand.
        models: the model registry at ``config.registry_root`` to register into (``None``: a plain one).
            The composition root passes one whose ``on_change`` publishes every registration and
            ``auto_promote`` promotion on the control topic (``pricestream.control.open_registry``).
        refitter: refits new hotels in stage ``own`` on their own examples (``None``: none is).
    """

    def __init__(self, config: TrainerServiceConfig, *, snapshot: SnapshotSource,
                 runtime: RuntimeConfig | None = None, registry: CollectorRegistry | None = None,
                 stop_event: threading.Event | None = None,
                 on_registered: Callable[[str], str] | None = None, models: ModelRegistry | None = None,
                 refitter: HotelRefitter | None = None) -> None:
        self.config = config
        self.refitter = refitter
        self.on_registered = on_registered
        if models is not None and models.root.resolve() != config.registry_root.resolve():
            msg = (f"models: got the registry at {str(models.root)!r}, expected the one at "
                   f"registry_root={str(config.registry_root)!r}")
            raise FeedbackError(msg)
        self.registry = models if models is not None else ModelRegistry(config.registry_root)
        config.state_dir.mkdir(parents=True, exist_ok=True)
        self.online = OnlineDemandModel(config.online)
        self.updater = BatchUpdater(
            self.registry, snapshot, PoisonGuard(config.poison, quarantine_dir=config.state_dir / "quarantine"),
            tier=config.tier, seed=config.seed, guard_config=config.guard, bundle=config.bundle,
            work_dir=config.state_dir, auto_promote=config.auto_promote, on_registered=on_registered)
        self.buffer: list[dict[str, Any]] = []
        self.requests = UpdateRequests(config.requests_path)
        self.requests_seen = 0
        self._batch = TrainerBatchStats()
        self.totals = TrainerRunStats()
        self.runtime = Runtime(runtime or runtime_config(config), self, registry=registry, stop_event=stop_event)

    @property
    def online_model_path(self) -> Path:
        """Where the river model is saved after every batch (the sampler's committee reads it)."""
        return self.config.state_dir / "online.pkl"

    def process_batch(self) -> TrainerBatchStats:
        """Poll, learn online, maybe run a guarded update, checkpoint state and offsets."""
        self._batch = TrainerBatchStats()
        result = self.runtime.batch()
        self._batch.consumed, self._batch.dead_lettered = result.consumed, result.dead_lettered
        self._batch.buffered = len(self.buffer)
        return self._batch

    # ------------------------------------------------------------------ step
    def parse(self, record: Record[bytes]) -> TrainingExample:
        example = parse_record(record.value)
        if not isinstance(example, TrainingExample):
            field_name = "event_type"
            raise EventValidationError(field_name, getattr(example, "event_type", None), "'training_example'")
        return example

    def process(self, batch: Sequence[Record[TrainingExample]], ctx: BatchContext | None) -> list[Output]:
        for record in batch:
            example = record.value
            self.online.learn_one({**example.features, "price": example.price}, example.label, weight=example.weight)
            self.buffer.append(example_row(example))
            if self.refitter is not None:
                self.refitter.learn(self.buffer[-1])
        self._batch.learned += len(batch)
        self.totals.learned += len(batch)
        del self.buffer[: max(0, len(self.buffer) - self.config.max_buffer)]
        pending = len(self.requests.read(after=self.requests_seen))
        requested = pending > 0 and len(self.buffer) >= self.config.request_min_examples
        if len(self.buffer) >= self.config.train_every or requested:
            self._batch.update = self.train_now()
            self._batch.requested, self.requests_seen = pending, self.requests_seen + pending
            self.totals.updates.append(self._batch.update)
        if self.refitter is not None:
            self.refitter.step()
        return []

    def train_now(self) -> UpdateOutcome:
        """Run the poison guard and the guarded update on the buffer now; the buffer is consumed."""
        rows, self.buffer = self.buffer, []
        return self.updater.update(rows)

    def counters(self) -> dict[str, object]:
        """Examples learned and the updates registered (``step`` of :func:`run`'s totals)."""
        return {"learned": self.totals.learned, "updates": list(self.totals.updates)}

    def close(self) -> None:
        self.runtime.close()

    @property
    def guard(self) -> PoisonGuard:
        """The poisoning guard of the updates (its history is checkpointed)."""
        return self.updater.guard

    @guard.setter
    def guard(self, guard: PoisonGuard) -> None:
        self.updater.guard = guard

    def checkpoint(self, offsets: Mapping[str, int]) -> None:
        """Online model, guard, buffer and input offsets in one atomically replaced file.

        The group's committed offsets follow (for lag monitoring); this file is the source of truth.
        """
        offsets = dict(offsets)
        state = {"offsets": offsets, "online": self.online, "guard": self.guard, "buffer": self.buffer,
                 "hotels": None if self.refitter is None else self.refitter.state_dict(),
                 "requests_seen": self.requests_seen}
        fd, tmp = tempfile.mkstemp(dir=self.config.state_dir, prefix=".ckpt-")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(state, fh, protocol=pickle.HIGHEST_PROTOCOL)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.config.state_dir / CHECKPOINT)
        self.online.save(self.online_model_path)

    def restore(self, committed: Mapping[str, int]) -> Offsets | None:
        """The checkpoint's offsets (from the beginning without one: the group's commit is not the truth)."""
        path = self.config.state_dir / CHECKPOINT
        if not path.exists():
            return {}
        with open(path, "rb") as fh:
            state = pickle.load(fh)  # noqa: S301 - our own checkpoint only
        if not isinstance(state, dict) or not isinstance(state.get("online"), OnlineDemandModel):
            msg = f"file {str(path)!r}: not a trainer checkpoint"
            raise FeedbackError(msg)
        self.online, self.guard, self.buffer = state["online"], state["guard"], state["buffer"]
        self.requests_seen = int(state.get("requests_seen", 0))
        if self.refitter is not None and state.get("hotels") is not None:
            self.refitter.load_state(state["hotels"])
        return dict(state["offsets"])


def runtime_config(config: TrainerServiceConfig, **overrides: object) -> RuntimeConfig:
    """Runtime settings of the trainer (at-least-once, every partition, checkpointed offsets) plus ``overrides``."""
    return service_config({
        "name": "trainer", "kafka": config.kafka, "inputs": (EXAMPLES,), "group_id": config.group_id,
        "assignment": "all_partitions", "max_batch": config.max_batch, "poll_timeout_s": config.poll_timeout_s,
    }, **overrides)


def run(
    config: TrainerServiceConfig,
    *,
    snapshot: SnapshotSource,
    stop_event: threading.Event | None = None,
    max_idle_s: float | None = None,
    runtime: RuntimeConfig | None = None,
    registry: CollectorRegistry | None = None,
    on_registered: Callable[[str], str] | None = None,
    models: ModelRegistry | None = None,
    refitter: HotelRefitter | None = None,
) -> RunStats:
    """Run the trainer until ``stop_event`` is set or ``training.examples`` was idle for ``max_idle_s``.

    ``on_registered`` (when ``auto_promote`` is off) gets each version that passed the gate and says
    what it did with it (``"promoted"``, or e.g. ``"rollout"``). ``models``, ``refitter``: see
    :class:`TrainerService`. Returns the runtime's totals; ``step`` holds ``learned`` and ``updates``.
    """
    rc = runtime or runtime_config(config, max_idle_s=max_idle_s)
    service = TrainerService(config, snapshot=snapshot, runtime=rc, registry=registry, stop_event=stop_event,
                             on_registered=on_registered, models=models, refitter=refitter)
    return run_service(service.runtime)
