"""Guarded LightGBM updates: continue or retrain, keep the result only if it is not worse.

:func:`guarded_update` builds two candidates from the current model:

* **continued**: every member booster gets ``continued_rounds`` more trees fitted
  on the new (importance-weighted) examples (``init_model``);
* **retrain**: fresh members fitted on the snapshot plus the new examples.

Both, and the current model, are scored by log-loss on a holdout never trained on. By
default (``holdout_from="new"``) it is the newest ``validation_fraction`` of the new labels by
event time, never a row of the snapshot (the live model's training frame; a new row whose
``decision_id`` the snapshot has is dropped): judged on the snapshot's newest rows, the live
model is scored on rows it was fitted on and wins (resort from 1 November, weekly: 15 of 16
refused). New labels are the untrusted part, so the poisoning guard (:mod:`feedback.poisoning`)
runs on them first, as in the trainer service; ``"snapshot"`` and ``"all"`` remain for a caller
without it. The best candidate is kept unless its held-out log-loss exceeds the current one's
by ``tolerance`` plus ``z_worse`` standard errors of the paired per-row gap (a holdout of fresh
labels is small: judged by its mean alone, an equal candidate is refused half the time).
With ``recency_half_life_days`` every training row's weight is multiplied by
``0.5 ** (age / half_life)``, its age counted from the newest row, so a new season can move a
model fitted on months of older rows.

Models are native boosters (one, or several members averaged, like a heavy
bundle), or a bundle directory with ``meta.json`` listing ``boosters`` and
``columns`` (the layout of :func:`pricing.training.train_bundle`). Candidates
are fitted here with LightGBM by default; pass ``trainer`` (for instance
:func:`bundle_trainer`, which calls ``pricing.training.train_bundle``) to have
each candidate written as an ONNX bundle, so that the bundle that passes the
guard is exactly the one that was validated (``UpdateResult.bundle_dir``).
``on_accept`` receives an accepted :class:`UpdateResult`.

Example:
    >>> import numpy as np, pandas as pd, lightgbm as lgb
    >>> rng = np.random.default_rng(0)
    >>> def frame(n, start, shift):  # demand moved by `shift` since the current model was trained
    ...     x = rng.normal(size=n)
    ...     return pd.DataFrame({"x": x, "booked": (rng.random(n) < 1 / (1 + np.exp(-3 * x - shift))).astype(int),
    ...         "event_time": pd.date_range(start, periods=n, freq="min", tz="UTC")})
    >>> old = frame(1500, "2026-01-01", 0.0)
    >>> params = {"objective": "binary", "verbose": -1, "num_leaves": 7}
    >>> current = lgb.train(params, lgb.Dataset(old[["x"]], old["booked"]), num_boost_round=30)
    >>> res = guarded_update(current, frame(600, "2026-01-03", 1.5), frame(1000, "2026-01-02", 1.5), seed=0)
    >>> res.accepted, res.metrics["logloss_current"] > res.metrics[f"logloss_{res.chosen}"]
    (True, True)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import lightgbm as lgb
import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from feedback.errors import TrainingError, require
from feedback.holdout import check_columns, float_gaps, recency, split, xyw
from pricing.vectorize import input_columns

if TYPE_CHECKING:  # the pricing package owns bundle layout and ONNX export: imported where a bundle is written
    from pricing.models import DemandModelConfig
    from pricing.training import BundleInfo

_EPS = 1e-7  # probability clip for log-loss: a confident miss costs ~16 nats, not infinity

Current = lgb.Booster | Sequence[lgb.Booster] | str | Path
CandidateKind = Literal["continued", "retrain"]
Trainer = Callable[[pd.DataFrame, CandidateKind], "Sequence[lgb.Booster] | str | Path"]
"""``trainer(frame, kind)`` fits one candidate; returns boosters or a bundle directory."""


class GuardConfig(BaseModel):
    """Knobs of :func:`guarded_update`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tolerance: float = Field(default=0.002, ge=0.0, description="allowed log-loss increase vs current")
    z_worse: float = Field(default=1.645, ge=0.0, description="a candidate is refused when its held-out log-loss "
                           "is above current + tolerance by more than this many standard errors of the paired gap")
    continued_rounds: int = Field(default=20, ge=1)
    retrain_rounds: int = Field(default=50, ge=1)
    num_leaves: int = Field(default=15, ge=2)
    learning_rate: float = Field(default=0.1, gt=0.0, le=1.0)
    min_data_in_leaf: int = Field(default=20, ge=1)
    min_validation_rows: int = Field(default=50, ge=1)
    holdout_from: Literal["new", "snapshot", "all"] = "new"
    recency_half_life_days: float | None = Field(default=28.0, gt=0.0, description="training weight halves per")
    label_column: str = "booked"
    time_column: str = "event_time"
    weight_column: str = "weight"


