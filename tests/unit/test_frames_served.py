"""Every row of a training frame holds what the scorer reads when it prices that request, on the same events.

The frame's rows are the simulated stream's requests (its views); the benchmark's in-process driver
(``bench/stream_features.py``), fed the same simulated records, reads each row's key 1 ms before
its view. Every feature of every row must be equal, and every row must be a view of its key at its
time, on a night with rooms left.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from events.catalog import ALL_FEATURES
from market import Market, MarketConfig, simulate, training_frame
from market.frames import STREAM_LOOKBACK

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from stream_features import StreamFeatures  # noqa: E402


def test_every_row_holds_the_features_read_at_its_request() -> None:
    market = Market(MarketConfig(hotels=2, seed=4))
    start = market.config.start
    frame = training_frame(market, n=400, seed=2, days=3)
    records = list(simulate(market, start=start - STREAM_LOOKBACK, duration=STREAM_LOOKBACK + timedelta(days=3),
                            rng_seed=2))
    feats = StreamFeatures()
    for record in records:
        feats.add(record)
    views = {(r.hotel_id, r.room_type, r.stay_date, r.event_time) for r in records  # type: ignore[attr-defined]
             if r.event_type == "view"}
    rows = list(zip(frame["hotel_id"], frame["room_type"], frame["stay_date"], frame["event_time"], strict=True))
    assert all((h, r, d, t.to_pydatetime()) in views for h, r, d, t in rows)  # every row is a request of the stream
    read = pd.DataFrame([feats.read(h, r, d, at=t.to_pydatetime() - timedelta(milliseconds=1)).values
                         for h, r, d, t in rows], columns=list(ALL_FEATURES), dtype="float64")
    a, b = frame[list(ALL_FEATURES)].to_numpy(dtype=float), read.to_numpy(dtype=float)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    bad = [(rows[i], ALL_FEATURES[j], a[i, j], b[i, j]) for i, j in zip(*np.nonzero(~same), strict=True)]
    assert not bad, bad[:5]
    assert (frame["searches_1h"] >= 1).all()  # the shopper's own search is in the window, as when serving
    assert (frame["rooms_left"].dropna() >= 1).all() and frame["rooms_left"].notna().mean() > 0.9
    assert frame["price"].std() / frame["price"].mean() > 0.2  # prices are explored
