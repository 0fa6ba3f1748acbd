"""Price exploration with a logged propensity: the shown price is drawn from a band around the chosen one.

A model that only ever sees its own prices learns its own policy, not the price
response: every price it learns from is a function of the features it also learns
from. Drawing the shown price from ``arms`` geometric steps within ``price x (1 +-
band)`` (inside the rules' bounds) decorrelates price from features, and logging
the probability of the shown price (its propensity) makes the off-policy
estimators of :mod:`feedback.offpolicy` apply.

The draw is a hash of the request id and ``seed``, not RNG state: the same request
gets the same price on a replay, and a decision's propensity is exact.

Example:
    >>> import uuid
    >>> cfg = ExplorationConfig(band=0.1, arms=5)
    >>> shown = [explore(100.0, floor=50.0, ceiling=300.0, key=uuid.UUID(int=i), config=cfg) for i in range(200)]
    >>> sorted({round(p, 2) for p, _ in shown})
    [90.91, 95.35, 100.0, 104.88, 110.0]
    >>> {q for _, q in shown}
    {0.2}
    >>> explore(100.0, floor=50.0, ceiling=100.0, key=uuid.UUID(int=3), config=cfg)[1]  # 3 arms clipped onto 100
    0.6
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import math
import uuid
from collections.abc import Iterator

import numpy as np
from pydantic import BaseModel, ConfigDict, Field


class ExplorationConfig(BaseModel):
    """How far and how finely shown prices are randomised around the chosen price.

    Attributes:
        band: relative half-width of the band (0.05: within -4.8% .. +5%).
        arms: prices in the band, geometrically spaced (an odd count includes the chosen price).
        seed: salt of the per-request draw.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    band: float = Field(default=0.05, ge=0.0, lt=1.0, allow_inf_nan=False)
    arms: int = Field(default=5, ge=1, le=101)
    seed: int = 0


_OVERRIDE: contextvars.ContextVar[ExplorationConfig | None] = contextvars.ContextVar("exploration", default=None)


@contextlib.contextmanager
def exploring(config: ExplorationConfig | None) -> Iterator[None]:
    """Within the block, tier pricers explore with ``config`` instead of their own setting (``None``: no change).

    The service explores a new hotel's stage-two prices this way (``delivery.cold_start``) with the
    same loaded models that price every other hotel unexplored.

    Example:
        >>> with exploring(ExplorationConfig(band=0.1)):
        ...     in_force(None).band
        0.1
        >>> in_force(None) is None
        True
    """
    if config is None:
        yield
        return
    token = _OVERRIDE.set(config)
    try:
        yield
    finally:
        _OVERRIDE.reset(token)


def in_force(own: ExplorationConfig | None) -> ExplorationConfig | None:
    """The exploration a pricer applies now: the :func:`exploring` block's, else its ``own``."""
    override = _OVERRIDE.get()
    return own if override is None else override


def _unit(seed: int, key: uuid.UUID) -> float:
    digest = hashlib.blake2b(key.bytes, digest_size=8, salt=seed.to_bytes(8, "little", signed=True)).digest()
    return int.from_bytes(digest, "little") / 2.0**64


def explore(
    price: float, *, floor: float, ceiling: float, key: uuid.UUID, config: ExplorationConfig
) -> tuple[float, float]:
    """``(shown price, its propensity)``: one of the band's prices, clipped into ``[floor, ceiling]``.

    Arms that clipping merges share their probability, so the propensity is exact.
    """
    if config.arms == 1 or config.band == 0.0:
        return min(max(price, floor), ceiling), 1.0
    steps = np.exp(np.linspace(-math.log1p(config.band), math.log1p(config.band), config.arms))
    candidates = np.clip(price * steps, floor, ceiling)
    i = min(int(_unit(config.seed, key) * config.arms), config.arms - 1)
    shown = float(candidates[i])
    return shown, float(np.count_nonzero(candidates == shown)) / config.arms
