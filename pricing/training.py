"""Train a demand model and write a self-describing bundle directory.

A bundle holds ``model.onnx`` (all members fused into one graph, output
``p_book`` of shape ``(n, members)``), the native boosters ``booster_<i>.txt``
(for continued training and parity checks), the same boosters compiled for this host
(``compiled.json``, ``compiled_<i>.o``: :mod:`pricing.compiled`, with ``compiled=True``)
and ``meta.json``: name, version, tier, columns, the sha256 of every ONNX file, tree count, train/holdout
metrics and a per-column envelope (1st/99th percentile) for off-distribution
checks. The version is derived from the ONNX bytes, so equal models get equal
versions and any change gets a new one.

Example:
    >>> import tempfile
    >>> import numpy as np, pandas as pd
    >>> from pricing.vectorize import LIGHT_COLUMNS
    >>> rng = np.random.default_rng(0)
    >>> frame = pd.DataFrame(rng.uniform(0, 1, size=(400, len(LIGHT_COLUMNS))), columns=list(LIGHT_COLUMNS))
    >>> frame["price"] = rng.uniform(50, 300, 400)
    >>> frame["booked"] = (rng.random(400) < 1 / (1 + np.exp((frame["price"] - 150) / 40))).astype(int)
    >>> out = tempfile.mkdtemp()
    >>> info = train_bundle(frame, out, tier="light", config=DemandModelConfig(num_trees=10))
    >>> info.tier, info.n_trees, sorted(p.name for p in info.path.iterdir())
    ('light', 10, ['booster_0.txt', 'meta.json', 'model.onnx'])
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import lightgbm as lgb
import numpy as np
import pandas as pd
from numpy.typing import NDArray

from pricing.channel_response import fit_channel_offsets
from pricing.compiled import export_compiled
from pricing.errors import BundleError, TrainingError
from pricing.models import (
    HEAVY_CONFIG,
    LIGHT_CONFIG,
    DemandModelConfig,
    binary_metrics,
    fit_members,
    predict_native,
    tree_count,
)
from pricing.onnx_runtime import to_onnx
from pricing.price_response import PriceResponse, fit_price_response
from pricing.vectorize import HEAVY_COLUMNS, LIGHT_COLUMNS, frame_matrix, input_columns, price_columns

TierName = Literal["light", "heavy"]
HOLDOUT_SHARE = 0.2
"""Share of rows held out (seeded) for the metrics written to meta.json; all rows then train the model."""
META_FILE = "meta.json"
ONNX_FILE = "model.onnx"


@dataclass(frozen=True, slots=True)
class BundleInfo:
    """What :func:`train_bundle` wrote."""

    path: Path
    name: str
    version: str
    tier: TierName
    columns: tuple[str, ...]
    n_trees: int
    onnx_sha256: dict[str, str]
    metrics: dict[str, float] = field(default_factory=dict)
    parent: str | None = None


def _columns(tier: TierName) -> tuple[str, ...]:
    return LIGHT_COLUMNS if tier == "light" else HEAVY_COLUMNS


def _check_frame(frame: pd.DataFrame, columns: tuple[str, ...]) -> None:
    missing = [c for c in (*input_columns(columns), "booked") if c not in frame.columns]
    if missing:
        raise TrainingError(field="frame.columns", value=missing, expected="the tier's input columns plus 'booked'")
    if len(frame) < 50:
        raise TrainingError(field="frame", value=len(frame), expected="at least 50 rows")
    if "weight" in frame.columns:
        w = frame["weight"].to_numpy(dtype=np.float64)
        if not (np.all(np.isfinite(w)) and np.all(w >= 0) and w.sum() > 0):
            bad = "non-finite, negative or all-zero"
            raise TrainingError(field="weight", value=bad, expected="finite weights >= 0, not all 0")


def load_boosters(bundle: str | Path) -> tuple[list[lgb.Booster], dict[str, Any]]:
    """Native boosters and meta of a bundle (for continued training and parity checks).

    Raises:
        BundleError: if the bundle is incomplete.
    """
    meta = read_meta(bundle)
    try:
        boosters = [lgb.Booster(model_file=str(Path(bundle) / name)) for name in meta["boosters"]]
    except (lgb.basic.LightGBMError, OSError) as exc:
        msg = f"bundle {bundle}: booster files {meta['boosters']} unreadable ({exc})"
        raise BundleError(msg) from exc
    return boosters, meta


def read_meta(bundle: str | Path) -> dict[str, Any]:
    """Parsed ``meta.json`` of a bundle.

    Raises:
        BundleError: if it is missing or not a JSON object with the expected keys.
    """
    path = Path(bundle) / META_FILE
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        msg = f"bundle {bundle}: {META_FILE} unreadable ({exc})"
        raise BundleError(msg) from exc
    needed = {"name", "version", "tier", "columns", "onnx_sha256", "boosters"}
    if not isinstance(meta, dict) or not needed <= set(meta):
        msg = f"bundle {bundle}: {META_FILE} lacks keys {sorted(needed - set(meta or {}))}"
        raise BundleError(msg)
    return meta


def _trained_range(x: NDArray[Any], columns: tuple[str, ...]) -> dict[str, list[float | None]]:
    """Least and greatest value per column (None when a column is all missing): what the model saw at all.

    The input guard refuses a model only requests beyond this range (widened by its margin); the routing
    signal uses the narrower 1st-99th percentile :func:`_envelope`.
    """
    out: dict[str, list[float | None]] = {}
    for j, name in enumerate(columns):
        col = x[:, j][np.isfinite(x[:, j])]
        out[name] = [float(col.min()), float(col.max())] if len(col) else [None, None]
    return out


def _envelope(x: NDArray[Any], columns: tuple[str, ...]) -> dict[str, list[float | None]]:
    """1st/99th percentile per column (None when a column is all missing)."""
    out: dict[str, list[float | None]] = {}
    for j, name in enumerate(columns):
        col = x[:, j][np.isfinite(x[:, j])]
        out[name] = [float(np.quantile(col, 0.01)), float(np.quantile(col, 0.99))] if len(col) else [None, None]
    return out


def _holdout_metrics(
    x: NDArray[Any],
    y: NDArray[Any],
    w: NDArray[Any] | None,
    *,
    config: DemandModelConfig,
    seed: int,
    init: Sequence[lgb.Booster] | None,
    decreasing: tuple[int, ...],
) -> dict[str, float]:
    mask = np.random.default_rng(seed).random(len(y)) < HOLDOUT_SHARE
    if len(np.unique(y[~mask])) < 2 or len(np.unique(y[mask])) < 2:
        return {}
    probe = config.model_copy(update={"n_members": 1})
    members = fit_members(
        x[~mask],
        y[~mask],
        config=probe,
        seed=seed,
        weight=None if w is None else w[~mask],
        init_models=None if init is None else init[:1],
        decreasing=decreasing,
    )
    return {f"holdout_{k}": v for k, v in binary_metrics(y[mask], predict_native(members, x[mask])[:, 0]).items()}


def train_bundle(
    frame: pd.DataFrame,
    out_dir: str | Path,
    *,
    tier: TierName,
    seed: int = 0,
    init_model: str | Path | None = None,
    config: DemandModelConfig | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    compiled: bool = False,
) -> BundleInfo:
    """Train the tier's demand model on ``frame`` and write a bundle to ``out_dir``.

    Args:
        frame: the tier's input columns (:func:`pricing.vectorize.input_columns`: ``ALL_FEATURES``,
            ``REQUEST_FEATURES``, ``base_rate``) and ``booked`` (0/1), optional ``weight``; the
            relative price columns are derived.
        out_dir: bundle directory (created; existing files are overwritten).
        tier: ``"light"`` or ``"heavy"``.
        seed: seeds the bootstrap, the boosters and the holdout split.
        init_model: a bundle directory of the same tier to continue training from.
        config: hyper-parameters; ``None`` means the tier default.
        on_progress: called with ``(members_done, members_total)``.
        compiled: also write the members compiled for this host (``compiled*``, :mod:`pricing.compiled`:
            ~3 s of CPU per heavy member); off by default, since onnxruntime is the default backend and the
            compiled backend compiles a bundle without them when it loads it.

    Raises:
        TrainingError: if the frame lacks columns, rows or one of the classes.
        BundleError: if ``init_model`` is not a readable bundle of this tier.
    """
    columns = _columns(tier)
    config = config or (LIGHT_CONFIG if tier == "light" else HEAVY_CONFIG)
    _check_frame(frame, columns)
    x = frame_matrix(frame, columns)
    y = frame["booked"].to_numpy(dtype=np.float64)
    w = frame["weight"].to_numpy(dtype=np.float64) if "weight" in frame.columns else None
    init, parent = None, None
    if init_model is not None:
        init, parent = _parent(init_model, tier, columns)
        config = config.model_copy(update={"n_members": len(init)})
    down = price_columns(columns)
    metrics = _holdout_metrics(x, y, w, config=config, seed=seed, init=init, decreasing=down)
    members = fit_members(
        x, y, config=config, seed=seed, weight=w, init_models=init, on_progress=on_progress, decreasing=down
    )
    metrics.update({f"train_{k}": v for k, v in binary_metrics(y, predict_native(members, x).mean(axis=1)).items()})
    response = fit_price_response(frame) if {"price", "base_rate"} <= set(frame.columns) else None
    return _write(Path(out_dir), members, tier=tier, columns=columns, metrics=metrics, parent=parent, x=x, seed=seed,
                  response=response, channels=fit_channel_offsets(frame, response), compiled=compiled)


def _parent(init_model: str | Path, tier: TierName, columns: tuple[str, ...]) -> tuple[list[lgb.Booster], str]:
    """The boosters and version of the bundle training continues from.

    Raises:
        BundleError: if it is unreadable, of another tier, or on other columns.
    """
    init, parent_meta = load_boosters(init_model)
    if parent_meta["tier"] != tier:
        msg = f"init_model {init_model}: tier {parent_meta['tier']!r} does not match {tier!r}"
        raise BundleError(msg)
    if tuple(parent_meta["columns"]) != columns:
        missing = [c for c in columns if c not in parent_meta["columns"]]
        msg = (f"init_model {init_model}: columns {list(parent_meta['columns'])} are not the {tier} tier's "
               f"(missing {missing}): train it afresh (no init_model) on the tier's columns")
        raise BundleError(msg)
    return init, str(parent_meta["version"])


def _write_members(
    out: Path, members: list[lgb.Booster], columns: tuple[str, ...], *, compiled: bool
) -> tuple[dict[str, str], list[str]]:
    """Write the ONNX graph and the native boosters (and their compiled form); ``({file: sha256}, booster files)``."""
    out.mkdir(parents=True, exist_ok=True)
    onnx_bytes = to_onnx(members, n_features=len(columns)).SerializeToString()
    (out / ONNX_FILE).write_bytes(onnx_bytes)
    sha = {ONNX_FILE: hashlib.sha256(onnx_bytes).hexdigest()}
    names = [f"booster_{i}.txt" for i in range(len(members))]
    for name, booster in zip(names, members, strict=True):
        booster.save_model(str(out / name))
    if compiled:
        export_compiled(out, names)
    return sha, names


def _write(
    out: Path,
    members: list[lgb.Booster],
    *,
    tier: TierName,
    columns: tuple[str, ...],
    metrics: Mapping[str, float],
    parent: str | None,
    x: NDArray[Any],
    seed: int,
    response: PriceResponse | None = None,
    channels: Mapping[str, float] | None = None,
    compiled: bool = False,
) -> BundleInfo:
    """Write the bundle: its model files, then ``meta.json`` naming them, their checksum and what they saw."""
    sha, names = _write_members(out, members, columns, compiled=compiled)
    name = f"demand-{tier}"
    version = f"{tier}-{sha[ONNX_FILE][:12]}"
    meta = {
        "name": name,
        "version": version,
        "tier": tier,
        "columns": list(columns),
        "onnx_sha256": sha,
        "boosters": names,
        "n_members": len(members),
        "n_trees": tree_count(members),
        "metrics": {k: (None if not np.isfinite(v) else v) for k, v in metrics.items()},
        "envelope": _envelope(x, columns),
        "trained_range": _trained_range(x, columns),
        "parent": parent,
        "seed": seed,
        "rows": int(len(x)),
        "created_at": datetime.now(tz=UTC).isoformat(),
        "price_response": None if response is None else response.to_json(),
        "price_response_channels": dict(channels or {}),
    }
    (out / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True), encoding="utf-8")
    return BundleInfo(out, name, version, tier, columns, tree_count(members), sha, dict(metrics), parent)
