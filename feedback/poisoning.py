"""Poisoning guard: quarantine label batches that contradict both the model and history.

A batch is quarantined (written with a report to the quarantine directory, and
not trained on) only when two independent signals agree:

1. **loss**: its mean log-loss under the current model is far above the
   distribution of past accepted batches (z-score > ``k_loss``). Before
   ``min_history`` batches exist, the reference is the model's own calibration
   (the expected log-loss ``E[H(p)]`` and its variance if labels followed ``p``);
2. **label rate**: in some segment (``segment_column``, e.g. the hotel) the
   label rate is far from that segment's accepted history (binomial z-score >
   ``k_rate``), falling back to the global history and then to the model's mean
   probability when the segment is new.

3. **feature shift** (alone enough): some numeric column's weighted mean moved more than
   ``max_feature_shift`` reference standard deviations from the accepted history (or, before
   any history, from a reference frame such as the training snapshot, :meth:`PoisonGuard.seed_features`),
   *and* from the previous batch's. Injected rows come as a batch unlike the one before it; a
   market (or a live feature stream unlike the snapshot's) that moved stays moved, and the second
   batch that looks like the first is drift: judged by the label signals, and learnt into the
   history when accepted. Without that, a trainer whose snapshot's features differ from the live
   stream's quarantines every batch, and never learns (seen in ``bench/loop.py``: 7 sds on
   ``searches_1h`` between the simulator's training frame and the stream's features).
   A standardised mean difference, not a z-score, so the bound does not tighten with batch size:
   an honest day moves a feature's mean by a fraction of its spread; injected rows from
   another distribution move it by several.

4. **price response** (alone enough): above the batch's median price, labels book more than the
   current model expects, by more than ``min_price_gap`` log-odds beyond the rows below it, at a
   z-score above ``k_price``. Labels that reward higher prices teach a model
   to raise them: the attack a label-rate or loss check can miss (the rate stays plausible when
   the bookings are only moved from cheap offers to dear ones). An honest change of demand moves
   the residuals of both halves the same way; it does not turn the price response around.

Requiring both label signals keeps an honest regime change (labels move, the model was
already wrong the same way before; or the model degrades while labels look
normal) from being thrown away, while a label-flipped batch trips both. Rows
carry importance weights (``weight`` column) when they come from an active
sampler; rates and losses are weighted, with Kish's effective sample size.

Example:
    >>> import numpy as np, pandas as pd, tempfile
    >>> rng = np.random.default_rng(0)
    >>> guard = PoisonGuard(quarantine_dir=tempfile.mkdtemp())
    >>> p = rng.uniform(0.05, 0.3, 400)
    >>> clean = pd.DataFrame({"hotel_id": "h1", "booked": (rng.random(400) < p).astype(int)})
    >>> guard.check(clean, p).accepted
    True
    >>> verdict = guard.check(clean.assign(booked=1 - clean["booked"]), p)
    >>> verdict.accepted, verdict.quarantine_path is not None
    (False, True)
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from pydantic import BaseModel, ConfigDict, Field

from feedback.errors import FeedbackError

_EPS = 1e-6  # probability clip: one confident miss costs ~14 nats, not infinity
_RATE_CLIP = 0.01  # keeps the binomial std of a reference rate of 0 or 1 from vanishing


class PoisonConfig(BaseModel):
    """Thresholds of :class:`PoisonGuard`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    k_loss: float = Field(default=4.0, gt=0.0)
    k_rate: float = Field(default=4.0, gt=0.0)
    history: int = Field(default=50, ge=2, description="accepted batches kept for the loss distribution")
    min_history: int = Field(default=5, ge=2)
    min_segment_rows: float = Field(default=20.0, gt=0.0, description="effective rows for a segment to count")
    loss_std_floor: float = Field(default=0.02, gt=0.0, description="lowest std of the historical batch loss")
    label_column: str = "booked"
    segment_column: str | None = "hotel_id"
    weight_column: str = "weight"
    max_feature_shift: float = Field(default=2.0, gt=0.0, description="bound on a feature's mean shift, in sds")
    min_feature_rows: float = Field(default=100.0, gt=0.0, description="reference rows before the shift counts")
    ignore_columns: tuple[str, ...] = ("event_time", "decision_id", "stay_date")
    price_column: str = "price"
    k_price: float = Field(default=4.0, gt=0.0, description="z-score of the price-response gap that quarantines")
    min_price_gap: float = Field(default=1.0, gt=0.0, description="material price-response gap, in log-odds")


@dataclass(frozen=True)
class Verdict:
    """What the guard decided about one batch, and why."""

    accepted: bool
    reason: str
    stats: dict[str, Any] = field(default_factory=dict)
    quarantine_path: Path | None = None


