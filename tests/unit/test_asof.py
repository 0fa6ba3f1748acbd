"""As-of history from raw events: equal to a brute-force pandas window at every (key, event time), in any order.

The reference restates the catalogue's semantics (tile start >= floor(t, tile) - window, event time
<= t) and evaluates it point by point with pandas masks, without the cumulative sums of
:mod:`features.asof`. The store-level test writes the same events in three orders and batchings
through :class:`features.offline_writer.OfflineWriter` (events sharing one instant split across two
flushes among them) and compares the as-of files byte for byte.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from events.catalog import DAY_MS, HOUR_MS, MINUTE_MS, SPECS
from features.asof import asof_rows
from features.history import ASOF_FILE, asof_root, materialise
from features.offline_writer import OfflineWriter
from features.raw_events import read_events

T0 = 1_780_000_000_000 - 1_780_000_000_000 % DAY_MS
WINDOWS = {"stay_1h": (HOUR_MS, 5 * MINUTE_MS), "stay_24h": (DAY_MS, HOUR_MS), "stay_7d": (7 * DAY_MS, HOUR_MS),
           "stay_14d": (14 * DAY_MS, DAY_MS), "hotel_stats": (DAY_MS, HOUR_MS)}


def _events(n: int = 600, seed: int = 3) -> list[dict]:
    rng = random.Random(seed)
    kinds = ["search", "view", "booking", "cancellation", "competitor_rate", "inventory"]
    out = []
    for i in range(n):
        kind = rng.choice(kinds)
        t = T0 + rng.randrange(0, 20 * DAY_MS, 60_000) if i % 7 else T0 + 5 * DAY_MS  # many share one instant
        stay = f"2026-07-0{1 + i % 3}"
        price = rng.choice([None, 80.0, 120.5, 99.9]) if kind == "view" else None
        out.append({
            "event_id": f"e{i:04d}", "event_type": kind, "event_time": t, "hotel_id": f"h{i % 2}", "room_type": "std",
            "stay_date": stay, "is_search": float(kind == "search"), "is_view": float(kind == "view"),
            "n_booked": 2.0 if kind == "booking" else 0.0, "n_cancelled": 1.0 if kind == "cancellation" else 0.0,
            "tile_price_shown": price, "lead_days": float(rng.randrange(0, 30)) if kind == "search" else None,
            "competitor_id": rng.choice(["c1", "c2", "c3"]) if kind == "competitor_rate" else None,
            "tile_rate": rng.choice([70.0, 90.0, 110.0]) if kind == "competitor_rate" else None,
            "rooms_left": rng.randrange(0, 10) if kind == "inventory" else None,
            "capacity": 10 if kind == "inventory" else None,
            "source_topic": "t", "source_partition": 0, "source_offset": i, "publish_time": t,
        })
    return out


def _frame(events: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(events)
    df["event_time"] = pd.to_datetime(df["event_time"], unit="ms", utc=True)
    return df


def _reference(df: pd.DataFrame, view: str, keys: list[str], key: tuple, t: int) -> dict[str, float | None]:
    window, tile = WINDOWS[view]
    ms = df["event_time"].astype("datetime64[ms, UTC]").astype("int64")
    mine = df[(df[keys] == pd.Series(key, index=keys)).all(axis=1)]
    ms = ms[mine.index]
    w = mine[(ms <= t) & (ms - ms % tile >= t - t % tile - window)].sort_values(["event_time", "event_id"])
    out: dict[str, float | None] = {}
    for f in SPECS[view].features:
        column = {"price_shown": "tile_price_shown", "rate": "tile_rate"}.get(f.column, f.column)
        values = w[column].astype("float64") if f.agg not in ("comp_median", "comp_min") else None
        if f.agg == "sum":
            out[f.name] = float(values.sum())
        elif f.agg in ("mean", "std"):
            present = values.dropna()
            stat = present.mean() if f.agg == "mean" else present.std(ddof=0)
            out[f.name] = None if present.empty else float(stat)
        else:
            latest = w.dropna(subset=["tile_rate"]).groupby("competitor_id")["tile_rate"].last()
            stat = latest.median() if f.agg == "comp_median" else latest.min()
            out[f.name] = None if latest.empty else float(stat)
    return out


@pytest.mark.parametrize("view", ["stay_1h", "stay_24h", "stay_7d", "stay_14d", "hotel_stats"])
def test_asof_rows_equal_pandas_over_the_events_at_or_before_each_time(view: str) -> None:
    df = _frame(_events())
    keys = list(SPECS[view].keys)
    rows = asof_rows(df.sample(frac=1.0, random_state=1), SPECS[view])  # the input's order does not matter
    points = df.assign(ms=df["event_time"].astype("datetime64[ms, UTC]").astype("int64"))[[*keys, "ms"]]
    assert len(rows) == len(points.drop_duplicates())
    bad = 0
    for row in rows.itertuples(index=False):
        t = int(pd.Timestamp(row.event_timestamp).value // 1_000_000)
        want = _reference(df, view, keys, tuple(getattr(row, k) for k in keys), t)
        for name, value in want.items():
            have = getattr(row, name)
            close = value is not None and abs(have - value) <= 1e-9 * max(1, value)
            same = (value is None and np.isnan(have)) or close
            bad += not same
    assert bad == 0


def test_inventory_rows_hold_the_newest_inventory_event_of_each_instant() -> None:
    df = _frame(_events())
    rows = asof_rows(df, SPECS["stay_inventory"])
    inv = df[df["event_type"] == "inventory"].sort_values(["event_time", "event_id"])
    want = inv.groupby(["hotel_id", "room_type", "stay_date", "event_time"])["rooms_left"].last()
    got = rows.set_index(["hotel_id", "room_type", "stay_date", "event_timestamp"])["rooms_left"]
    assert len(got) == len(want) and got.to_numpy().tolist() == want.astype(float).to_numpy().tolist()
    assert (rows["occupancy"] == 1.0 - rows["rooms_left"] / rows["capacity"]).all()


def _files(tmp: Path) -> dict[str, bytes]:
    return {p.relative_to(tmp).as_posix(): p.read_bytes() for p in sorted(asof_root(tmp).rglob(ASOF_FILE))}


def _store(tmp: Path, batches: list[list[dict]]) -> dict[str, bytes]:
    writer = OfflineWriter(tmp)
    for batch in batches:
        writer.write_rows([], events=batch)
    return _files(tmp)


def test_any_order_and_batching_gives_the_same_history_files_and_no_partial_instant(tmp_path: Path) -> None:
    events = _events()
    shuffled_in_day = sorted(events, key=lambda e: (e["event_time"] // DAY_MS, random.Random(e["event_id"]).random()))
    shuffled = random.Random(9).sample(events, len(events))
    tied = [e for e in events if e["event_time"] == T0 + 5 * DAY_MS]
    rest = [e for e in events if e["event_time"] != T0 + 5 * DAY_MS]
    # the instant's events split across two flushes, the second with the rest of history after it
    split = [rest[:200] + tied[: len(tied) // 2], tied[len(tied) // 2:] + rest[200:]]
    runs = {
        "sorted": [sorted(events, key=lambda e: e["event_time"])],
        "shuffled_in_day": [shuffled_in_day[i:i + 200] for i in range(0, len(events), 200)],
        "shuffled": [shuffled[i:i + 150] for i in range(0, len(events), 150)],
        "split": split,
    }
    files = {name: _store(tmp_path / name, batches) for name, batches in runs.items()}
    assert len(files["sorted"]) > 20
    assert all(f == files["sorted"] for f in files.values())
    # each flush recomputed only its keys' rows: a full rebuild changes no byte
    materialise(tmp_path / "shuffled")
    assert _files(tmp_path / "shuffled") == files["sorted"]
    # as of the shared instant, the stay's 24 h searches count every event of it, none left for a later row
    root = tmp_path / "split"
    stay = pd.read_parquet(asof_root(root) / "feast" / "stay_24h")
    at = stay[stay["event_timestamp"] == pd.Timestamp(T0 + 5 * DAY_MS, unit="ms", tz="UTC")]
    df = _frame(read_events(root).to_dict("records"))
    for row in at.itertuples(index=False):
        key = (row.hotel_id, row.room_type, row.stay_date)
        want = _reference(df, "stay_24h", ["hotel_id", "room_type", "stay_date"], key, T0 + 5 * DAY_MS)
        assert row.searches_24h == want["searches_24h"]
    assert len(at) == len({(e["hotel_id"], e["room_type"], e["stay_date"]) for e in tied})
