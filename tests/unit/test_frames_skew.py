"""A bootstrap training frame and the features served on a replay of the same unchanged market: PSI <= 0.1.

The frame is the one ``serve``'s starter models and the trainer's bootstrap snapshot learn from
(:func:`market.training_frame` with :data:`pricestream.wiring.BOOTSTRAP_DAYS` and the bootstrap's
hotels and rows). The replay is the same market simulated again with another seed over the same
range; the served features are what the scorer reads when it prices each of its requests (1 ms
before each view), through the one implementation of the windows (:func:`features.replay.features_at`),
which ``tests/integration/test_bench_job_features.py`` holds equal to the job's served values.
PSI bins as the drift monitor does (ten reference-quantile bins), as ``pricestream features skew`` prints it.
"""

from __future__ import annotations

from datetime import timedelta

import pandas as pd

from events.catalog import ALL_FEATURES
from features.replay import POINT_COLUMNS, events_frame, features_at
from feedback.monitors.drift import MIN_SAMPLES, DriftMonitor
from market import Market, MarketConfig, simulate, training_frame
from market.frames import STREAM_LOOKBACK
from pricestream.settings import Settings
from pricestream.wiring import BOOTSTRAP_DAYS, BootstrapModels


def served_at_views(market: Market, *, seed: int, days: int) -> pd.DataFrame:
    """Every feature as the scorer reads it at each request (view) of a replay of ``market`` from its start."""
    start = market.config.start
    span = STREAM_LOOKBACK + timedelta(days=days)
    events = events_frame(simulate(market, start=start - STREAM_LOOKBACK, duration=span, rng_seed=seed))
    views = events[(events["event_type"] == "view") & (events["event_time"] >= pd.Timestamp(start))]
    points = views[list(POINT_COLUMNS)].assign(event_time=views["event_time"] - pd.Timedelta(milliseconds=1))
    return features_at(events, points)


def psi_per_feature(reference: pd.DataFrame, served: pd.DataFrame) -> dict[str, float]:
    names = tuple(n for n in ALL_FEATURES
                  if reference[n].notna().sum() >= MIN_SAMPLES and served[n].notna().sum() >= MIN_SAMPLES)
    return {f.feature: f.psi for f in DriftMonitor(reference, features=names).check(served)}


def test_the_bootstrap_frame_has_no_skew_against_the_features_served_on_a_replay() -> None:
    seed, rows = 0, Settings().bootstrap_rows
    market = Market(MarketConfig(hotels=BootstrapModels().hotels, seed=seed))
    frame = training_frame(market, n=rows, seed=seed, start=market.config.start, days=BOOTSTRAP_DAYS)
    psi = psi_per_feature(frame, served_at_views(market, seed=seed + 1, days=BOOTSTRAP_DAYS))
    assert len(psi) == len(ALL_FEATURES)  # every feature judged
    assert max(psi.values()) <= 0.1, {k: round(v, 3) for k, v in psi.items() if v > 0.1}


def test_a_frame_of_another_market_is_skewed() -> None:
    """The measure can fail: a frame of a market with twice the shoppers differs from the served features."""
    market = Market(MarketConfig(hotels=2, seed=3))
    busier = Market(MarketConfig(hotels=2, seed=3, shoppers_per_room_night=8.6))
    psi = psi_per_feature(training_frame(busier, n=1500, seed=3, days=7), served_at_views(market, seed=4, days=7))
    assert psi["hotel_searches_24h"] > 0.2 and psi["searches_24h"] > 0.1
