"""Online demand model: a river learner that updates on every labelled example.

The model standardises the features and feeds a river classifier (logistic
regression by default, or an adaptive random forest). Before learning from an
example it scores it, and feeds that prequential Brier loss ``(p - y)^2``
(bounded in ``[0, 1]``, as ADWIN's bound assumes) to :class:`river.drift.ADWIN`.
When ADWIN cuts its window *and* the recent loss is higher than before, the
model flags drift; with ``on_drift="reset"`` it starts a fresh learner and warms
it on the recent examples that ADWIN kept (the ones after the change).

Weights: logistic regression takes them as gradient weights; the forest, which
has no weight argument, sees an example ``floor(w)`` times plus once more with
probability ``w - floor(w)`` (unbiased in expectation, seeded).

Example:
    >>> model = OnlineDemandModel()
    >>> for i in range(400):
    ...     x = {"price": (i % 20) / 10 - 1.0}
    ...     model.learn_one(x, int(x["price"] < 0))
    >>> model.predict_proba_one({"price": -0.9}) > 0.8 > 0.2 > model.predict_proba_one({"price": 0.9})
    True
"""

from __future__ import annotations

import math
import os
import pickle
import random
import tempfile
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from river import drift, forest, linear_model, optim, preprocessing

from feedback.errors import FeedbackError, require


class OnlineModelConfig(BaseModel):
    """Settings of :class:`OnlineDemandModel`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["logistic", "arf"] = "logistic"
    learning_rate: float = Field(default=0.05, gt=0.0)
    l2: float = Field(default=0.0, ge=0.0)
    n_models: int = Field(default=10, ge=1, description="trees in the forest (kind='arf')")
    drift_delta: float = Field(default=0.002, gt=0.0, lt=1.0, description="ADWIN confidence")
    on_drift: Literal["reset", "flag"] = "reset"
    replay: int = Field(default=500, ge=0, description="recent examples kept to warm a reset learner")
    seed: int = 0


def _clean(x: Mapping[str, Any]) -> dict[str, float]:
    """Drop missing and non-finite values: river treats an absent key as 'no information'."""
    out: dict[str, float] = {}
    for k, v in x.items():
        if v is None or isinstance(v, bool):
            continue
        f = float(v)
        if math.isfinite(f):
            out[k] = f
    return out


class OnlineDemandModel:
    """Booking probability learned one example at a time, with drift detection.

    Args:
        config: model and drift settings.
    """

    def __init__(self, config: OnlineModelConfig | None = None) -> None:
        self.config = config or OnlineModelConfig()
        self._rng = random.Random(self.config.seed)
        self._scaler, self._clf = self._fresh()
        self._adwin = drift.ADWIN(delta=self.config.drift_delta)
        self._recent: deque[tuple[dict[str, float], int, float]] = deque(maxlen=self.config.replay or None)
        self._drift = False
        self._n_drifts = 0
        self._n_seen = 0

    # ------------------------------------------------------------------ state
    @property
    def drift_detected(self) -> bool:
        """Whether the last :meth:`learn_one` detected a rise in loss."""
        return self._drift

    @property
    def n_drifts(self) -> int:
        """Drifts detected so far."""
        return self._n_drifts

    @property
    def n_seen(self) -> int:
        """Examples learned so far."""
        return self._n_seen

    @property
    def recent_loss(self) -> float:
        """Mean prequential Brier loss over ADWIN's current window."""
        return float(self._adwin.estimation)

    # ------------------------------------------------------------------ verbs
    def predict_proba_one(self, x: Mapping[str, Any]) -> float:
        """Probability of a booking (0.5 before any learning)."""
        xs = self._scaler.transform_one(_clean(x))
        proba = self._clf.predict_proba_one(xs)
        if not proba:
            return 0.5
        return float(proba.get(True, 0.0))

    def predict_one(self, x: Mapping[str, Any]) -> int:
        """1 if a booking is more likely than not."""
        return int(self.predict_proba_one(x) >= 0.5)

    def learn_one(self, x: Mapping[str, Any], y: int | bool, *, weight: float = 1.0) -> None:
        """Score, watch the loss for drift, then learn from one example."""
        require(weight >= 0.0 and math.isfinite(weight), "weight", weight, "a finite non-negative number")
        xc, yi = _clean(x), int(bool(y))
        p = self.predict_proba_one(xc)
        before = float(self._adwin.estimation)
        self._adwin.update((p - yi) ** 2)
        self._drift = bool(self._adwin.drift_detected) and float(self._adwin.estimation) > before
        if self._drift:
            self._n_drifts += 1
            if self.config.on_drift == "reset":
                self._reset()
        self._fit(xc, yi, weight)
        self._recent.append((xc, yi, weight))
        self._n_seen += 1

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Pickle the whole model (learner, scaler, detector, RNG) atomically to ``path``."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(self, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, target)
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> OnlineDemandModel:
        """Load a model written by :meth:`save` (pickle: only load files you wrote).

        Raises:
            FeedbackError: if the file does not hold an :class:`OnlineDemandModel`.
        """
        with open(path, "rb") as fh:
            model = pickle.load(fh)  # noqa: S301 - our own checkpoints only
        if not isinstance(model, cls):
            msg = f"file {str(path)!r}: got a {type(model).__name__}, expected an {cls.__name__}"
            raise FeedbackError(msg)
        return model

    # ------------------------------------------------------------------ internals
    def _fresh(self) -> tuple[preprocessing.StandardScaler, Any]:
        cfg = self.config
        if cfg.kind == "arf":
            return preprocessing.StandardScaler(), forest.ARFClassifier(n_models=cfg.n_models, seed=cfg.seed)
        clf = linear_model.LogisticRegression(optimizer=optim.SGD(cfg.learning_rate), l2=cfg.l2)
        return preprocessing.StandardScaler(), clf

    def _fit(self, xc: dict[str, float], y: int, weight: float) -> None:
        self._scaler.learn_one(xc)
        xs = self._scaler.transform_one(xc)
        if self.config.kind == "logistic":
            self._clf.learn_one(xs, bool(y), w=weight)
            return
        repeats = int(weight) + (self._rng.random() < weight - int(weight))
        for _ in range(repeats):
            self._clf.learn_one(xs, bool(y))

    def _reset(self) -> None:
        """Fresh learner warmed on the examples ADWIN kept after the change."""
        self._scaler, self._clf = self._fresh()
        keep = min(len(self._recent), int(self._adwin.width))
        for xc, y, w in list(self._recent)[len(self._recent) - keep :]:
            self._fit(xc, y, w)
