"""Stage three of cold start: the pooled bundles continued on a new hotel's own labels (:func:`refit_bundles`).

Split from :mod:`pricing.cold_start`, which re-exports :func:`refit_bundles`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from pricing.cold_start_stages import ColdStartConfig
from pricing.errors import TrainingError
from pricing.models import DemandModelConfig
from pricing.training import META_FILE, read_meta, train_bundle
from pricing.vectorize import HEAVY_COLUMNS, LIGHT_COLUMNS, input_columns


def refit_bundles(
    pooled: Sequence[str | Path],
    own: pd.DataFrame,
    out_dir: str | Path,
    *,
    config: ColdStartConfig,
    pooled_frame: pd.DataFrame | None = None,
    seed: int = 0,
) -> list[Path]:
    """Stage three: each pooled bundle continued on the hotel's own labels; one new bundle per tier.

    Args:
        pooled: bundle directories of the pooled models (light and/or heavy).
        own: the hotel's label rows (:func:`label_row`): its features, ``price``, ``base_rate``, ``booked``;
            an input column it lacks is missing (NaN), as a feature the stream did not have.
        out_dir: ``<out_dir>/<tier>`` is written per bundle.
        config: ``own_weight``, ``pooled_rows``, ``refit_trees``.
        pooled_frame: rows the pooled models were trained on; ``pooled_rows`` of them are kept (weight 1).
        seed: seeds the pooled sample and the boosters.

    Raises:
        TrainingError: if ``own`` has no ``booked``, ``price`` or ``base_rate`` column, or too few rows.
        BundleError: if a pooled bundle is unreadable.
    """
    rows = _refit_rows(own, config=config, pooled_frame=pooled_frame, seed=seed)
    out = []
    for bundle in pooled:
        tier = read_meta(bundle)["tier"]
        columns = LIGHT_COLUMNS if tier == "light" else HEAVY_COLUMNS
        frame = rows[[*dict.fromkeys((*input_columns(columns), "booked", "weight"))]]
        info = train_bundle(frame, Path(out_dir) / tier, tier=tier, seed=seed, init_model=bundle,
                            config=DemandModelConfig(num_trees=config.refit_trees))
        if not config.refit_price_response:
            _keep_response(Path(bundle), info.path)
        out.append(info.path)
    return out


def _refit_rows(
    own: pd.DataFrame, *, config: ColdStartConfig, pooled_frame: pd.DataFrame | None, seed: int
) -> pd.DataFrame:
    """The hotel's rows weighted ``own_weight``, then a seeded sample of ``pooled_rows`` pooled rows (weight 1),
    on every input column of either tier.

    Raises:
        TrainingError: if ``own`` has no ``booked``, ``price`` or ``base_rate`` column.
    """
    missing = [c for c in ("booked", "price", "base_rate") if c not in own.columns]
    if missing:
        raise TrainingError(field="own.columns", value=missing, expected="booked, price and base_rate")
    keep = [*dict.fromkeys((*input_columns(HEAVY_COLUMNS), *input_columns(LIGHT_COLUMNS), "booked", "weight"))]
    parts = [_numeric(own.assign(weight=config.own_weight * _weights(own)), keep)]
    if pooled_frame is not None and config.pooled_rows and len(pooled_frame):
        sample = pooled_frame.sample(n=min(config.pooled_rows, len(pooled_frame)), random_state=seed)
        parts.append(_numeric(sample.assign(weight=_weights(sample)), keep))
    return pd.concat(parts, ignore_index=True)


def _keep_response(pooled: Path, refit: Path) -> None:
    """Write the pooled bundle's price response into the refitted bundle's meta (only the trees are refitted)."""
    meta = read_meta(refit)
    meta["price_response"] = read_meta(pooled).get("price_response")
    (refit / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True), encoding="utf-8")


def _numeric(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """``columns`` of ``frame`` as float64 (a column it lacks, or a ``None``, is NaN: a missing feature)."""
    return frame.reindex(columns=list(columns)).apply(pd.to_numeric, errors="coerce").astype(np.float64)


def _weights(frame: pd.DataFrame) -> pd.Series:
    return frame["weight"] if "weight" in frame.columns else pd.Series(1.0, index=frame.index)


