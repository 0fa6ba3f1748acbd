"""Replay a scaling policy on a load trace against a simulated cluster (the autoscaler's proving ground).

A trace is one load (requests/s) per minute. :func:`diurnal_trace` makes one: a daily cycle, noise,
sudden spikes and promotion ramps, seeded. :func:`replay` runs a policy on it, minute by minute,
against :class:`SimulatedTier`: a replica asked for serves only after ``startup_min`` minutes (image
pull, model load: what makes forecasting worth it), a replica removed stops at once, and the p99
latency follows the utilisation of the ready replicas like a queue (``base_ms / (1 - u)``, capped).

Two policies share the trace and the cluster model: :class:`ForecastPolicy` (the autoscaler's
:func:`infra.autoscaler.decide` on :class:`infra.autoscaler.LoadForecaster`'s forecast) and
:class:`ReactiveCpuPolicy` (Kubernetes' HPA rule on CPU: ``ceil(replicas x utilisation / 0.6)``,
scale-up at once, scale-down after a 5-minute stabilisation window).

Example:
    >>> from infra.autoscaler import TierPolicy
    >>> trace = diurnal_trace(days=1, seed=3)
    >>> tier = TierPolicy(name="light", deployment="pricing-light", replica_rps=100.0)
    >>> result = replay(trace, ForecastPolicy(tier))
    >>> len(result.replicas) == len(trace), min(result.replicas) >= 2
    (True, True)
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from infra.autoscaler import Decision, LoadForecaster, TierPolicy, decide

SLO_MS = 200.0
"""The light tier's latency objective (p99), as the seed's HPA rule has it."""
BASE_MS = 30.0
"""p99 of an idle replica: with ``base / (1 - u)`` the objective is crossed at 85% utilisation."""
MAX_MS = 5_000.0
"""Latency of an overloaded tier (requests time out)."""
STARTUP_MIN = 3
"""Minutes from asking for a replica to its first answer (pull, start, load models, pass readiness)."""


def diurnal_trace(*, days: int = 3, seed: int = 7, base: float = 250.0, peak: float = 1200.0,
                  spikes_per_day: int = 3, ramps_per_day: int = 1) -> npt.NDArray[np.float64]:
    """Load per minute: a daily cycle from ``base`` to ``peak``, 4% noise, sudden spikes, promotion ramps."""
    rng = np.random.default_rng(seed)
    minutes = np.arange(days * 1440)
    phase = (minutes % 1440) / 1440.0
    daily = base + (peak - base) * np.clip(np.sin(2 * np.pi * (phase - 0.3)), 0.0, None) ** 1.5
    load = daily * (1.0 + rng.normal(0.0, 0.04, minutes.size))
    for day in range(days):
        for _ in range(spikes_per_day):  # sudden: x2-3 within a minute, for 5-20 minutes
            start = day * 1440 + int(rng.integers(0, 1420))
            load[start:start + int(rng.integers(5, 21))] *= rng.uniform(2.0, 3.0)
        for _ in range(ramps_per_day):  # a promotion: +80-150% over 20 minutes, held for 40
            start = day * 1440 + int(rng.integers(360, 1300))
            lift = rng.uniform(0.8, 1.5)
            shape = np.concatenate([np.linspace(0.0, lift, 20), np.full(40, lift), np.linspace(lift, 0.0, 10)])
            end = min(start + shape.size, load.size)
            load[start:end] *= 1.0 + shape[:end - start]
    return np.clip(load, 1.0, None)


def latency_ms(load: float, ready: int, replica_rps: float) -> float:
    """p99 latency of ``ready`` replicas serving ``load`` (see the module docstring)."""
    if ready <= 0:
        return MAX_MS
    u = load / (ready * replica_rps)
    return MAX_MS if u >= 1.0 else min(MAX_MS, BASE_MS / (1.0 - u))


@dataclass
class SimulatedTier:
    """Ready replicas and replicas starting, each with the minute it becomes ready."""

    ready: int
    starting: deque[int] = field(default_factory=deque)

    @property
    def total(self) -> int:
        return self.ready + len(self.starting)

    def tick(self, minute: int) -> None:
        while self.starting and self.starting[0] <= minute:
            self.starting.popleft()
            self.ready += 1

    def scale_to(self, desired: int, minute: int, startup_min: int) -> None:
        while self.total < desired:
            self.starting.append(minute + startup_min)
        while self.total > desired:  # a starting replica is the cheapest to cancel
            if self.starting:
                self.starting.pop()
            else:
                self.ready -= 1


class Policy(Protocol):
    name: str
    tier: TierPolicy

    def desired(self, *, minute: int, load: float, utilisation: float, total: int) -> tuple[int, str]: ...


class ForecastPolicy:
    """The forecasting autoscaler: :func:`~infra.autoscaler.decide` on the forecast of the next 5 minutes."""

    name = "forecast"

    def __init__(self, tier: TierPolicy, *, kind: Literal["snarimax", "holt"] = "holt") -> None:
        self.tier = tier
        self.forecaster = LoadForecaster(kind, horizon=5)
        self._changed_at: int | None = None
        self.decisions: list[Decision] = []

    def desired(self, *, minute: int, load: float, utilisation: float, total: int) -> tuple[int, str]:
        del utilisation
        self.forecaster.learn_one(load)
        since = None if self._changed_at is None else minute - self._changed_at
        decision = decide(self.tier, replicas=total, load=load, forecast_peak=self.forecaster.peak(),
                          since_change=since)
        self.decisions.append(decision)
        if decision.desired != total:
            self._changed_at = minute
        return decision.desired, decision.reason


class ReactiveCpuPolicy:
    """Kubernetes' HPA on CPU: ``ceil(replicas x utilisation / target)``; scale-down after a stabilisation window."""

    name = "reactive-cpu"

    def __init__(self, tier: TierPolicy, *, target: float = 0.6, tolerance: float = 0.1,
                 stabilisation_min: int = 5) -> None:
        self.tier = tier
        self.target = target
        self.tolerance = tolerance
        self._recent: deque[int] = deque(maxlen=stabilisation_min)

    def desired(self, *, minute: int, load: float, utilisation: float, total: int) -> tuple[int, str]:
        del minute, load
        ratio = utilisation / self.target
        want = total if abs(ratio - 1.0) <= self.tolerance else math.ceil(total * ratio)
        want = min(self.tier.max_replicas, max(self.tier.min_replicas, want))
        self._recent.append(want)
        chosen = want if want >= total else max(self._recent)  # down only to the window's highest
        return chosen, f"cpu {utilisation:.0%} vs target {self.target:.0%}"


