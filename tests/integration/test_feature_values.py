"""Every served feature of every key equals an independent pandas computation of the documented windows.

50,000 simulator events (every event type, 4 hotels, 1,535 stay keys over 8.6 days) through the
real job, the online writer and Feast. The reference below does not use the tiles module: it
applies the semantics stated in :mod:`events.catalog` to the raw events with pandas. A second
run publishes the same events shuffled within 2.5 days (allowed lateness 3 days) and must serve the
same values.
"""

from __future__ import annotations

import json
import random
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from events.catalog import DAY_MS, HOUR_MS, MINUTE_MS, VIEWS
from events.config import KafkaConfig
from events.models import dumps
from features.config import FeaturesConfig
from features.online_writer import OnlineWriter
from features.rows import parse_row
from features.store import build_store
from infra.config import StackConfig
from market import Market, MarketConfig, simulate
from pipelines.config import FeatureJobConfig, OnlineSink
from pipelines.feature_job import run
from tests.integration._features_helpers import drop_project_keys
from tests.integration.flink_helpers import make_topics, read_all

pytestmark = [pytest.mark.integration, pytest.mark.flink]

START = datetime(2026, 11, 1, tzinfo=UTC)
N_EVENTS = 50_000
PRICE_RANGE = (5.0, 1000.0)  # the contract's default range: prices outside it are kept out of price features
# view -> (window, tile) as the catalogue documents them (restated here, not imported, on purpose)
WINDOWS = {"stay_1h": (HOUR_MS, 5 * MINUTE_MS), "stay_24h": (DAY_MS, HOUR_MS), "stay_7d": (7 * DAY_MS, HOUR_MS),
           "stay_14d": (14 * DAY_MS, DAY_MS), "hotel_stats": (DAY_MS, HOUR_MS)}
STAY = ["hotel_id", "room_type", "stay_date"]


def _events() -> list[dict]:
    market = Market(MarketConfig(hotels=4, seed=7, start=START))
    stream = simulate(market, start=START, duration=timedelta(days=365), max_events=N_EVENTS, rng_seed=7)
    return [json.loads(dumps(e)) for e in stream]


