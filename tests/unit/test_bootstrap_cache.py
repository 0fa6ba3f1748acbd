"""The bootstrap's simulated frame is built once per size and code: the next bootstrap reads it back, equal."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pandas as pd

from market import Market, MarketConfig, training_frame
from pricestream.wiring import _cached_frame


def test_a_cached_frame_reads_back_equal_and_a_new_key_builds_again(tmp_path: Path) -> None:
    market = Market(MarketConfig(hotels=2, seed=3, horizon_days=30))
    calls: list[int] = []

    def build() -> pd.DataFrame:
        calls.append(1)
        return training_frame(market, n=120, seed=3, start=market.config.start, days=2)

    key = {"hotels": 2, "seed": 3, "rows": 120}
    first = _cached_frame(tmp_path, build, key=key)
    again = _cached_frame(tmp_path, build, key=key)
    pd.testing.assert_frame_equal(first, again)
    assert len(calls) == 1 and len(list((tmp_path / "frames").glob("*.parquet"))) == 1
    other = _cached_frame(tmp_path, build, key={**key, "rows": 121})
    assert len(calls) == 2 and len(other) == len(first)
    assert not list((tmp_path / "frames").glob("*.tmp"))
    assert _cached_frame(None, build, key=key).shape == first.shape and len(calls) == 3
    assert first["event_time"].max() - first["event_time"].min() <= timedelta(days=2)


def test_a_cache_that_cannot_be_written_costs_a_rebuild_not_a_failure(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    frame = _cached_frame(blocked, lambda: pd.DataFrame({"x": [1, 2]}), key={"k": 1})
    assert list(frame["x"]) == [1, 2]
