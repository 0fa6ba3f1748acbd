"""Demand models: ``p(book | price, features)`` as LightGBM binary classifiers.

Two shapes share one code path: the *light* model is a single small booster;
the *heavy* model is an ensemble of bagged boosters (Poisson bootstrap weights,
different seeds) whose spread is the uncertainty. Both are constrained to be
non-increasing in price (column 0) and in the relative prices (``decreasing``),
so the revenue curve the optimiser sees is well behaved.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(50, 300, size=(400, 2)).astype(np.float32)
    >>> y = (rng.random(400) < 1 / (1 + np.exp((x[:, 0] - 150) / 30))).astype(np.float32)
    >>> members = fit_members(x, y, config=DemandModelConfig(n_members=1, num_trees=20, num_leaves=7), seed=0)
    >>> p = predict_native(members, np.array([[60.0, 1.0], [290.0, 1.0]], dtype=np.float32))
    >>> p.shape, bool(p[0, 0] > p[1, 0])
    ((2, 1), True)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import lightgbm as lgb
import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field
from scipy.stats import rankdata

from pricing.errors import TrainingError

FloatArray = npt.NDArray[np.float32]


class DemandModelConfig(BaseModel):
    """Hyper-parameters of one tier's demand model.

    ``num_trees`` is the number of boosting rounds per member; on continued
    training (``init_model``) that many rounds are added to each member.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    n_members: int = Field(default=1, ge=1, le=32)
    num_trees: int = Field(default=50, ge=1)
    num_leaves: int = Field(default=15, ge=2)
    learning_rate: float = Field(default=0.1, gt=0.0, le=1.0)
    min_data_in_leaf: int = Field(default=20, ge=1)
    lambda_l2: float = Field(default=0.0, ge=0.0)
    feature_fraction: float = Field(default=1.0, gt=0.0, le=1.0)
    bootstrap: bool = False
    monotone_price: bool = True
    num_threads: int = Field(default=1, ge=1)


LIGHT_CONFIG = DemandModelConfig()
"""~50 trees of 15 leaves: a few microseconds per row in onnxruntime."""

HEAVY_CONFIG = DemandModelConfig(
    n_members=5,
    num_trees=120,
    num_leaves=31,
    learning_rate=0.05,
    min_data_in_leaf=50,
    lambda_l2=10.0,
    feature_fraction=0.8,
    bootstrap=True,
)
"""5 bagged members x 120 trees x 31 leaves; member spread = epistemic uncertainty.

50-row leaves and L2 keep the trees from memorising a few thousand rows. Sized by measurement
(all-heavy policy on the market simulator, 20 hotels, 30,000 training rows, 2,000 offers): the
earlier 5 x 300 trees x 63 leaves at learning rate 0.02 earned the same revenue per offer
(60.375 vs 60.376) at 2.6x the CPU per decision (p50 2,094 vs 809 us), and a heavy decision
must stay within the latency of a feature-store read."""


def _params(
    config: DemandModelConfig, n_features: int, seed: int, decreasing: Sequence[int] = (0,)
) -> dict[str, Any]:
    params: dict[str, Any] = {
        "objective": "binary",
        "num_leaves": config.num_leaves,
        "learning_rate": config.learning_rate,
        "min_data_in_leaf": config.min_data_in_leaf,
        "lambda_l2": config.lambda_l2,
        "feature_fraction": config.feature_fraction,
        "feature_fraction_seed": seed,
        "seed": seed,
        "deterministic": True,
        "force_row_wise": True,
        "num_threads": config.num_threads,
        "verbose": -1,
    }
    if config.monotone_price:
        params["monotone_constraints"] = [-1 if j in decreasing else 0 for j in range(n_features)]
        # "advanced" costs ~10x the training time for no measurable gain on demand curves.
        params["monotone_constraints_method"] = "intermediate"
    return params


