"""The cancellation forecast: the probability that a booking cancels, learned from the stream's own events.

A booking event (``booking_id``, lead time, nights, rooms, channel, segment, price, the stay's month
and weekday) is labelled cancelled when a cancellation event names its ``booking_id``. A LightGBM
classifier is trained on those rows and exported to ONNX, the same path as the light tier, and
scored through onnxruntime. The bid price and overbooking (:mod:`pricing.overbooking`) take its
probability where they took a per-segment constant.

Honest evaluation is time-ordered: train on the bookings of the arrivals before a cut, test on those after
(:func:`split_by_time`, by arrival date), and report AUC and calibration by decile (expected against observed
cancellations).

Example:
    >>> rows = booking_frame([])
    >>> list(rows.columns)[:4]
    ['booking_id', 'booked_at', 'arrival', 'lead_days']
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import lightgbm as lgb
import numpy as np
import pandas as pd
from numpy.typing import NDArray

from events.models import CHANNELS, BookingEvent, CancellationEvent, Record
from pricing.errors import TrainingError
from pricing.onnx_runtime import OnnxDemandModel, to_onnx

COLUMNS: tuple[str, ...] = ("lead_days", "nights", "rooms", "channel_code", "segment_code", "log_price",
                            "stay_month", "stay_dow")
"""The model's inputs, in order: what a booking event carries."""
MODEL_FILE, META_FILE = "cancellations.onnx", "meta.json"
_MIN_ROWS = 200  # below this a tree model learns the noise: refuse with the count
_PARAMS = {"objective": "binary", "learning_rate": 0.05, "num_leaves": 7, "min_data_in_leaf": 60, "lambda_l2": 5.0,
           "feature_fraction": 0.9, "bagging_fraction": 0.9, "bagging_freq": 1, "verbose": -1, "num_threads": 1}


def booking_frame(events: Iterable[Record], *, segments: dict[str, int] | None = None,
                  closed_by: date | None = None) -> pd.DataFrame:
    """One row per booking whose outcome is known, with its inputs and ``cancelled``.

    A booking is cancelled when a cancellation event names its id. Its outcome is known once its stay
    night has passed: a booking for a night after ``closed_by`` (by default the date of the newest
    event) may still cancel, and counting it as kept would bias the forecast low, so it is left out.
    ``segments`` (segment -> code) is extended in place with the segments met.
    """
    bookings: list[BookingEvent] = []
    cancelled: set[str] = set()
    newest: date | None = None
    for event in events:
        newest = event.event_time.date() if newest is None else max(newest, event.event_time.date())
        if isinstance(event, BookingEvent):
            bookings.append(event)
        elif isinstance(event, CancellationEvent):
            cancelled.add(str(event.booking_id))
    cut = closed_by or newest
    codes = segments if segments is not None else {}
    rows = [_row(b, codes, cancelled) for b in bookings if cut is not None and b.stay_date < cut]
    columns = ["booking_id", "booked_at", "arrival", *COLUMNS, "cancelled"]
    return pd.DataFrame(rows, columns=columns)


def _row(b: BookingEvent, segments: dict[str, int], cancelled: set[str]) -> list[Any]:
    segment = segments.setdefault(b.segment, len(segments))
    lead = (b.stay_date - b.event_time.date()).days
    return [str(b.booking_id), b.event_time, b.stay_date, float(lead), float(b.nights), float(b.rooms),
            float(CHANNELS.index(b.channel)), float(segment), math.log(max(b.price_paid, 1.0)),
            float(b.stay_date.month), float(b.stay_date.weekday()), int(str(b.booking_id) in cancelled)]


