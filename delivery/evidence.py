"""The evidence a live rollout gathers: paired shadow prices, latencies, per-arm outcomes, and its metrics.

:class:`RolloutScorer` (:mod:`delivery.rollout`) records into an :class:`EvidenceBuffer` as it serves; the rollout
gates (:mod:`delivery.gates`) judge the snapshot it takes.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import NamedTuple

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge

from delivery import (
    Arm,
    Evidence,
)
from events.models import PricingRequest

DEFAULT_MAX_EVIDENCE = 50_000
"""Samples kept per evidence series (oldest dropped): enough for tight gates, bounded memory."""


class ShadowJob(NamedTuple):
    """One background pricing: ``arm`` (the arm not served) prices ``request``."""

    request: PricingRequest
    arm: Arm


class EvidenceBuffer:
    """Per-stage evidence for the gates, bounded, thread safe."""

    def __init__(self, maxlen: int) -> None:
        self._lock = threading.Lock()
        self._maxlen = maxlen
        self.clear()

    def clear(self) -> None:
        with self._lock:
            n = self._maxlen
            self.pairs: deque[tuple[float, float]] = deque(maxlen=n)
            self.latency: deque[float] = deque(maxlen=n)
            self.booked: dict[Arm, deque[float]] = {"incumbent": deque(maxlen=n), "candidate": deque(maxlen=n)}
            self.revenue: dict[Arm, deque[float]] = {"incumbent": deque(maxlen=n), "candidate": deque(maxlen=n)}

    def add_pair(self, incumbent_price: float, candidate_price: float) -> None:
        with self._lock:
            self.pairs.append((incumbent_price, candidate_price))

    def add_latency(self, ms: float) -> None:
        with self._lock:
            self.latency.append(ms)

    def add_outcome(self, arm: Arm, booked: float, revenue: float) -> None:
        with self._lock:
            self.booked[arm].append(booked)
            self.revenue[arm].append(revenue)

    def snapshot(self) -> Evidence:
        with self._lock:
            pairs = np.asarray(self.pairs, dtype=float).reshape(-1, 2)
            return Evidence(
                incumbent_prices=pairs[:, 0].copy(),
                candidate_prices=pairs[:, 1].copy(),
                incumbent_booked=list(self.booked["incumbent"]),
                candidate_booked=list(self.booked["candidate"]),
                incumbent_revenue=list(self.revenue["incumbent"]),
                candidate_revenue=list(self.revenue["candidate"]),
                candidate_latency_ms=list(self.latency),
            )


class RolloutMetrics:
    """Rollout counters and gauges, on the incumbent scorer's registry (so ``/metrics`` shows them)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.decisions = Counter(
            "pricestream_rollout_decisions_total", "Served decisions by rollout arm.", ["arm"], registry=registry
        )
        self.shadow = Counter(
            "pricestream_rollout_shadow_total",
            "Background pricings of the arm not served, by outcome (logged, late, failed, dropped).",
            ["outcome"],
            registry=registry,
        )
        self.weight = Gauge(
            "pricestream_rollout_candidate_weight", "Candidate traffic weight in force.", registry=registry
        )
        self.rollbacks = Counter("pricestream_rollout_rollbacks_total", "Rollbacks and aborts.", registry=registry)
        self.rollback_seconds = Gauge(
            "pricestream_rollout_last_rollback_seconds", "Wall time of the last serving swap back.", registry=registry
        )
