"""Training frames read from simulated events differ from the features served on the same market by PSI < 0.1.

The served features are what a pricing read sees at other shoppers' arrival times on the same event
stream (the market unchanged, the replay the same), read with the offline history's logic
(:func:`features.replay.features_at`), which the integration tests hold equal to the job's values.
A frame drawn from the market's expected rates (``features="expected"``) is measured beside it: its
skew is what the stream frame removes.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd

from events.catalog import ALL_FEATURES
from features.replay import events_frame, features_at
from feedback.monitors.drift import MIN_SAMPLES, DriftMonitor
from market import Market, simulate
from market.frames import STREAM_LOOKBACK, training_frame
from market.offers import sample_offers
from market.presets import preset

DAYS = 3


def _served(market: Market, *, seed: int, n: int) -> pd.DataFrame:
    start = market.config.start
    span = STREAM_LOOKBACK + timedelta(days=DAYS)
    events = events_frame(simulate(market, start=start - STREAM_LOOKBACK, duration=span, rng_seed=seed))
    offers = sample_offers(market, n=n, rng=np.random.default_rng([seed, 99]), start=start.timestamp(), days=DAYS)
    cfg = market.config
    points = pd.DataFrame({
        "hotel_id": [cfg.hotel_ids[h] for h in offers.h], "room_type": [cfg.room_types[r] for r in offers.r],
        "stay_date": [d.isoformat() for d in offers.stay_dates],
        "event_time": pd.to_datetime(np.round(offers.ts * 1000).astype(np.int64), unit="ms", utc=True)})
    return features_at(events, points)


def _psi(reference: pd.DataFrame, served: pd.DataFrame) -> dict[str, float]:
    names = tuple(n for n in ALL_FEATURES
                  if reference[n].notna().sum() >= MIN_SAMPLES and served[n].notna().sum() >= MIN_SAMPLES)
    return {f.feature: f.psi for f in DriftMonitor(reference, features=names).check(served)}


def test_a_stream_training_frame_has_no_skew_against_the_served_features() -> None:
    market = Market(preset("city", hotels=1))
    served = _served(market, seed=1, n=1500)
    stream = _psi(training_frame(market, n=1500, seed=1, days=DAYS, features="stream"), served)
    expected = _psi(training_frame(market, n=1500, seed=1, days=DAYS), served)
    assert len(stream) >= 15  # most features judged
    assert max(stream.values()) <= 0.1, {k: round(v, 3) for k, v in stream.items() if v > 0.1}
    assert max(expected.values()) > 0.1  # the drawn frame's skew, which the stream frame removes
