"""The trainer's batch update, without Kafka: poisoning guard, then a guarded update judged on unseen labels.

:class:`BatchUpdater` is the core of :class:`~feedback.services.trainer_service.TrainerService`
(which feeds it the buffered examples): a buffer of example rows (one per decision, its latest
revision) goes through

1. the :class:`~feedback.poisoning.PoisonGuard`, scored by the tier's current registered model
   (labels) and against the snapshot's and accepted batches' feature distribution; a quarantined
   batch is never trained on, and never judges anything;
2. :func:`feedback.continued.guarded_update` against the newest snapshot frame, judged on a
   time-ordered holdout of the batch's newest labels (``GuardConfig.holdout_from="new"``): outcomes
   no model has seen, never a row of the snapshot the live model was trained on
   (``UpdateOutcome.holdout`` names the decisions held out); training rows weigh by recency
   (``GuardConfig.recency_half_life_days``);
3. on acceptance, :func:`feedback.continued.accepted_bundle`, :meth:`ModelRegistry.register` with
   parent, snapshot id, data range and metrics, and ``promote`` if ``auto_promote`` (else the
   ``on_registered`` hook decides: promote, or start a rollout).

A rejection (stage ``poison`` or ``guard``) is returned and appended to
``<registry root>/rejections.jsonl``; an attempt on buffered examples that judged nothing (stage
``skipped``: too few unseen labels to hold out, no promoted model to update) to
``<registry root>/skipped.jsonl``, with its reason, so an operator sees why examples bought no update.

Example:
    >>> import pandas as pd
    >>> rows = [{"decision_id": "a", "event_time": 1, "booked": 1}, {"decision_id": "a", "event_time": 2, "booked": 0}]
    >>> latest_per_decision(pd.DataFrame(rows))["booked"].tolist()
    [0]
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from feedback.continued import GuardConfig, UpdateResult, accepted_bundle, guarded_update, predict
from feedback.errors import TrainingError
from feedback.poisoning import PoisonGuard
from feedback.registry import Entry, ModelRegistry
from pricing.models import DemandModelConfig
from pricing.training import load_boosters
from pricing.vectorize import frame_matrix

REJECTIONS = "rejections.jsonl"
SKIPPED = "skipped.jsonl"
"""Update attempts on buffered examples that judged nothing, one JSON line each (same fields as a rejection)."""


@dataclass(frozen=True)
class Snapshot:
    """The newest curated training frame (columns: the tier's model columns, ``booked``, ``event_time``)."""

    snapshot_id: str
    frame: pd.DataFrame


SnapshotSource = Snapshot | Callable[[], Snapshot]


@dataclass
class UpdateOutcome:
    """Result of one guarded update attempt."""

    accepted: bool
    stage: Literal["skipped", "poison", "guard", "registered"]
    reason: str
    n_examples: int
    version: str | None = None
    parent: str | None = None
    promoted: bool = False
    metrics: dict[str, Any] = field(default_factory=dict)
    quarantine_path: str | None = None
    holdout: tuple[str, ...] = ()
    """The ``decision_id`` of each label the update was judged on (empty when no update was judged)."""


def latest_per_decision(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per ``decision_id``: the one with the latest ``event_time`` (a revision supersedes)."""
    ordered = frame.sort_values("event_time", kind="stable")
    return ordered.drop_duplicates("decision_id", keep="last").reset_index(drop=True)


@dataclass
class BatchUpdater:
    """Guarded updates of one tier's registered model from batches of example rows (see the module).

    Attributes:
        registry: the model registry (the tier's current entry is the model updated).
        snapshot: the newest snapshot, or a callable returning it (called per update).
        guard: the poisoning guard (its history is part of the trainer's checkpoint).
        tier: ``light`` or ``heavy``.
        seed: training seed.
        guard_config: the guarded update's settings (holdout, recency, tolerance).
        bundle: the bundle's model settings (``None``: the tier's default).
        work_dir: where candidate bundles are written before registration.
        auto_promote: promote an accepted version at once.
        on_registered: otherwise, gets each accepted version and says what it did (``"promoted"``, ...).
    """

    registry: ModelRegistry
    snapshot: SnapshotSource
    guard: PoisonGuard
    tier: Literal["light", "heavy"] = "light"
    seed: int = 0
    guard_config: GuardConfig = field(default_factory=GuardConfig)
    bundle: DemandModelConfig | None = None
    work_dir: Path = field(default_factory=lambda: Path(tempfile.gettempdir()))
    auto_promote: bool = False
    on_registered: Callable[[str], str] | None = None

    def update(self, rows: list[dict[str, Any]]) -> UpdateOutcome:
        """Run the poison guard and the guarded update on ``rows`` (example rows, oldest first)."""
        current = self.registry.current(self.tier)
        if not rows:
            return UpdateOutcome(False, "skipped", "no buffered examples", 0)
        if current is None:
            return self._record(SKIPPED, UpdateOutcome(False, "skipped", f"no promoted {self.tier} model to update",
                                                       len(rows)), None)
        batch = latest_per_decision(pd.DataFrame(rows))
        snapshot = self.snapshot() if callable(self.snapshot) else self.snapshot
        self.guard.seed_features(snapshot.frame)  # before any accepted batch, the snapshot is the feature reference
        members, meta = load_boosters(current.path)
        batch = batch.reindex(columns=list(dict.fromkeys([*meta["columns"], *batch.columns])))
        probs = predict(members, frame_matrix(batch, meta["columns"]))
        before = self.guard.state_dict()  # a batch the guarded update refuses must not enter the guard's history
        verdict = self.guard.check(batch, probs, batch_id=f"{current.version}-{batch['decision_id'].iloc[0][:8]}")
        if not verdict.accepted:
            qpath = None if verdict.quarantine_path is None else str(verdict.quarantine_path)
            out = UpdateOutcome(False, "poison", verdict.reason, len(batch), parent=current.version,
                                metrics=dict(verdict.stats), quarantine_path=qpath)
            return self._record(REJECTIONS, out, snapshot)
        try:
            result = guarded_update(str(current.path), batch, snapshot.frame, seed=self.seed,
                                    config=self.guard_config)
        except TrainingError as exc:  # e.g. too few unseen labels to hold out: no update from this batch
            self.guard.load_state(before)
            out = UpdateOutcome(False, "skipped", str(exc), len(batch), parent=current.version)
            return self._record(SKIPPED, out, snapshot)
        holdout = tuple(result.validation["decision_id"].astype(str)) if "decision_id" in result.validation else ()
        if not result.accepted:
            self.guard.load_state(before)
            out = UpdateOutcome(False, "guard", result.reason, len(batch), parent=current.version,
                                metrics=dict(result.metrics), holdout=holdout)
            return self._record(REJECTIONS, out, snapshot)
        outcome = self._register(current, batch, result, snapshot)
        outcome.holdout = holdout
        return outcome

    def _register(self, current: Entry, batch: pd.DataFrame, result: UpdateResult, snapshot: Snapshot) -> UpdateOutcome:
        chosen, metrics = result.chosen, result.metrics
        out_dir = Path(tempfile.mkdtemp(dir=self.work_dir, prefix="bundle-"))
        try:
            info = accepted_bundle(result, current.path, out_dir, tier=self.tier, seed=self.seed,
                                   config=self.bundle)
            all_metrics = {**metrics, **info.metrics, "chosen": chosen, "n_examples": len(batch)}
            times = pd.to_datetime(batch["event_time"], utc=True)
            data_range = (times.min().to_pydatetime(), times.max().to_pydatetime())
            version = self.registry.register(info.path, tier=self.tier, parent=current.version,
                                             snapshot_id=snapshot.snapshot_id, data_range=data_range,
                                             metrics=all_metrics)
        finally:
            shutil.rmtree(out_dir, ignore_errors=True)
        promoted = self.auto_promote
        if promoted:
            self.registry.promote(version)
        elif self.on_registered is not None:
            promoted = self.on_registered(version) == "promoted"  # or a rollout was started
        return UpdateOutcome(True, "registered", f"registered {version} ({chosen})", len(batch), version,
                             current.version, promoted, all_metrics)

    def _record(self, log_name: str, outcome: UpdateOutcome, snapshot: Snapshot | None) -> UpdateOutcome:
        """Append an update that registered nothing to ``<registry root>/<log_name>`` and return it."""
        line = {
            "at": datetime.now(tz=UTC).isoformat(),
            "tier": self.tier,
            "stage": outcome.stage,
            "reason": outcome.reason,
            "current_version": outcome.parent,
            "snapshot_id": None if snapshot is None else snapshot.snapshot_id,
            "n_examples": outcome.n_examples,
            "quarantine_path": outcome.quarantine_path,
            "metrics": outcome.metrics,
        }
        self.registry.root.mkdir(parents=True, exist_ok=True)
        with open(self.registry.root / log_name, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, default=str) + "\n")
        return outcome
