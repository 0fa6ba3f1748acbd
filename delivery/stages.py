"""Rollout stages and the delivery configuration.

A candidate model goes ``shadow -> canary -> blend -> full``; a failed gate or an
operator moves it to ``aborted`` from any live stage. ``idle`` means no rollout
has started.

Example:
    >>> next_stage(Stage.CANARY)
    <Stage.BLEND: 'blend'>
    >>> Stage.FULL in LIVE_STAGES
    False
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from delivery.gates import GateLimits
from routing.errors import RolloutStateError


class Stage(StrEnum):
    """Where a rollout stands."""

    IDLE = "idle"
    SHADOW = "shadow"
    CANARY = "canary"
    BLEND = "blend"
    FULL = "full"
    ABORTED = "aborted"


ORDER: tuple[Stage, ...] = (Stage.SHADOW, Stage.CANARY, Stage.BLEND, Stage.FULL)
LIVE_STAGES: frozenset[Stage] = frozenset({Stage.SHADOW, Stage.CANARY, Stage.BLEND})
"""Stages that ``advance`` can leave and ``abort`` can stop."""


def next_stage(stage: Stage) -> Stage:
    """The stage after ``stage``.

    Raises:
        RolloutStateError: ``stage`` is not a live stage.
    """
    if stage not in LIVE_STAGES:
        msg = f"stage {stage.value!r} has no next stage; advance works from {sorted(s.value for s in LIVE_STAGES)}"
        raise RolloutStateError(msg)
    return ORDER[ORDER.index(stage) + 1]


class DeliveryConfig(BaseModel):
    """Settings of progressive delivery.

    Example:
        >>> DeliveryConfig(state_path=Path("rollout.json")).canary_share
        0.05
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    state_path: Path
    canary_share: float = Field(default=0.05, gt=0.0, lt=1.0)
    salt: str = Field(default="pricestream-rollout", min_length=1)
    min_weight: float = Field(default=0.05, gt=0.0, lt=0.5)
    blend_initial_weight: float = Field(default=0.2, gt=0.0, lt=1.0)
    latency_budget_ms: float = Field(default=25.0, gt=0.0)
    shadow_workers: int = Field(default=2, ge=1)
    shadow_max_pending: int = Field(default=256, ge=1)
    posterior_samples: int = Field(default=4_000, ge=100)
    seed: int = 0
    limits: GateLimits = GateLimits()
