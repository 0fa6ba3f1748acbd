"""Simulator throughput, as a ratio against pydantic-validated construction of the same records.

Run: ``.venv/bin/python bench/simulator_speed.py [--hotels 10] [--days 3]``

Prints events/s of :func:`market.generator.simulate` (the whole
simulation: arrivals, policy, truth, inventory, records) and of merely
constructing the same records with full pydantic validation
(``model_validate`` of their field dicts), measured in the same process on CPU
time, plus the ratio. A ratio above 1 means simulating is cheaper than
validating the output would be.
"""

from __future__ import annotations

import argparse
import time
from datetime import timedelta

from market.config import MarketConfig
from market.generator import simulate
from market.market import Market


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hotels", type=int, default=10)
    parser.add_argument("--days", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    market = Market(MarketConfig(hotels=args.hotels, seed=args.seed))
    list(simulate(market, duration=timedelta(hours=6)))  # warm imports and caches

    t0 = time.process_time()
    events = list(simulate(market, duration=timedelta(days=args.days), rng_seed=args.seed + 1))
    sim_s = time.process_time() - t0

    payloads = [(type(e), dict(e.__dict__)) for e in events]
    t0 = time.process_time()
    for cls, values in payloads:
        cls.model_validate(values)
    peer_s = time.process_time() - t0

    n = len(events)
    print(f"events: {n} over {args.days} simulated days, {args.hotels} hotels")
    print(f"simulate():              {n / sim_s:>10,.0f} events/s (cpu)")
    print(f"pydantic model_validate: {n / peer_s:>10,.0f} events/s (cpu)")
    print(f"ratio simulate / validate-only: {peer_s / sim_s:.2f}")


if __name__ == "__main__":
    main()
