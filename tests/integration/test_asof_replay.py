"""Point-in-time history after any replay, snapshots over it, raw events for analysts, isolation by prefix.

2,312 simulated events of 3 hotels and 916 stay keys over 21 days (3,000 sampled, those less than a
day before their stay left out; every event type; one in ten shares its instant with the event
before it) go through ``pricestream jobs backfill features`` three times, each under its own topic
prefix and state directory: sorted, shuffled within each day, and shuffled across the whole span;
then ``pricestream features write-offline`` keeps the accepted events and their history. For each
replay:

* every as-of row of every view (one per key and event time) equals pandas over the events at or
  before that time (the catalogue's windows, restated here), and there is one row per (key, time):
  no partial instant;
* ``snapshot create --as-of T`` gives the same snapshot id (content hash) in all three replays, and
  ``--entities FILE`` returns the pandas values as of each entity's time;
* DuckDB's ``events`` table gives bookings and mean price paid per hotel equal to pandas, and the
  job's columns of each event equal those the in-process drivers compute (:mod:`features.replay`);
* the job's transactional ids on the broker carry the replay's prefix, and no two replays share one.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from events.catalog import DAY_MS, HOUR_MS, MINUTE_MS, SPECS
from events.config import KafkaConfig
from events.models import dumps, parse_event
from features.analytics import query
from features.history import asof_root
from features.raw_events import read_events
from features.replay import events_frame
from features.snapshots import load_snapshot
from infra.config import StackConfig
from infra.prereqs import java
from market import Market, MarketConfig, simulate
from tests.integration.flink_helpers import make_topics, read_all

pytestmark = [pytest.mark.integration, pytest.mark.flink]

START = datetime(2026, 11, 1, tzinfo=UTC)
STRETCH = 8  # 2.6 simulated days spread over three weeks: the 14-day window and day shuffles bite
WINDOWS = {"stay_1h": (HOUR_MS, 5 * MINUTE_MS), "stay_24h": (DAY_MS, HOUR_MS), "stay_7d": (7 * DAY_MS, HOUR_MS),
           "stay_14d": (14 * DAY_MS, DAY_MS), "hotel_stats": (DAY_MS, HOUR_MS)}
COLUMNS = {"is_search": "search", "is_view": "view"}
PRICE_RANGE = (5.0, 1000.0)


def _events() -> list[dict]:
    market = Market(MarketConfig(hotels=3, seed=11, start=START))
    stream = [json.loads(dumps(e)) for e in simulate(market, start=START, duration=timedelta(days=40),
                                                      max_events=12_000, rng_seed=11)]
    rng = random.Random(4)
    t0 = int(START.timestamp() * 1000)
    out = []
    for e in sorted(rng.sample(stream, 3000), key=lambda e: e["event_time"]):
        e["event_time"] = t0 + (e["event_time"] - t0) * STRETCH
        if out and len(out) % 10 == 0:
            e["event_time"] = out[-1]["event_time"]  # an instant shared with the event before
        stay_ms = int(datetime.fromisoformat(e["stay_date"]).replace(tzinfo=UTC).timestamp() * 1000)
        if e["event_time"] <= stay_ms - DAY_MS:  # still before the stay in every time zone
            out.append(e)
    return out


def _frame(events: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(events)
    df["t"] = df["event_time"].astype("int64")
    ok = lambda col: df[col].where(df[col].between(*PRICE_RANGE))  # noqa: E731
    df["price_ok"], df["rate_ok"] = ok("price_shown"), ok("rate")
    rooms = df["rooms"].fillna(1)
    for column, kind in COLUMNS.items():
        df[column] = (df["event_type"] == kind).astype(float)
    df["n_booked"] = np.where(df["event_type"] == "booking", rooms, 0.0)
    df["n_cancelled"] = np.where(df["event_type"] == "cancellation", rooms, 0.0)
    stay_ms = pd.to_datetime(df["stay_date"]).astype("int64") // 1_000_000
    df["lead_days"] = np.trunc((stay_ms - df["t"]) / DAY_MS).where(df["event_type"] == "search")
    return df


def reference(df: pd.DataFrame, view: str) -> pd.DataFrame:
    """The view's values at every (key, event time), by a join of each point with its key's events."""
    keys = list(SPECS[view].keys)
    window, tile = WINDOWS[view]
    points = df[[*keys, "t"]].drop_duplicates().rename(columns={"t": "at"})
    m = points.merge(df, on=keys)
    m = m[(m["t"] <= m["at"]) & (m["t"] - m["t"] % tile >= m["at"] - m["at"] % tile - window)]
    g = m.groupby([*keys, "at"])
    out = pd.DataFrame(index=g.size().index)
    for f in SPECS[view].features:
        column = {"price_shown": "price_ok", "rate": "rate_ok"}.get(f.column, f.column)
        if f.agg == "sum":
            out[f.name] = g[column].sum()
        elif f.agg == "mean":
            out[f.name] = g[column].mean()
        elif f.agg == "std":
            out[f.name] = g[column].std(ddof=0)
        else:
            rates = m.dropna(subset=["rate_ok"]).sort_values(["t", "event_id"])
            latest = rates.groupby([*keys, "at", "competitor_id"])["rate_ok"].last().groupby([*keys, "at"])
            out[f.name] = latest.median() if f.agg == "comp_median" else latest.min()
    return out


def _mismatches(got: pd.DataFrame, want: pd.DataFrame, names: list[str]) -> int:
    a, b = got[names].to_numpy(dtype=float), want.loc[got.index, names].to_numpy(dtype=float)
    same = np.isclose(a, b, rtol=1e-9, atol=1e-9) | (np.isnan(a) & np.isnan(b))
    return int((~same).sum())


def _cli(env: dict[str, str], *argv: str) -> str:
    exe = str(Path(sys.executable).with_name("pricestream"))
    done = subprocess.run([exe, *argv], env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, f"{argv}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done.stdout + done.stderr


def _replay(stack: StackConfig, tmp: Path, name: str, events: list[dict], entities: Path) -> dict:
    kafka = KafkaConfig(bootstrap_servers=stack.kafka_bootstrap, topic_prefix=f"ao{uuid.uuid4().hex[:6]}-")
    make_topics(kafka)
    history = tmp / f"{name}.jsonl"
    history.write_text("".join(json.dumps(e) + "\n" for e in events))
    env = {**os.environ, "PRICESTREAM_TOPIC_PREFIX": kafka.topic_prefix, "PRICESTREAM_STATE_DIR": str(tmp / name)}
    text = _cli(env, "jobs", "backfill", "features", str(history))
    source = re.search(r"published [\d,]+ records to (\S+)", text).group(1)  # type: ignore[union-attr]
    dead = read_all(kafka, source.removeprefix(kafka.topic_prefix) + ".dlq", idle_polls=2)
    _cli(env, "features", "write-offline", "--max-idle", "3")
    as_of = datetime.fromtimestamp(max(e["event_time"] for e in events) / 1000 + 1, tz=UTC).isoformat()
    ids = [re.search(r"snapshot (\w+):", _cli(env, "snapshot", "create", "--as-of", as_of, *extra)).group(1)
           for extra in ([], ["--entities", str(entities)])]  # type: ignore[union-attr]
    offline = tmp / name / "data" / "offline"
    return {"prefix": kafka.topic_prefix, "dead": len(dead), "offline": offline, "ids": ids,
            "snapshots": tmp / name / "data" / "snapshots"}


def _transactional_ids(stack: StackConfig) -> list[str]:
    jars = stack.jar_dir("kafka")
    done = subprocess.run([java(stack.java_home), "-cp", f"{jars}/*", "org.apache.kafka.tools.TransactionsCommand",
                           "--bootstrap-server", stack.kafka_bootstrap, "list"],
                          capture_output=True, text=True, timeout=120, check=True)
    return [line.split()[0] for line in done.stdout.splitlines()[1:] if line.strip()]


def test_any_replay_gives_the_pandas_history_the_same_snapshot_and_the_raw_events(
        stack: StackConfig, tmp_path: Path) -> None:
    events = _events()
    rng = random.Random(8)
    by_day = sorted(events, key=lambda e: (e["event_time"] // DAY_MS, rng.random()))
    orders = {"sorted": events, "shuffled_in_day": by_day, "shuffled": random.Random(9).sample(events, len(events))}
    df = _frame(events)
    picks = df.sample(40, random_state=2)
    entities = tmp_path / "entities.csv"
    pd.DataFrame({"hotel_id": picks["hotel_id"], "room_type": picks["room_type"], "stay_date": picks["stay_date"],
                  "event_timestamp": pd.to_datetime(picks["t"] + 1, unit="ms", utc=True)}).to_csv(entities, index=False)
    runs = {name: _replay(stack, tmp_path, name, order, entities) for name, order in orders.items()}

    want = {view: reference(df, view) for view in WINDOWS}
    for name, run in runs.items():
        assert run["dead"] == 0, name
        for view, expected in want.items():
            keys = list(SPECS[view].keys)
            got = pd.read_parquet(asof_root(run["offline"]) / "feast" / view)
            got["at"] = got["event_timestamp"].astype("datetime64[ms, UTC]").astype("int64")
            got = got.set_index([*keys, "at"])
            assert got.index.is_unique and len(got) == len(expected), (name, view)
            assert _mismatches(got, expected, [f.name for f in SPECS[view].features]) == 0, (name, view)
    assert len({tuple(run["ids"]) for run in runs.values()}) == 1  # the same content hash after every replay

    # --entities: the values as of each entity's time (its event + 1 ms)
    run = runs["shuffled"]
    frame = load_snapshot(run["snapshots"], run["ids"][1])
    frame["at"] = frame["event_timestamp"].astype("datetime64[ms, UTC]").astype("int64") - 1
    stay = ["hotel_id", "room_type", "stay_date"]
    for view in ("stay_1h", "stay_24h", "stay_7d", "stay_14d"):
        names = [f.name for f in SPECS[view].features]
        assert _mismatches(frame.set_index([*stay, "at"]), want[view], names) == 0, view
    hotel = frame.set_index(["hotel_id", "at"])
    assert _mismatches(hotel, want["hotel_stats"], [f.name for f in SPECS["hotel_stats"].features]) == 0

    # the analysts' raw events: bookings and mean price paid per hotel
    sql = ("SELECT hotel_id, count(*) AS bookings, avg(price_paid) AS mean_price_paid FROM events "
           "WHERE event_type = 'booking' GROUP BY hotel_id ORDER BY hotel_id")
    got_sql = query(sql, engine="duckdb", offline_root=run["offline"]).frame.set_index("hotel_id")
    booked = df[df["event_type"] == "booking"].groupby("hotel_id")
    assert got_sql["bookings"].to_dict() == booked.size().to_dict()
    assert np.allclose(got_sql["mean_price_paid"], booked["price_paid"].mean().loc[got_sql.index], rtol=1e-12)
    assert got_sql["bookings"].sum() > 10

    # the in-process drivers' columns (features.replay, for training frames and benchmarks) are the job's
    stored = read_events(run["offline"]).set_index("event_id").sort_index()
    mine = events_frame(parse_event(e) for e in events).set_index("event_id").sort_index()
    columns = ["is_search", "is_view", "n_booked", "n_cancelled", "lead_days", "tile_price_shown", "tile_rate"]
    assert len(stored) == len(events)
    assert _mismatches(mine, stored, columns) == 0

    # isolation: every replay's transactional ids carry its prefix, and none is another's
    ids = _transactional_ids(stack)
    mine = {name: {t for t in ids if t.startswith(run["prefix"])} for name, run in runs.items()}
    assert all(mine.values())
    assert not set.intersection(*mine.values())