@dataclass
class UpdateResult:
    """Outcome of a guarded update."""

    accepted: bool
    chosen: Literal["continued", "retrain"] | None
    members: list[lgb.Booster]
    columns: tuple[str, ...]
    metrics: dict[str, float]
    reason: str
    train_frame: pd.DataFrame = field(repr=False, default_factory=pd.DataFrame)
    bundle_dir: Path | None = None
    validation: pd.DataFrame = field(repr=False, default_factory=pd.DataFrame)
    """The holdout the candidates were judged on."""

    @property
    def booster(self) -> lgb.Booster:
        """The first member (the only one for a single-booster model)."""
        return self.members[0]


def log_loss(y: np.ndarray, p: np.ndarray, weight: np.ndarray | None = None) -> float:
    """Weighted mean binary log-loss with clipped probabilities.

    Example:
        >>> round(log_loss(np.array([1, 0]), np.array([0.8, 0.4])), 4)
        0.367
    """
    p = np.clip(p, _EPS, 1 - _EPS)
    losses = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    return float(np.average(losses, weights=weight))


def row_losses(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Per-row binary log-loss with clipped probabilities."""
    p = np.clip(p, _EPS, 1 - _EPS)
    return -(y * np.log(p) + (1 - y) * np.log(1 - p))


def paired_gap(differences: np.ndarray, weight: np.ndarray) -> tuple[float, float]:
    """Weighted mean of per-row loss differences and its standard error (Kish's effective size).

    Example:
        >>> gap, se = paired_gap(np.array([0.1, -0.1, 0.2, 0.0]), np.ones(4))
        >>> round(gap, 3), round(se, 3)
        (0.05, 0.065)
    """
    mean = float(np.average(differences, weights=weight))
    n_eff = float(weight.sum() ** 2 / np.sum(weight**2))
    var = float(np.average((differences - mean) ** 2, weights=weight)) * n_eff / max(n_eff - 1.0, 1.0)
    return mean, float(np.sqrt(var / n_eff))


def predict(members: Sequence[lgb.Booster], x: np.ndarray) -> np.ndarray:
    """Booking probability: the mean over members."""
    return np.mean([np.asarray(m.predict(x), dtype=float) for m in members], axis=0)


def guarded_update(
    current: Current,
    new_examples: pd.DataFrame,
    snapshot_frame: pd.DataFrame,
    *,
    validation_fraction: float = 0.2,
    seed: int = 0,
    config: GuardConfig | None = None,
    columns: Sequence[str] | None = None,
    trainer: Trainer | None = None,
    on_accept: Callable[[UpdateResult], Any] | None = None,
) -> UpdateResult:
    """Continue and retrain the current model; keep the better candidate only if not worse.

    Raises:
        TrainingError: missing columns, too few validation rows, or a trainer that failed.
    """
    cfg = config or GuardConfig()
    require(0.0 < validation_fraction < 1.0, "validation_fraction", validation_fraction, "a fraction in (0, 1)")
    members, cols = _resolve(current, columns)
    for name, frame in (("new_examples", new_examples), ("snapshot_frame", snapshot_frame)):
        check_columns(name, frame, (*input_columns(cols), cfg.label_column, cfg.time_column))
    new_train, snap_train, val = split(float_gaps(new_examples), float_gaps(snapshot_frame), validation_fraction, cfg)
    x_val, y_val, w_val = xyw(val, cols, cfg)
    new_train, snap_train = recency(new_train, snap_train, cfg)
    candidates = _candidates(new_train, snap_train, members, cols, cfg, seed, trainer)
    scores, gaps = _score(candidates, members, x_val, y_val, w_val)
    metrics = {f"logloss_{k}": v for k, v in scores.items()}
    metrics.update(n_validation=float(len(val)), n_new=float(len(new_train)), n_snapshot_train=float(len(snap_train)))
    best = min(candidates, key=lambda k: scores[k])
    gap, se = gaps[best]
    metrics.update(logloss_gap=gap, logloss_gap_se=se)
    evidence = f"gap {gap:+.4f} +- {se:.4f} on {len(val)} held-out labels"
    if gap - cfg.z_worse * se > cfg.tolerance:
        reason = (
            f"rejected: best candidate {best!r} log-loss {scores[best]:.4f} vs current {scores['current']:.4f}"
            f" ({evidence}): worse than tolerance {cfg.tolerance} by more than {cfg.z_worse} standard errors"
        )
        return UpdateResult(False, None, list(members), cols, metrics, reason, validation=val)
    chosen: CandidateKind = "continued" if best == "continued" else "retrain"
    reason = f"accepted {best!r}: log-loss {scores[best]:.4f} vs current {scores['current']:.4f} ({evidence})"
    fitted, frame, bundle = candidates[best]
    result = UpdateResult(True, chosen, fitted, cols, metrics, reason, frame, bundle, val)
    if on_accept is not None:
        on_accept(result)
    return result


Candidates = dict[str, tuple[list[lgb.Booster], pd.DataFrame, Path | None]]
"""Candidate kind -> (its members, the frame it was fitted on, its bundle directory when a trainer wrote one)."""


def _candidates(
    new_train: pd.DataFrame,
    snap_train: pd.DataFrame,
    members: Sequence[lgb.Booster],
    cols: Sequence[str],
    cfg: GuardConfig,
    seed: int,
    trainer: Trainer | None,
) -> Candidates:
    """The continued candidate (when there are new rows to continue on) and the retrained one."""
    both = pd.concat([snap_train, new_train], ignore_index=True)
    plan: list[tuple[CandidateKind, pd.DataFrame]] = [("continued", new_train)] if len(new_train) else []
    plan.append(("retrain", both))
    candidates: Candidates = {}
    for kind, frame in plan:
        if trainer is None:
            candidates[kind] = (_native(kind, frame, members, cols, cfg, seed), frame, None)
        else:
            fitted, bundle = _external(trainer, kind, frame, cols)
            candidates[kind] = (fitted, frame, bundle)
    return candidates


def _score(
    candidates: Candidates, members: Sequence[lgb.Booster], x_val: np.ndarray, y_val: np.ndarray, w_val: np.ndarray
) -> tuple[dict[str, float], dict[str, tuple[float, float]]]:
    """Held-out log-loss of the current model and of each candidate; each candidate's paired gap to current."""
    current = predict(members, x_val)
    scores = {"current": log_loss(y_val, current, w_val)}
    current_losses = row_losses(y_val, current)
    gaps: dict[str, tuple[float, float]] = {}
    for name, (cand, _, _) in candidates.items():
        p = predict(cand, x_val)
        scores[name] = log_loss(y_val, p, w_val)
        gaps[name] = paired_gap(row_losses(y_val, p) - current_losses, w_val)
    return scores, gaps


def bundle_trainer(
    current_bundle: str | Path, work_dir: str | Path, *, tier: Literal["light", "heavy"], seed: int = 0
) -> Trainer:
    """A ``trainer`` that writes each candidate as an ONNX bundle with ``pricing.training.train_bundle``.

    ``continued`` continues ``current_bundle`` (``init_model``); ``retrain`` starts afresh.
    Bundles go to ``work_dir/<kind>``; the frames need the tier's model columns and ``booked``.
    """

    from pricing.errors import PricingError  # the pricing package owns bundle layout and ONNX export
    from pricing.training import train_bundle

    def train(frame: pd.DataFrame, kind: CandidateKind) -> Path:
        init = current_bundle if kind == "continued" else None
        try:
            return train_bundle(frame, Path(work_dir) / kind, tier=tier, seed=seed, init_model=init).path
        except PricingError as exc:
            msg = f"train_bundle failed on the {kind!r} candidate ({len(frame)} rows): {exc}"
            raise TrainingError(msg) from exc

    return train


def accepted_bundle(
    result: UpdateResult,
    current_bundle: str | Path,
    out_dir: str | Path,
    *,
    tier: Literal["light", "heavy"],
    seed: int = 0,
    config: DemandModelConfig | None = None,
) -> BundleInfo:
    """The bundle of an accepted update: ``result.train_frame`` through ``pricing.training.train_bundle``.

    It continues ``current_bundle`` when the continued candidate won and starts afresh otherwise; rows without
    an importance weight (the snapshot's) count once, as in the guarded update. ``config`` is a
    ``DemandModelConfig`` (``None``: the tier's default). Returns the ``BundleInfo``.
    """
    from pricing.training import train_bundle  # the pricing package owns bundle layout and ONNX export

    frame = result.train_frame
    weight = frame["weight"].fillna(1.0) if "weight" in frame.columns else pd.Series(1.0, index=frame.index)
    init = current_bundle if result.chosen == "continued" else None
    return train_bundle(frame.assign(weight=weight), out_dir, tier=tier, seed=seed, init_model=init, config=config)


def _native(
    kind: CandidateKind,
    frame: pd.DataFrame,
    members: Sequence[lgb.Booster],
    cols: Sequence[str],
    cfg: GuardConfig,
    seed: int,
) -> list[lgb.Booster]:
    x, y, w = xyw(frame, cols, cfg)
    if kind == "continued":
        return [_fit(cfg, x, y, w, seed + i, cfg.continued_rounds, init=m) for i, m in enumerate(members)]
    return [_fit(cfg, x, y, w, seed + i, cfg.retrain_rounds) for i in range(len(members))]


def _external(
    trainer: Trainer, kind: CandidateKind, frame: pd.DataFrame, cols: Sequence[str]
) -> tuple[list[lgb.Booster], Path | None]:
    out = trainer(frame, kind)
    if isinstance(out, str | Path):
        fitted, bundle_cols = _resolve(out, None)
        if tuple(bundle_cols) != tuple(cols):
            msg = f"trainer's {kind!r} bundle has columns {list(bundle_cols)}, expected {list(cols)}"
            raise TrainingError(msg)
        return fitted, Path(out)
    return list(out), None


def _resolve(current: Current, columns: Sequence[str] | None) -> tuple[list[lgb.Booster], tuple[str, ...]]:
    if isinstance(current, str | Path):
        meta_path = Path(current) / "meta.json"
        if not meta_path.exists():
            msg = f"field 'current': got {str(current)!r}, expected a booster or a bundle dir with meta.json"
            raise TrainingError(msg)
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        members = [lgb.Booster(model_file=str(Path(current) / name)) for name in meta["boosters"]]
        return members, tuple(columns or meta["columns"])
    members = [current] if isinstance(current, lgb.Booster) else list(current)
    if not members:
        msg = "field 'current': got no boosters, expected at least one"
        raise TrainingError(msg)
    return members, tuple(columns or members[0].feature_name())


def _fit(
    cfg: GuardConfig,
    x: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    seed: int,
    rounds: int,
    init: lgb.Booster | None = None,
) -> lgb.Booster:
    params = {
        "objective": "binary",
        "num_leaves": cfg.num_leaves,
        "learning_rate": cfg.learning_rate,
        "min_data_in_leaf": cfg.min_data_in_leaf,
        "seed": seed,
        "deterministic": True,
        "num_threads": 1,
        "verbose": -1,
    }
    data = lgb.Dataset(x, label=y, weight=w, params={"verbose": -1})
    return lgb.train(params, data, num_boost_round=rounds, init_model=init, keep_training_booster=False)
