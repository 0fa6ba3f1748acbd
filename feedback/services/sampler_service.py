"""Sampler service: ``feedback.labels`` -> committee scoring -> active sampling -> ``training.examples``.

Each label is scored by a committee (the registry's current light and heavy
bundles through :func:`pricing.tiers.load_pricer`, plus the river online model
that the trainer saves), offered to an active-learning sampler from
:mod:`feedback.samplers`, and, if selected, produced as a
:class:`~events.models.TrainingExample` with its importance weight ``1 / q``.
Examples and the consumed offsets commit in one transaction, so a crash in the
middle of a batch leaves neither duplicates nor gaps.

The draw is a pure function of ``(seed, decision_id)``: a replay after a crash
selects the same examples, and all revisions of one decision share one draw
(a revision is kept when its own ``q`` clears it). Two things can still change a
replay's choice, and both are reported: a model reload between the crash and
the replay (committee opinions move), and a binding ``budget_per_period`` (its
counters are checkpointed, but which records of a period come first depends on
how partitions interleave). With fixed models and a budget that does not bind,
the selection is exactly reproducible.

Example:
    >>> draw(0, "5b0c1b0e-6c1a-4f57-9f0a-3d7f1c2b9a10") == draw(0, "5b0c1b0e-6c1a-4f57-9f0a-3d7f1c2b9a10")
    True
    >>> 0.0 <= draw(1, "x") < 1.0
    True
"""

from __future__ import annotations

import hashlib
import math
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field

from events.config import KafkaConfig
from events.errors import EventValidationError
from events.models import OutcomeLabel, dumps
from events.runtime import BatchContext, Checkpoints, Offsets, Output, Record, RunStats, Runtime, RuntimeConfig, Step
from events.runtime.service import run_service, service_config
from feedback.fisher import FisherSampler
from feedback.online import OnlineDemandModel
from feedback.registry import ModelRegistry
from feedback.samplers import (
    Candidate,
    CommitteeSampler,
    MarginSampler,
    RandomSampler,
    Sampler,
    SamplerConfig,
    Selected,
    UncertaintySampler,
)
from feedback.services.kafka_io import parse_record
from pricing.tiers import HeavyPricer, LightPricer, load_pricer
from pricing.vectorize import LIGHT_COLUMNS, frame_matrix, input_columns

LABELS = "feedback.labels"
EXAMPLES = "training.examples"
_EXAMPLE_NAMESPACE = uuid.UUID("0f4a5c1e-2b7d-4e83-9a61-7c3e8d2f1b40")
Strategy = Literal["committee", "uncertainty", "margin", "fisher", "random"]
FISHER_COLUMNS = input_columns(LIGHT_COLUMNS)
"""What the ``fisher`` strategy's leverage is computed on: the light model's inputs (price included)."""


