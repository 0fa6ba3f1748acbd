"""The frames of a guarded update: the rows held out, the rows trained on, and their weights.

:func:`split` takes the holdout that :func:`feedback.continued.guarded_update` judges its
candidates on (by default the newest new labels, never a row the live model was fitted on),
:func:`recency` decays the training rows' weights by age, and :func:`xyw` turns a frame into the
matrix, labels and weights a booster reads (the relative price columns derived as serving does).

Example:
    >>> import pandas as pd
    >>> from feedback.continued import GuardConfig
    >>> t = pd.date_range("2026-01-01", periods=4, freq="D", tz="UTC")
    >>> frame = pd.DataFrame({"event_time": t, "weight": [1.0, 1.0, 1.0, 1.0]})
    >>> new, snap = recency(frame, frame.iloc[:0], GuardConfig(recency_half_life_days=1.0))
    >>> new["weight"].tolist()
    [0.125, 0.25, 0.5, 1.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from feedback.errors import TrainingError
from pricing.vectorize import frame_matrix

if TYPE_CHECKING:  # the guard's knobs: read here, defined (and imported at run time) in feedback.continued
    from feedback.continued import GuardConfig


def float_gaps(frame: pd.DataFrame) -> pd.DataFrame:
    """All-missing object columns (features no decision had) as float: concatenation keeps them numeric."""
    gaps = {c: "float64" for c in frame.columns if frame[c].dtype == object and frame[c].isna().all()}
    return frame.astype(gaps) if gaps else frame


def check_columns(name: str, frame: pd.DataFrame, needed: Sequence[str]) -> None:
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        msg = f"{name}: missing columns {missing}; got {sorted(map(str, frame.columns))[:20]}"
        raise TrainingError(msg)


def split(
    new: pd.DataFrame, snap: pd.DataFrame, fraction: float, cfg: GuardConfig
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(new rows to train on, snapshot rows to train on, newest rows held out)."""
    t = cfg.time_column
    snap = snap.sort_values(t, kind="stable").reset_index(drop=True)
    new = new.sort_values(t, kind="stable").reset_index(drop=True)
    if cfg.holdout_from == "new":
        new = unseen(new, snap)
        n_val = max(int(round(len(new) * fraction)), min(cfg.min_validation_rows, len(new) // 2))
        val, snap_train, new_train = new.iloc[len(new) - n_val :], snap, new.iloc[: len(new) - n_val]
    elif cfg.holdout_from == "snapshot":
        n_val = int(round(len(snap) * fraction))
        val, snap_train, new_train = snap.iloc[len(snap) - n_val :], snap.iloc[: len(snap) - n_val], new
    else:
        both = pd.concat([snap.assign(_src=0), new.assign(_src=1)], ignore_index=True)
        both = both.sort_values(t, kind="stable").reset_index(drop=True)
        n_val = int(round(len(both) * fraction))
        train, val = both.iloc[: len(both) - n_val], both.iloc[len(both) - n_val :]
        snap_train = train[train["_src"] == 0].drop(columns="_src")
        new_train = train[train["_src"] == 1].drop(columns="_src")
        val = val.drop(columns="_src")
    if len(val) < cfg.min_validation_rows:
        msg = (f"field 'validation_fraction': {fraction} of the {cfg.holdout_from!r} rows leaves {len(val)} rows, "
               f"expected >= {cfg.min_validation_rows}")
        raise TrainingError(msg)
    return new_train, snap_train, val


def unseen(new: pd.DataFrame, snap: pd.DataFrame) -> pd.DataFrame:
    """New rows without the decisions the snapshot already holds (the live model trained on those)."""
    if "decision_id" not in new.columns or "decision_id" not in snap.columns:
        return new
    seen = set(snap["decision_id"].dropna().astype(str))
    return new[~new["decision_id"].astype(str).isin(seen)].reset_index(drop=True)


def recency(
    new: pd.DataFrame, snap: pd.DataFrame, cfg: GuardConfig
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Training rows with their weights decayed by age (half-life ``recency_half_life_days``)."""
    if cfg.recency_half_life_days is None:
        return new, snap
    frames = [f for f in (new, snap) if len(f)]
    if not frames:
        return new, snap
    newest = max(pd.to_datetime(f[cfg.time_column], utc=True).max() for f in frames)
    half_life = pd.Timedelta(days=cfg.recency_half_life_days)

    def decayed(frame: pd.DataFrame) -> pd.DataFrame:
        if not len(frame):
            return frame
        age = (newest - pd.to_datetime(frame[cfg.time_column], utc=True)) / half_life
        base = frame[cfg.weight_column].fillna(1.0) if cfg.weight_column in frame.columns else 1.0
        return frame.assign(**{cfg.weight_column: base * np.power(0.5, age.to_numpy(dtype=float))})

    return decayed(new), decayed(snap)


def xyw(frame: pd.DataFrame, cols: Sequence[str], cfg: GuardConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = frame_matrix(frame, cols)  # derives the relative price columns as serving does
    y = frame[cfg.label_column].to_numpy(dtype=np.float64)
    if cfg.weight_column in frame.columns:
        w = frame[cfg.weight_column].fillna(1.0).to_numpy(dtype=np.float64)
    else:
        w = np.ones(len(frame))
    return x, y, w
