"""Progressive delivery: shadow -> canary -> weighted blend -> full, gated on model quality.

Modules: :mod:`.stages` (stages, config), :mod:`.state` (persisted rollout state),
:mod:`.shadow` (background candidate scoring), :mod:`.canary` (stable hash split),
:mod:`.bandit` (Thompson blend with delayed rewards), :mod:`.arms` (atomic switch and
rollback), :mod:`.gates` (quality gates), :mod:`.controller` (ties them together).

Around the scorer: :mod:`.rollout` (the serving wrapper that routes each request to an
arm and records shadow and outcome evidence), :mod:`.control_plane` and
:mod:`.control_kafka` (registry and rollout state that every replica follows), and
:mod:`.cold_start` (a new hotel's stages: rules with a bid-price floor, pooled models,
its own refit).
"""

from __future__ import annotations

from delivery.arms import ArmSet
from delivery.bandit import ThompsonBlend, WeightChange
from delivery.canary import Arm, assign_arm, hash_unit
from delivery.controller import AdvanceResult, RolloutController
from delivery.gates import Evidence, GateLimits, GateResult, evaluate_gates
from delivery.shadow import ShadowRecord, ShadowRunner
from delivery.stages import DeliveryConfig, Stage
from delivery.state import HistoryEntry, RolloutState, StateStore

__all__ = [
    "AdvanceResult",
    "Arm",
    "ArmSet",
    "DeliveryConfig",
    "Evidence",
    "GateLimits",
    "GateResult",
    "HistoryEntry",
    "RolloutController",
    "RolloutState",
    "ShadowRecord",
    "ShadowRunner",
    "Stage",
    "StateStore",
    "ThompsonBlend",
    "WeightChange",
    "assign_arm",
    "evaluate_gates",
    "hash_unit",
]