def fit_members(
    x: FloatArray,
    y: npt.NDArray[np.floating[Any]],
    *,
    config: DemandModelConfig,
    seed: int = 0,
    weight: npt.NDArray[np.floating[Any]] | None = None,
    init_models: Sequence[lgb.Booster] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    decreasing: Sequence[int] = (0,),
) -> list[lgb.Booster]:
    """Train ``config.n_members`` boosters (continuing ``init_models`` when given).

    ``decreasing`` lists the columns demand must not increase in (the price and the relative
    prices, see :func:`pricing.vectorize.price_columns`) when ``config.monotone_price`` is set.

    Raises:
        TrainingError: if the labels are not 0/1 of both classes, or ``init_models`` has the wrong size.
    """
    _check_labels(y, config, init_models)
    base_w = np.ones(len(y)) if weight is None else np.asarray(weight, dtype=np.float64)
    members = []
    for i in range(config.n_members):
        init = init_models[i] if init_models is not None else None
        members.append(_fit_member(x, y, base_w, config=config, member_seed=seed * 1000 + i, init=init,
                                   decreasing=decreasing))
        if on_progress is not None:
            on_progress(i + 1, config.n_members)
    return members


def _check_labels(
    y: npt.NDArray[np.floating[Any]], config: DemandModelConfig, init_models: Sequence[lgb.Booster] | None
) -> None:
    """Raise :class:`TrainingError` unless the labels hold both 0 and 1 and ``init_models`` has one per member."""
    labels = np.unique(y)
    if set(labels.tolist()) != {0.0, 1.0}:
        raise TrainingError(field="booked", value=labels.tolist()[:5], expected="both classes 0 and 1")
    if init_models is not None and len(init_models) != config.n_members:
        raise TrainingError(field="init_model", value=len(init_models), expected=f"{config.n_members} member boosters")


def _fit_member(
    x: FloatArray,
    y: npt.NDArray[np.floating[Any]],
    base_w: npt.NDArray[np.float64],
    *,
    config: DemandModelConfig,
    member_seed: int,
    init: lgb.Booster | None,
    decreasing: Sequence[int],
) -> lgb.Booster:
    """One member: on a Poisson(1) bootstrap of the rows (seeded ``member_seed``) when ``config.bootstrap``."""
    w = base_w
    if config.bootstrap:
        w = base_w * np.random.default_rng(member_seed).poisson(1.0, size=len(y))
    data = lgb.Dataset(x, label=y, weight=w, free_raw_data=True, params={"verbose": -1})
    return lgb.train(
        _params(config, x.shape[1], member_seed, decreasing),
        data,
        num_boost_round=config.num_trees,
        init_model=init,
        keep_training_booster=False,
    )


def predict_native(members: Sequence[lgb.Booster], x: FloatArray) -> FloatArray:
    """``(n_rows, n_members)`` booking probabilities from native LightGBM."""
    return np.asarray(np.stack([m.predict(x, num_threads=1) for m in members], axis=1), dtype=np.float32)


def tree_count(members: Sequence[lgb.Booster]) -> int:
    """Total trees across members."""
    return int(sum(m.num_trees() for m in members))


def binary_metrics(y: npt.NDArray[np.floating[Any]], p: npt.NDArray[np.floating[Any]]) -> dict[str, float]:
    """Log loss, Brier score and ROC AUC of probabilities ``p`` for 0/1 labels ``y``.

    Example:
        >>> m = binary_metrics(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8]))
        >>> round(m["auc"], 2), round(m["brier"], 4)
        (0.75, 0.1581)
    """
    y = np.asarray(y, dtype=np.float64)
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-7, 1 - 1e-7)
    logloss = float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
    brier = float(np.mean((p - y) ** 2))
    n_pos = float(y.sum())
    n_neg = float(len(y) - n_pos)
    auc = float("nan")
    if n_pos and n_neg:
        ranks = rankdata(p)
        auc = float((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
    return {"logloss": logloss, "brier": brier, "auc": auc, "base_rate": float(y.mean())}