def split_by_time(frame: pd.DataFrame, *, test_share: float = 0.3) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The bookings of the earliest arrivals (train) and of the latest ``test_share`` (test).

    By arrival, as a hotel would (train on last year's stays, test on this year's): every booking of a
    held-out arrival, whatever its lead time, is out of training, and none is censored.
    """
    ordered = frame.sort_values(["arrival", "booked_at"], kind="stable")
    cut = int(len(ordered) * (1.0 - test_share))
    return ordered.iloc[:cut], ordered.iloc[cut:]


@dataclass(frozen=True)
class CancellationModel:
    """A trained forecast: ONNX bytes, the segment codes it was trained with, and its held-out figures."""

    onnx_bytes: bytes
    segments: dict[str, int]
    meta: dict[str, Any]

    @functools.cached_property
    def _session(self) -> OnnxDemandModel:
        return OnnxDemandModel(self.onnx_bytes)  # one onnxruntime session per model, not one per call

    def predict(self, frame: pd.DataFrame) -> NDArray[np.float32]:
        """Cancellation probability of each row of ``frame`` (its :data:`COLUMNS`)."""
        x = frame[list(COLUMNS)].to_numpy(dtype=np.float32)
        return self._session.predict(x)[:, 0]

    def save(self, directory: Path) -> Path:
        """Write the model and its meta (segments, figures) to ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        (directory / MODEL_FILE).write_bytes(self.onnx_bytes)
        (directory / META_FILE).write_text(json.dumps({**self.meta, "segments": self.segments}, indent=2))
        return directory

    @classmethod
    def load(cls, directory: Path) -> CancellationModel:
        """The model saved in ``directory``."""
        meta = json.loads((directory / META_FILE).read_text())
        return cls((directory / MODEL_FILE).read_bytes(), dict(meta.pop("segments")), meta)


def train(frame: pd.DataFrame, *, segments: dict[str, int], rounds: int = 120, seed: int = 0) -> CancellationModel:
    """A LightGBM classifier of ``cancelled`` on :data:`COLUMNS`, exported to ONNX.

    Raises:
        TrainingError: too few rows, or only one outcome among them.
    """
    if len(frame) < _MIN_ROWS:
        raise TrainingError(field="bookings", value=len(frame), expected=f"at least {_MIN_ROWS} bookings")
    labels = frame["cancelled"].to_numpy()
    if labels.min() == labels.max():
        raise TrainingError(field="cancelled", value=int(labels[0]), expected="both cancelled and kept bookings")
    x = frame[list(COLUMNS)].to_numpy(dtype=np.float64)
    data = lgb.Dataset(x, label=labels, feature_name=list(COLUMNS), free_raw_data=False)
    booster = lgb.train({**_PARAMS, "seed": seed}, data, num_boost_round=rounds)
    onnx_model = to_onnx([booster], n_features=len(COLUMNS))
    meta = {"columns": list(COLUMNS), "rows": len(frame), "cancel_rate": float(labels.mean()), "rounds": rounds}
    return CancellationModel(onnx_model.SerializeToString(), dict(segments), meta)


@dataclass(frozen=True)
class Evaluation:
    """Held-out quality: ranking (AUC) and calibration (expected and observed cancellations per decile)."""

    auc: float
    deciles: list[tuple[float, float, int]]
    """(expected, observed, bookings) per decile of the forecast, lowest first."""

    @property
    def worst_decile_gap(self) -> float:
        """The largest relative gap between expected and observed cancellations over the deciles."""
        gaps = [abs(e - o) / o for e, o, _ in self.deciles if o > 0]
        return max(gaps) if gaps else float("nan")


def evaluate(model: CancellationModel, frame: pd.DataFrame) -> Evaluation:
    """AUC and decile calibration of ``model`` on ``frame`` (held out)."""
    probs = model.predict(frame).astype(np.float64)
    labels = frame["cancelled"].to_numpy()
    order = np.argsort(probs, kind="stable")
    deciles = [(float(probs[idx].sum()), float(labels[idx].sum()), len(idx)) for idx in np.array_split(order, 10)]
    return Evaluation(auc(labels, probs), deciles)


def auc(labels: NDArray[Any], scores: NDArray[Any]) -> float:
    """Area under the ROC curve: the chance a cancelled booking scores above a kept one (Mann-Whitney, ties half).

    Example:
        >>> auc(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8]))
        0.75
    """
    from scipy.stats import rankdata

    positives = labels == 1
    n1, n0 = int(positives.sum()), int((~positives).sum())
    if n1 == 0 or n0 == 0:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[positives].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))