class PoisonGuard:
    """Checks label batches before they reach the trainers.

    Args:
        config: thresholds.
        quarantine_dir: where quarantined batches and their reports go.
    """

    def __init__(self, config: PoisonConfig | None = None, *, quarantine_dir: str | os.PathLike[str]) -> None:
        self.config = config or PoisonConfig()
        self.quarantine_dir = Path(quarantine_dir)
        self._losses: deque[float] = deque(maxlen=self.config.history)
        self._segments: dict[str, list[float]] = {}  # segment -> [weighted positives, weighted rows]
        self._n_accepted = 0
        self._n_quarantined = 0
        self._features: dict[str, list[float]] = {}  # column -> [weight sum, weighted mean, weighted M2]
        self._previous: dict[str, float] = {}  # column -> weighted mean of the last batch checked

    @property
    def n_accepted(self) -> int:
        return self._n_accepted

    @property
    def n_quarantined(self) -> int:
        return self._n_quarantined

    def state_dict(self) -> dict[str, Any]:
        """History as JSON-ready data (for checkpoints across restarts)."""
        return {
            "losses": list(self._losses),
            "segments": {k: list(v) for k, v in self._segments.items()},
            "n_accepted": self._n_accepted,
            "n_quarantined": self._n_quarantined,
            "features": {k: list(v) for k, v in self._feature_refs().items()},
            "previous": dict(getattr(self, "_previous", {})),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` snapshot (the loss window keeps the newest ``history`` batches)."""
        self._losses = deque((float(v) for v in state["losses"]), maxlen=self.config.history)
        self._segments = {str(k): [float(v[0]), float(v[1])] for k, v in state["segments"].items()}
        self._n_accepted = int(state["n_accepted"])
        self._n_quarantined = int(state["n_quarantined"])
        self._features = {str(k): [float(x) for x in v] for k, v in state.get("features", {}).items()}
        self._previous = {str(k): float(v) for k, v in state.get("previous", {}).items()}

    def _feature_refs(self) -> dict[str, list[float]]:
        if not hasattr(self, "_features"):  # a guard pickled before the feature signal existed
            self._features = {}
        return self._features

    def seed_features(self, reference: pd.DataFrame) -> bool:
        """Use ``reference`` (e.g. the training snapshot) as the feature history while none exists; True if used."""
        if self._feature_refs():
            return False
        self._learn_features(reference, np.ones(len(reference)))
        return True

    def check(self, batch: pd.DataFrame, current_model_probs: ArrayLike, *, batch_id: str | None = None) -> Verdict:
        """Accept the batch (and learn it into history) or quarantine it.

        Raises:
            FeedbackError: if the label column is missing or the probabilities do not match the rows.
        """
        y, p, w = self._arrays(batch, current_model_probs)
        loss_z, loss_stats = self._loss_z(y, p, w)
        rate_z, rate_stats = self._rate_z(batch, y, p, w)
        previous, self._previous = getattr(self, "_previous", {}), self._means(batch, w)
        shift, shift_column = self._feature_shift(batch, w)
        if shift > self.config.max_feature_shift and previous:
            shift, shift_column = min((shift, shift_column), self._feature_shift(batch, w, means=previous))
        stats: dict[str, Any] = {"n_rows": len(y), "loss_z": loss_z, "rate_z": rate_z, **loss_stats, **rate_stats,
                                 "feature_shift": shift, "feature_shift_column": shift_column}
        cfg = self.config
        if shift > cfg.max_feature_shift:
            reason = (f"quarantined: feature {shift_column!r} mean moved {shift:.1f} reference sds, "
                      f"expected at most {cfg.max_feature_shift}")
            return self._reject(batch, reason, stats, batch_id)
        if loss_z > cfg.k_loss and rate_z > cfg.k_rate:
            reason = (
                f"quarantined: batch log-loss z={loss_z:.1f} > {cfg.k_loss} and label rate z={rate_z:.1f} > "
                f"{cfg.k_rate} in segment {stats['worst_segment']!r}"
            )
            return self._reject(batch, reason, stats, batch_id)
        price_z, price_gap = self._price_gap(batch, y, p, w)
        stats.update(price_z=price_z, price_gap=price_gap)
        if price_z > cfg.k_price and price_gap > cfg.min_price_gap:
            reason = (f"quarantined: labels reward higher prices: above the median price the labels book "
                      f"{price_gap:+.2f} log-odds more than the model expects, against below it "
                      f"(z={price_z:.1f} > {cfg.k_price})")
            return self._reject(batch, reason, stats, batch_id)
        self._learn(batch, y, w, stats["logloss"])
        self._learn_features(batch, w)
        reason = "accepted"
        if loss_z > cfg.k_loss or rate_z > cfg.k_rate:
            reason = f"accepted: only one signal is unusual (loss z={loss_z:.1f}, rate z={rate_z:.1f})"
        return Verdict(True, reason, stats)

    def _reject(self, batch: pd.DataFrame, reason: str, stats: dict[str, Any], batch_id: str | None) -> Verdict:
        """Quarantine the batch (it is not learnt into history) and count it."""
        self._n_quarantined += 1
        return Verdict(False, reason, stats, self._quarantine(batch, reason, stats, batch_id))

    # ------------------------------------------------------------------ signals
    def _arrays(self, batch: pd.DataFrame, probs: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        cfg = self.config
        if cfg.label_column not in batch.columns:
            msg = f"batch: missing label column {cfg.label_column!r}; got {sorted(map(str, batch.columns))}"
            raise FeedbackError(msg)
        p = np.clip(np.asarray(probs, dtype=float).reshape(-1), _EPS, 1 - _EPS)
        if len(p) != len(batch) or len(p) == 0:
            msg = f"field 'current_model_probs': got {len(p)} values, expected one per row ({len(batch)}), at least 1"
            raise FeedbackError(msg)
        y = batch[cfg.label_column].to_numpy(dtype=float)
        w = batch[cfg.weight_column].to_numpy(dtype=float) if cfg.weight_column in batch.columns else np.ones(len(y))
        return y, p, w

    def _loss_z(self, y: np.ndarray, p: np.ndarray, w: np.ndarray) -> tuple[float, dict[str, Any]]:
        losses = -(y * np.log(p) + (1 - y) * np.log(1 - p))
        ll = float(np.average(losses, weights=w))
        if len(self._losses) >= self.config.min_history:
            ref = np.asarray(self._losses)
            mean, std = float(ref.mean()), max(float(ref.std(ddof=1)), self.config.loss_std_floor)
            return (ll - mean) / std, {"logloss": ll, "loss_reference": mean, "loss_mode": "history"}
        # The model's own calibration: if y ~ Bernoulli(p), E[loss] = H(p), Var = p(1-p) * logit(p)^2.
        entropy = -(p * np.log(p) + (1 - p) * np.log(1 - p))
        var = p * (1 - p) * np.log(p / (1 - p)) ** 2
        wn = w / w.sum()
        expected, std = float(np.sum(wn * entropy)), math.sqrt(float(np.sum(wn**2 * var)))
        return (ll - expected) / max(std, 1e-9), {"logloss": ll, "loss_reference": expected, "loss_mode": "calibration"}

    def _rate_z(self, batch: pd.DataFrame, y: np.ndarray, p: np.ndarray, w: np.ndarray) -> tuple[float, dict[str, Any]]:
        seg = self._segment_keys(batch)
        total_pos = sum(v[0] for v in self._segments.values())
        total_n = sum(v[1] for v in self._segments.values())
        worst: tuple[float, str, float, float] = (-1.0, "", float("nan"), float("nan"))
        for key in np.unique(seg):
            mask = seg == key
            ws = w[mask]
            n_eff = ws.sum() ** 2 / float(np.sum(ws**2))
            if n_eff < self.config.min_segment_rows:
                continue
            rate = float(np.average(y[mask], weights=ws))
            hist = self._segments.get(str(key))
            if hist is not None and hist[1] >= self.config.min_segment_rows:
                ref = hist[0] / hist[1]
            elif total_n >= self.config.min_segment_rows:
                ref = total_pos / total_n
            else:
                ref = float(np.average(p[mask], weights=ws))
            ref = min(max(ref, _RATE_CLIP), 1 - _RATE_CLIP)
            z = abs(rate - ref) / math.sqrt(ref * (1 - ref) / n_eff)
            if z > worst[0]:
                worst = (z, str(key), rate, ref)
        return max(worst[0], 0.0), {"worst_segment": worst[1], "batch_rate": worst[2], "reference_rate": worst[3]}

    def _price_gap(self, batch: pd.DataFrame, y: np.ndarray, p: np.ndarray, w: np.ndarray) -> tuple[float, float]:
        """(z-score, size) of the price-response gap (0, 0 without prices): see the module docstring.

        Per half of the batch (above and below its median price), the log-odds of the observed booking
        rate minus that of the model's mean probability; the gap is the upper half's minus the lower's.
        On the log-odds scale a change of demand's level moves both halves alike, so only a change in
        the response to price shows.
        """
        col = self.config.price_column
        if col not in batch.columns:
            return 0.0, 0.0
        price = pd.to_numeric(batch[col], errors="coerce").to_numpy(dtype=float)
        ok = np.isfinite(price)
        if ok.sum() < 2 * self.config.min_segment_rows:
            return 0.0, 0.0
        high = ok & (price > np.median(price[ok]))
        halves = []
        for mask in (high, ok & ~high):
            ws = w[mask]
            if ws.sum() <= 0:
                return 0.0, 0.0
            n_eff = ws.sum() ** 2 / float(np.sum(ws**2))
            floor = 0.5 / n_eff  # a half-count keeps a rate of 0 or 1 finite on the log-odds scale
            rate = min(max(float(np.average(y[mask], weights=ws)), floor), 1.0 - floor)
            model = min(max(float(np.average(p[mask], weights=ws)), floor), 1.0 - floor)
            excess = math.log(rate / (1 - rate)) - math.log(model / (1 - model))
            halves.append((excess, 1.0 / (n_eff * rate * (1 - rate))))
        gap = halves[0][0] - halves[1][0]
        return gap / math.sqrt(halves[0][1] + halves[1][1]), gap

    def _segment_keys(self, batch: pd.DataFrame) -> np.ndarray:
        col = self.config.segment_column
        if col is None or col not in batch.columns:
            return np.full(len(batch), "all", dtype=object)
        return batch[col].astype(str).to_numpy(dtype=object)

    def _numeric(self, batch: pd.DataFrame) -> list[str]:
        cfg = self.config
        skip = {cfg.label_column, cfg.weight_column, cfg.segment_column, *cfg.ignore_columns}
        types = pd.api.types
        return [str(c) for c in batch.columns
                if c not in skip and types.is_numeric_dtype(batch[c]) and not types.is_bool_dtype(batch[c])]

    def _means(self, batch: pd.DataFrame, w: np.ndarray) -> dict[str, float]:
        """Weighted mean of each numeric column of the batch (its finite values)."""
        out = {}
        for name in self._numeric(batch):
            values = batch[name].to_numpy(dtype=float)
            ok = np.isfinite(values)
            if w[ok].sum() > 0:
                out[name] = float(np.average(values[ok], weights=w[ok]))
        return out

    def _feature_shift(self, batch: pd.DataFrame, w: np.ndarray,
                       means: dict[str, float] | None = None) -> tuple[float, str]:
        """Largest standardised mean difference of a numeric column against its reference (0 with none).

        ``means``: compare with these means (the previous batch's) instead, in reference standard deviations.
        """
        worst, column = 0.0, ""
        for name, (n, ref_mean, m2) in self._feature_refs().items():
            mean = ref_mean if means is None else means.get(name, ref_mean)
            if name not in batch.columns or n < self.config.min_feature_rows:
                continue
            values = batch[name].to_numpy(dtype=float)
            ok = np.isfinite(values)
            if w[ok].sum() <= 0:
                continue
            sd = math.sqrt(m2 / n) if m2 > 0 else 0.0
            sd = max(sd, 1e-6 * max(1.0, abs(ref_mean)))  # a constant reference column: any move is a shift
            shift = abs(float(np.average(values[ok], weights=w[ok])) - mean) / sd
            if shift > worst:
                worst, column = shift, name
        return worst, column

    def _learn_features(self, frame: pd.DataFrame, w: np.ndarray) -> None:
        """Merge the frame's weighted column moments into the reference (Chan et al.'s parallel update)."""
        refs = self._feature_refs()
        for name in self._numeric(frame):
            values = frame[name].to_numpy(dtype=float)
            ok = np.isfinite(values)
            wb = w[ok]
            if wb.sum() <= 0:
                continue
            nb = float(wb.sum())
            mb = float(np.average(values[ok], weights=wb))
            m2b = float(np.sum(wb * (values[ok] - mb) ** 2))
            n, mean, m2 = refs.get(name, [0.0, 0.0, 0.0])
            total = n + nb
            delta = mb - mean
            refs[name] = [total, mean + delta * nb / total, m2 + m2b + delta**2 * n * nb / total]

    # ------------------------------------------------------------------ outcomes
    def _learn(self, batch: pd.DataFrame, y: np.ndarray, w: np.ndarray, loss: float) -> None:
        self._n_accepted += 1
        self._losses.append(loss)
        seg = self._segment_keys(batch)
        for key in np.unique(seg):
            mask = seg == key
            acc = self._segments.setdefault(str(key), [0.0, 0.0])
            acc[0] += float(np.sum(w[mask] * y[mask]))
            acc[1] += float(np.sum(w[mask]))

    def _quarantine(self, batch: pd.DataFrame, reason: str, stats: dict[str, Any], batch_id: str | None) -> Path:
        if batch_id is None:
            digest = hashlib.sha256(pd.util.hash_pandas_object(batch, index=True).to_numpy().tobytes())
            batch_id = digest.hexdigest()[:16]
        out = self.quarantine_dir / batch_id
        out.mkdir(parents=True, exist_ok=True)
        batch.to_parquet(out / "batch.parquet", index=False)
        report = {
            "batch_id": batch_id,
            "reason": reason,
            "stats": stats,
            "config": self.config.model_dump(),
            "quarantined_at": datetime.now(tz=UTC).isoformat(),
        }
        (out / "report.json").write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
        return out
