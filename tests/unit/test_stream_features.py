"""The benchmarks' in-process features equal the offline history's at every read (the job's values).

``bench/stream_features.py`` answers the replays' reads incrementally; :func:`features.replay.features_at`
computes the same reads from the events with the history's logic, which ``test_asof_replay`` holds
equal to pandas over the job's accepted events. 400 reads at random times (between events, and past
the TTLs) of a day of a hotel's simulated events must agree on every feature.
"""

from __future__ import annotations

import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from events.catalog import ALL_FEATURES
from features.replay import events_frame, features_at
from market import Market, MarketConfig, simulate

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from stream_features import StreamFeatures  # noqa: E402


def test_every_read_of_the_benchmark_equals_the_history() -> None:
    market = Market(MarketConfig(hotels=1, seed=3))
    records = list(simulate(market, duration=timedelta(days=4), rng_seed=3))
    feats = StreamFeatures()
    for record in records:
        feats.add(record)
    rng = random.Random(1)
    first, last = records[0].event_time.timestamp(), records[-1].event_time.timestamp() + 3 * 86_400
    keys = sorted(feats.keys())
    reads = [(*rng.choice(keys), datetime.fromtimestamp(rng.uniform(first, last), tz=UTC)) for _ in range(400)]
    got = pd.DataFrame([feats.read(h, r, d, at=t).values for h, r, d, t in reads])[list(ALL_FEATURES)]
    points = pd.DataFrame(reads, columns=["hotel_id", "room_type", "stay_date", "event_time"])
    points["event_time"] = points["event_time"].map(lambda t: pd.Timestamp(round(t.timestamp() * 1000), unit="ms",
                                                                              tz="UTC"))
    want = features_at(events_frame(records), points)
    a, b = got.to_numpy(dtype=float), want.to_numpy(dtype=float)
    same = np.isclose(a, b, rtol=1e-9, atol=1e-9) | (np.isnan(a) & np.isnan(b))
    bad = [(reads[i], ALL_FEATURES[j], a[i, j], b[i, j]) for i, j in zip(*np.nonzero(~same), strict=True)]
    assert not bad, bad[:5]
    assert np.isfinite(a[:, ALL_FEATURES.index("searches_24h")]).sum() > 100  # most reads are within the TTL
