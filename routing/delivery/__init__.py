"""Progressive delivery: shadow -> canary -> weighted blend -> full, gated on model quality.

Modules: :mod:`.stages` (stages, config), :mod:`.state` (persisted rollout state),
:mod:`.shadow` (background candidate scoring), :mod:`.canary` (stable hash split),
:mod:`.bandit` (Thompson blend with delayed rewards), :mod:`.arms` (atomic switch and
rollback), :mod:`.gates` (quality gates), :mod:`.controller` (ties them together).
"""

from __future__ import annotations

from routing.delivery.arms import ArmSet
from routing.delivery.bandit import ThompsonBlend, WeightChange
from routing.delivery.canary import Arm, assign_arm, hash_unit
from routing.delivery.controller import AdvanceResult, RolloutController
from routing.delivery.gates import Evidence, GateLimits, GateResult, evaluate_gates
from routing.delivery.shadow import ShadowRecord, ShadowRunner
from routing.delivery.stages import DeliveryConfig, Stage
from routing.delivery.state import HistoryEntry, RolloutState, StateStore

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