class SamplerServiceConfig(BaseModel):
    """Settings of the sampler service."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kafka: KafkaConfig = KafkaConfig()
    checkpoint_dir: Path
    registry_root: Path | None = Field(default=None, description="current light/heavy bundles join the committee")
    online_model_path: Path | None = Field(default=None, description="the trainer's saved river model")
    group_id: str = "feedback-sampler"
    transactional_id: str = Field(default="feedback-sampler-0", description="stable per instance")
    strategy: Strategy = "committee"
    sampler: SamplerConfig = SamplerConfig()
    max_batch: int = Field(default=500, ge=1)
    poll_timeout_s: float = Field(default=0.5, gt=0.0)


@dataclass
class SamplerBatchStats:
    """What one :meth:`SamplerService.process_batch` did."""

    consumed: int = 0
    selected: int = 0
    budget_dropped: int = 0
    dead_lettered: int = 0
    sum_weights: float = 0.0


def draw(seed: int, decision_id: str) -> float:
    """A uniform number in ``[0, 1)`` fixed by ``(seed, decision_id)``."""
    digest = hashlib.sha256(f"{seed}:{decision_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


class Committee:
    """Booking probabilities of a label from every available model (light, heavy, online).

    Models reload when the registry's ``generation`` or the online model file changes.

    Args:
        registry_root: model registry directory, or ``None``.
        online_model_path: pickled :class:`~feedback.online.OnlineDemandModel`, or ``None``.
    """

    def __init__(self, *, registry_root: Path | None, online_model_path: Path | None) -> None:
        self._registry = None if registry_root is None else ModelRegistry(registry_root)
        self._online_path = online_model_path
        self._generation = -1
        self._online_mtime: float | None = None
        self.pricers: dict[str, LightPricer | HeavyPricer] = {}
        self.online: OnlineDemandModel | None = None

    @property
    def versions(self) -> dict[str, str | None]:
        out: dict[str, str | None] = {tier: p.version for tier, p in self.pricers.items()}
        out["online"] = None if self.online is None else f"online-n{self.online.n_seen}"
        return out

    def refresh(self) -> None:
        """Reload what changed since the last call."""
        if self._registry is not None and self._registry.generation != self._generation:
            self._generation = self._registry.generation
            self.pricers = {}
            for tier in ("light", "heavy"):
                entry = self._registry.current(tier)
                if entry is not None:
                    self.pricers[tier] = load_pricer(entry.path)
        path = self._online_path
        if path is not None and path.exists() and path.stat().st_mtime != self._online_mtime:
            self._online_mtime = path.stat().st_mtime
            self.online = OnlineDemandModel.load(path)

    def opinions(self, labels: Sequence[OutcomeLabel]) -> list[tuple[float, ...]]:
        """One tuple of probabilities per label (batched per tier model)."""
        columns: list[np.ndarray] = []
        for pricer in self.pricers.values():
            cols = pricer.meta["columns"]
            inputs = list(input_columns(cols))
            rows = [{**{c: _num(lab.features.get(c)) for c in inputs}, "price": lab.price} for lab in labels]
            x = frame_matrix(pd.DataFrame(rows, columns=inputs), cols)  # derives the relative prices
            columns.append(np.asarray(pricer.predict(x), dtype=float).mean(axis=1))
        if self.online is not None:
            online = self.online
            columns.append(np.array([online.predict_proba_one({**lab.features, "price": lab.price}) for lab in labels]))
        if not columns:
            return [() for _ in labels]
        stacked = np.column_stack(columns)
        return [tuple(float(v) for v in row) for row in stacked]


def _num(value: float | None) -> float:
    return math.nan if value is None else float(value)


def make_sampler(strategy: Strategy, config: SamplerConfig) -> Sampler:
    """The :mod:`feedback.samplers` class for ``strategy``."""
    if strategy == "fisher":
        return FisherSampler(config, columns=FISHER_COLUMNS)
    kinds: dict[str, type[Sampler]] = {
        "committee": CommitteeSampler,
        "uncertainty": UncertaintySampler,
        "margin": MarginSampler,
        "random": RandomSampler,
    }
    return kinds[strategy](config)


class SamplerService(Step[OutcomeLabel]):
    """Active sampling of labels as a transactional runtime step.

    Args:
        config: settings; a restart with the same ids and ``checkpoint_dir`` resumes exactly once.
        runtime: runtime settings (``None``: :func:`runtime_config` of ``config``).
        registry: Prometheus registry of the runtime's series.
        stop_event: set it to stop :meth:`run` after the batch in hand.
    """

    def __init__(self, config: SamplerServiceConfig, *, runtime: RuntimeConfig | None = None,
                 registry: CollectorRegistry | None = None, stop_event: threading.Event | None = None) -> None:
        self.config = config
        self.sampler = make_sampler(config.strategy, config.sampler)
        self.committee = Committee(registry_root=config.registry_root, online_model_path=config.online_model_path)
        self.checkpoints = Checkpoints(config.checkpoint_dir)
        self.restored_seq: int | None = None
        self._seq = 0
        self._used: dict[int, int] = {}
        self._batch = SamplerBatchStats()
        self.selected = 0
        self.runtime = Runtime(runtime or runtime_config(config), self, registry=registry, stop_event=stop_event)

    def process_batch(self, *, before_commit: Callable[[int], None] | None = None) -> SamplerBatchStats:
        """Poll, score, sample and commit one batch (examples and offsets in one transaction)."""
        self._batch = SamplerBatchStats()
        result = self.runtime.batch(before_commit=before_commit)
        self._batch.consumed, self._batch.dead_lettered = result.consumed, result.dead_lettered
        return self._batch

    def close(self) -> None:
        self.runtime.close()

    def decide(self, label: OutcomeLabel, opinions: tuple[float, ...]) -> Selected | None:
        """Select (or not) one label: deterministic draw, then the per-period budget."""
        cand = Candidate.from_label(label, committee=opinions)
        q = self.sampler.selection_prob(cand)
        if draw(self.config.sampler.seed, str(label.decision_id)) >= q:
            return None
        budget = self.config.sampler.budget_per_period
        bucket = math.floor(label.event_time.timestamp() / self.config.sampler.period.total_seconds())
        if budget is not None and self._used.get(bucket, 0) >= budget:
            self._batch.budget_dropped += 1
            return None
        self._used[bucket] = self._used.get(bucket, 0) + 1
        for old in [b for b in self._used if b < bucket - 1]:
            del self._used[old]  # bounded: the current and the previous period only
        return Selected(cand, 1.0 / q, q, self.sampler.informativeness(cand), self.sampler.strategy)

    # ------------------------------------------------------------------ step
    def parse(self, record: Record[bytes]) -> OutcomeLabel:
        event = parse_record(record.value)
        if not isinstance(event, OutcomeLabel):
            field_name = "event_type"
            raise EventValidationError(field_name, getattr(event, "event_type", None), "'label'")
        return event

    def process(self, batch: Sequence[Record[OutcomeLabel]], ctx: BatchContext | None) -> list[Output]:
        self.committee.refresh()
        labels = [r.value for r in batch]
        scored = list(zip(labels, self.committee.opinions(labels), strict=True))
        self.sampler.observe([Candidate.from_label(label, committee=opinions) for label, opinions in scored])
        outs: list[Output] = []
        for label, opinions in scored:
            chosen = self.decide(label, opinions)
            if chosen is None:
                continue
            example = chosen.to_training_example()
            example = example.model_copy(
                update={"event_id": uuid.uuid5(_EXAMPLE_NAMESPACE, f"{label.decision_id}:{label.revision}")}
            )
            outs.append(Output(EXAMPLES, example.key.encode(), dumps(example)))
            self._batch.selected += 1
            self._batch.sum_weights += chosen.weight
        self.selected += len(outs)
        return outs

    # ------------------------------------------------------------------ state
    def restore(self, committed: Mapping[str, int]) -> Offsets | None:
        state = self.checkpoints.restore(committed)
        if state is not None:
            self.restored_seq = self._seq = int(state["_seq"])
            self._used = {int(k): int(v) for k, v in state["used"].items()}
        return None

    def checkpoint(self, offsets: Mapping[str, int]) -> None:
        self._seq += 1
        self.checkpoints.save(self._seq, offsets, {"used": {str(k): v for k, v in self._used.items()}})

    def describe(self) -> dict[str, Any]:
        return {"selected": self.selected, "models": self.committee.versions}

    def counters(self) -> dict[str, object]:
        """Examples selected, the checkpoint restored at start-up and the committee's model versions."""
        return {"selected": self.selected, "restored_seq": self.restored_seq, "models": self.committee.versions}


def runtime_config(config: SamplerServiceConfig, **overrides: object) -> RuntimeConfig:
    """Runtime settings of the sampler (transactional, every partition of ``feedback.labels``) plus ``overrides``."""
    return service_config({
        "name": "sampler", "kafka": config.kafka, "inputs": (LABELS,), "group_id": config.group_id,
        "mode": "transactional", "assignment": "all_partitions", "transactional_id": config.transactional_id,
        "max_batch": config.max_batch, "poll_timeout_s": config.poll_timeout_s,
    }, **overrides)


def run(
    config: SamplerServiceConfig,
    *,
    stop_event: threading.Event | None = None,
    max_idle_s: float | None = None,
    runtime: RuntimeConfig | None = None,
    registry: CollectorRegistry | None = None,
) -> RunStats:
    """Run the sampler until ``stop_event`` is set or ``feedback.labels`` was idle for ``max_idle_s``.

    Returns the runtime's totals; ``step`` holds :meth:`SamplerService.counters`.
    """
    rc = runtime or runtime_config(config, max_idle_s=max_idle_s)
    return run_service(SamplerService(config, runtime=rc, registry=registry, stop_event=stop_event).runtime)
