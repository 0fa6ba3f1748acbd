"""The market simulator: everything that knows the truth, and nothing that serves.

A seeded hotel market (ground-truth demand, presets calibrated to real hotels), the
behaviour-event stream it generates, the oracles (DP, myopic) and bounds (LP) that score a
pricing policy against that truth, and the synthetic frames that tests and benches train on.

Example:
    >>> from datetime import timedelta
    >>> market = Market(MarketConfig(hotels=2, horizon_days=30, seed=1))
    >>> first = next(simulate(market, duration=timedelta(hours=2)))
    >>> first.event_type in {"search", "competitor_rate", "inventory"}
    True
"""

from __future__ import annotations

from market.config import MarketConfig, Segment
from market.errors import PolicyError, SimulatorError, UnknownKeyError
from market.evaluate import PolicyResult, PolicyRun, oracle_policy, run_policy, static_policy
from market.frames import FRAME_COLUMNS, training_frame
from market.generator import Simulation, simulate
from market.market import Market
from market.oracle import DPOracle
from market.shoppers import Offer, Policy

__all__ = [
    "DPOracle",
    "FRAME_COLUMNS",
    "Market",
    "MarketConfig",
    "Offer",
    "Policy",
    "PolicyError",
    "PolicyResult",
    "PolicyRun",
    "Segment",
    "Simulation",
    "SimulatorError",
    "UnknownKeyError",
    "oracle_policy",
    "run_policy",
    "simulate",
    "static_policy",
    "training_frame",
]