def _frame(events: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(events)
    df["t"] = df["event_time"].astype("int64")
    df["offset"] = np.arange(len(df))  # publish order, as the tie-break of equal event times
    ok = lambda col: df[col].where((df[col] >= PRICE_RANGE[0]) & (df[col] <= PRICE_RANGE[1]))  # noqa: E731
    df["price_ok"], df["rate_ok"] = ok("price_shown"), ok("rate")
    df["rooms"] = df["rooms"].fillna(1)
    df["is_search"] = (df["event_type"] == "search").astype(float)
    df["is_view"] = (df["event_type"] == "view").astype(float)
    df["n_booked"] = np.where(df["event_type"] == "booking", df["rooms"], 0.0)
    df["n_cancelled"] = np.where(df["event_type"] == "cancellation", df["rooms"], 0.0)
    stay_ms = pd.to_datetime(df["stay_date"]).astype("int64") // 1_000_000
    lead = np.trunc((stay_ms - df["t"]) / DAY_MS)  # whole days, truncated towards zero (TIMESTAMPDIFF)
    df["lead_days"] = lead.where(df["event_type"] == "search")
    return df


def _in_window(df: pd.DataFrame, keys: list[str], view: str) -> pd.DataFrame:
    """The events of each key in its window as of the key's newest event: tile start >= floor(anchor) - window."""
    window, tile = WINDOWS[view]
    anchor = df.groupby(keys)["t"].transform("max")
    return df[df["t"] - df["t"] % tile >= anchor - anchor % tile - window]


def _competitors(w: pd.DataFrame, keys: list[str], suffix: str) -> pd.DataFrame:
    rates = w[w["rate_ok"].notna()].sort_values(["t", "offset"]).groupby([*keys, "competitor_id"])["rate_ok"].last()
    by_key = rates.groupby(level=list(range(len(keys))))
    return pd.DataFrame({f"comp_rate_median_{suffix}": by_key.median(), f"comp_rate_min_{suffix}": by_key.min()})


def reference(events: list[dict]) -> dict[tuple, dict[str, float | None]]:
    """Every stored feature of every stay key, from the raw events."""
    df = _frame(events)
    parts = []
    for view, suffix in (("stay_1h", "1h"), ("stay_24h", "24h"), ("stay_7d", "7d"), ("stay_14d", "14d")):
        g = _in_window(df, STAY, view).groupby(STAY)
        columns = {"searches": "is_search", "views": "is_view", "bookings": "n_booked", "cancellations": "n_cancelled"}
        out = pd.DataFrame({f"{name}_{suffix}": g[col].sum() for name, col in columns.items()})
        if view == "stay_24h":
            out["mean_price_shown_24h"] = g["price_ok"].mean()
            out = out.join(_competitors(_in_window(df, STAY, view), STAY, "24h"))
        if view == "stay_7d":
            out["lead_time_mean_days_7d"] = g["lead_days"].mean()
            out["lead_time_std_days_7d"] = g["lead_days"].std(ddof=0)
        parts.append(out[[c for c in out.columns if c in VIEWS[view][1]]])
    inventory = df[df["event_type"] == "inventory"].sort_values(["t", "offset"]).groupby(STAY).last()
    inv = pd.DataFrame({"rooms_left": inventory["rooms_left"].astype(float),
                        "capacity": inventory["capacity"].astype(float)})
    inv["occupancy"] = 1.0 - inv["rooms_left"] / inv["capacity"]
    hotel_g = _in_window(df, ["hotel_id"], "hotel_stats").groupby("hotel_id")
    hotel = pd.DataFrame({"hotel_searches_24h": hotel_g["is_search"].sum(),
                          "hotel_bookings_24h": hotel_g["n_booked"].sum(), "hotel_views_24h": hotel_g["is_view"].sum()})
    stay = pd.concat(parts, axis=1).join(inv, how="outer")
    out: dict[tuple, dict[str, float | None]] = {}
    for key, row in stay.iterrows():
        values = {k: (None if pd.isna(v) else float(v)) for k, v in row.items()}
        values.update({k: float(v) for k, v in hotel.loc[key[0]].items()})
        out[tuple(key)] = values
    return out


def served(stack: StackConfig, tmp_path: Path, events: list[dict], *, shuffle_days: float = 0.0,
           job_writes_redis: bool = False) -> dict[tuple, dict]:
    """Publish ``events`` (optionally shuffled), run the job bounded, read every key from Feast.

    The values reach Redis through the Python online writer (from ``features.v1``) or, with
    ``job_writes_redis``, through the job's own sink (``RedisFeatureSink.java``).
    """
    kafka = KafkaConfig(bootstrap_servers=stack.kafka_bootstrap, topic_prefix=f"fv{uuid.uuid4().hex[:8]}-")
    make_topics(kafka, partitions=2)
    order = list(events)
    if shuffle_days:
        rng = random.Random(13)
        order.sort(key=lambda e: e["event_time"] + rng.uniform(0, shuffle_days * DAY_MS))
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for e in order:
        producer.produce(kafka.topic("behaviour.events"), json.dumps(e).encode(), e["hotel_id"].encode())
        producer.poll(0)
    assert producer.flush(60) == 0
    fconfig = FeaturesConfig(project=f"fv{uuid.uuid4().hex[:8]}", state_dir=tmp_path, redis_url=stack.redis_url)
    online = OnlineSink(redis_url=stack.redis_url, project=fconfig.project) if job_writes_redis else None
    config = FeatureJobConfig(bootstrap_servers=stack.kafka_bootstrap, topic_prefix=kafka.topic_prefix,
                              connector_jar=stack.flink_kafka_connector_jar, bounded=True, startup="earliest-offset",
                              allowed_lateness_ms=3 * DAY_MS, checkpoint_dir=tmp_path / f"chk-{kafka.topic_prefix}",
                              group_id=f"fv-{uuid.uuid4().hex[:6]}", online=online)
    store = build_store(fconfig, ttl_on_read=False)  # the events are of November 2026: windows, not TTLs, here
    try:
        run(config)
        assert read_all(kafka, "behaviour.events.dlq", idle_polls=3) == []
        if not job_writes_redis:
            rows = [parse_row(m.value()) for m in read_all(kafka, "features.v1")]
            writer = OnlineWriter(fconfig)
            for start in range(0, len(rows), 2000):  # the writer's batches, in topic order
                writer.write_rows(rows[start:start + 2000])
        keys = sorted({(e["hotel_id"], e["room_type"], e["stay_date"]) for e in events})
        refs = [f"{v}:{n}" for v, (_, names) in VIEWS.items() for n in names]
        table = store.get_online_features(refs, [dict(zip(STAY, k, strict=True)) for k in keys]).to_dict()
        return {k: {n.split("__")[-1]: table[n][i] for n in table if n not in STAY} for i, k in enumerate(keys)}
    finally:
        drop_project_keys(fconfig)


@pytest.fixture(scope="module")
def runs(stack: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict, dict]:
    events = _events()
    tmp = tmp_path_factory.mktemp("fv")
    # the sorted replay through the Python writer, the shuffled one through the job's own Redis sink
    return reference(events), served(stack, tmp, events), served(stack, tmp, events, shuffle_days=2.5,
                                                                   job_writes_redis=True)


def _mismatches(got: dict[tuple, dict], want: dict[tuple, dict]) -> list:
    bad = []
    for key, expected in want.items():
        for name, value in expected.items():
            have = got[key][name]
            same = have == value if value is None or have is None else abs(have - value) <= 1e-9 * max(1, abs(value))
            if not same:
                bad.append((key, name, have, value))
    return bad


def test_every_served_value_of_every_key_equals_pandas(runs: tuple) -> None:
    want, got, _ = runs
    assert len(want) == 1535 and set(got) == set(want)
    assert sum(v["comp_rate_median_24h"] is not None for v in want.values()) > 100  # the reference is not empty
    bad = _mismatches(got, want)
    assert bad[:10] == [] and len(bad) == 0


def test_events_shuffled_within_the_lateness_serve_the_same_values(runs: tuple) -> None:
    """Shuffled within the lateness and written by the job's own sink: the same values as the sorted replay
    written by the Python writer (so the two writers lay Redis out alike), and as pandas."""
    want, sorted_run, shuffled_run = runs
    assert set(shuffled_run) == set(want)
    bad = _mismatches(shuffled_run, sorted_run) + _mismatches(shuffled_run, want)
    assert bad[:10] == [] and len(bad) == 0
