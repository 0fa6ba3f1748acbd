"""A seeded hotel market: ground-truth demand, a behaviour-event stream, policy scoring, training frames.

Example:
    >>> from datetime import timedelta
    >>> market = Market(MarketConfig(hotels=2, horizon_days=30, seed=1))
    >>> first = next(simulate(market, duration=timedelta(hours=2)))
    >>> first.event_type in {"search", "competitor_rate", "inventory"}
    True
"""

from __future__ import annotations

from events.simulator.config import MarketConfig, Segment
from events.simulator.errors import PolicyError, SimulatorError, UnknownKeyError
from events.simulator.evaluate import PolicyResult, PolicyRun, oracle_policy, run_policy, static_policy
from events.simulator.frames import FRAME_COLUMNS, training_frame
from events.simulator.generator import Offer, Policy, Simulation, simulate
from events.simulator.market import Market
from events.simulator.oracle import DPOracle

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