@dataclass
class ReplayResult:
    """Per minute: replicas paid for (ready + starting), ready replicas, p99 latency."""

    policy: str
    replicas: list[int]
    ready: list[int]
    latency_ms: list[float]

    @property
    def minutes_over_slo(self) -> int:
        return sum(1 for v in self.latency_ms if v > SLO_MS)

    @property
    def replica_minutes(self) -> int:
        return sum(self.replicas)


def replay(trace: npt.ArrayLike, policy: Policy, *, startup_min: int = STARTUP_MIN) -> ReplayResult:
    """Run ``policy`` on ``trace`` (one load per minute) against a :class:`SimulatedTier`."""
    loads = np.asarray(trace, dtype=float)
    tier = policy.tier
    cluster = SimulatedTier(ready=tier.needed(float(loads[0])))
    result = ReplayResult(policy.name, [], [], [])
    for minute, load in enumerate(loads):
        cluster.tick(minute)
        lat = latency_ms(float(load), cluster.ready, tier.replica_rps)
        utilisation = min(1.0, float(load) / (max(cluster.ready, 1) * tier.replica_rps))
        result.replicas.append(cluster.total)
        result.ready.append(cluster.ready)
        result.latency_ms.append(lat)
        desired, _ = policy.desired(minute=minute, load=float(load), utilisation=utilisation, total=cluster.total)
        cluster.scale_to(desired, minute, startup_min)
    return result
