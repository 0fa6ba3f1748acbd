"""Decision latency in-process vs over HTTP, the feature-read peer (Feast), and memory after N decisions.

Prints p50/p99 (ms) of:

* ``in-process``: ``Scorer.price`` called directly;
* ``http``: ``POST /v1/price`` against uvicorn on 127.0.0.1 (a separate process running
  the same scorer), from an httpx client with a fixed concurrency;
* ``features (ours)`` vs ``features (feast)``: the scorer's feature read
  (:class:`features.online_source.RedisFeatureSource`) against Feast's
  ``FeatureStore.get_online_features`` for the same features and keys on the same Redis
  (a throwaway Feast project whose keys are deleted at the end);

each with its p50 ratio to the in-process decision (features: to our own read). The goal
line compares the whole routed decision's p99 (in-process and over HTTP) with the p99 of
Feast's read alone. Then the process RSS after ``--rss-small`` and ``--rss-large``
decisions (psutil) backs the "memory stays flat" claim.

The features are written with :class:`features.online_writer.OnlineWriter` (all six views per
key); ``--source memory`` swaps in the in-process dict source to show what Redis adds.

Run: ``.venv/bin/python bench/decide.py [--quick] [--requests 2000] [--concurrency 8]
[--redis-url redis://127.0.0.1:6379/0] [--rss-small 10000 --rss-large 1000000 | --skip-rss]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil
from prometheus_client import CollectorRegistry

from events.catalog import ALL_FEATURES, VIEWS
from events.models import CHANNELS, PricingRequest
from features.config import FeaturesConfig
from features.online_source import RedisFeatureSource
from features.online_writer import OnlineWriter, redis_client
from features.rows import FeatureRow
from features.store import build_store
from pricing.feature_source import FeatureSource, MemoryFeatureSource
from pricing.models import DemandModelConfig
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from pricing.synthetic import training_frame
from pricing.tiers import load_pricer
from pricing.training import train_bundle
from routing.router import TieredRouter

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
RULES = Path(__file__).resolve().parents[1] / "pricing" / "rules" / "default.yaml"
QUICK_LIGHT = DemandModelConfig(num_trees=30)
QUICK_HEAVY = DemandModelConfig(n_members=3, num_trees=60, num_leaves=31, bootstrap=True)
ROOM_TYPES = ("std", "double", "suite")


# -- fixtures ------------------------------------------------------------------------------------
def train_bundles(out: Path, *, quick: bool, seed: int = 0) -> tuple[Path, Path]:
    """Train a light and a heavy bundle on the seeded synthetic demand (tier defaults unless ``quick``)."""
    frame = training_frame(3_000 if quick else 20_000, seed=seed)
    light = train_bundle(frame, out / "light", tier="light", seed=seed, config=QUICK_LIGHT if quick else None)
    heavy = train_bundle(frame, out / "heavy", tier="heavy", seed=seed, config=QUICK_HEAVY if quick else None)
    return light.path, heavy.path


def stay_keys(n_hotels: int, *, seed: int = 0) -> list[tuple[str, str, date]]:
    """Stay keys: ``n_hotels`` hotels x room types x 30 arrival nights."""
    del seed
    return [(f"h{h:04d}", room, date(2026, 12, 1) + timedelta(days=d))
            for h in range(n_hotels) for room in ROOM_TYPES for d in range(30)]


def _feature_values(keys: Sequence[tuple[str, str, date]], *, seed: int) -> list[dict[str, float | None]]:
    """Seeded stored features per key: rows of the synthetic training frame (NaN -> None)."""
    frame = training_frame(len(keys), seed=seed + 1)[list(ALL_FEATURES)]
    return [{k: None if v != v else float(v) for k, v in row.items()} for row in frame.to_dict("records")]


def memory_source(keys: Sequence[tuple[str, str, date]], *, seed: int = 0) -> MemoryFeatureSource:
    """Seeded features for every key (rows of the synthetic training frame, a few seconds old)."""
    source = MemoryFeatureSource()
    for (hotel, room, stay), row in zip(keys, _feature_values(keys, seed=seed), strict=True):
        source.put(hotel, room, stay, row, version=1, event_time=T0 - timedelta(seconds=5))
    return source


def feature_rows(keys: Sequence[tuple[str, str, date]], *, seed: int = 0) -> list[FeatureRow]:
    """The same seeded features as :func:`memory_source`, as ``features.v1`` rows of all six views."""
    at_ms = int((T0 - timedelta(seconds=5)).timestamp() * 1000)
    rows, hotels_done = [], set()
    for (hotel, room, stay), values in zip(keys, _feature_values(keys, seed=seed), strict=True):
        for view, (view_keys, names) in VIEWS.items():
            stay_key = "room_type" in view_keys
            if not stay_key and hotel in hotels_done:
                continue
            feats = {n: values[n] for n in names}
            rows.append(FeatureRow(hotel, view, room if stay_key else None, stay.isoformat() if stay_key else None,
                                   at_ms, 1, at_ms, feats))
        hotels_done.add(hotel)
    return rows


def write_features(config: FeaturesConfig, keys: Sequence[tuple[str, str, date]], *, seed: int = 0) -> int:
    """Write the seeded features of ``keys`` to Redis through the online writer; rows written."""
    writer = OnlineWriter(config, registry=CollectorRegistry())
    rows, written = feature_rows(keys, seed=seed), 0
    try:
        for i in range(0, len(rows), 1_000):
            written += writer.write_rows(rows[i : i + 1_000]).written
    finally:
        writer.close()
    return written


def drop_features(config: FeaturesConfig) -> int:
    """Delete the throwaway project's hashes (every Feast key ends with the project name)."""
    client = redis_client(config)
    try:
        stale = list(client.scan_iter(match=b"*" + config.project.encode(), count=1_000))
        if stale:
            client.delete(*stale)
        return len(stale)
    finally:
        client.close()


def make_feature_source(
    keys: Sequence[tuple[str, str, date]], *, config: FeaturesConfig | None, seed: int = 0
) -> FeatureSource:
    """The scorer's feature source: Redis (features already written under ``config``), or memory when ``None``."""
    if config is None:
        return memory_source(keys, seed=seed)
    return RedisFeatureSource(config)


def requests_for(keys: Sequence[tuple[str, str, date]], n: int, *, seed: int = 0) -> list[PricingRequest]:
    """``n`` seeded requests over the keys."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(keys), n)
    channels = rng.integers(0, len(CHANNELS), n)
    nights = rng.integers(1, 5, n)
    return [
        PricingRequest(hotel_id=keys[k][0], room_type=keys[k][1], stay_date=keys[k][2], nights=int(nights[i]),
                       channel=CHANNELS[int(channels[i])], event_time=T0)  # type: ignore[arg-type]
        for i, k in enumerate(picks)
    ]


def build_scorer(bundles: tuple[Path, Path], keys: Sequence[tuple[str, str, date]], *,
                 config: FeaturesConfig | None, seed: int = 0) -> Scorer:
    """The scorer under test: default rules, both tiers, default router thresholds, no audit."""
    return Scorer(ScorerConfig(deadline_ms=50.0), rules=RuleSet.load(RULES),
                  feature_source=make_feature_source(keys, config=config, seed=seed), light=load_pricer(bundles[0]),
                  heavy=load_pricer(bundles[1]), router=TieredRouter())


# -- measurements -----------------------------------------------------------------------------
def timed(fn: Callable[[Any], object], items: Sequence[Any]) -> np.ndarray:
    """Per-call wall time, ms."""
    out = np.empty(len(items))
    for i, item in enumerate(items):
        t0 = time.perf_counter()
        fn(item)
        out[i] = (time.perf_counter() - t0) * 1000.0
    return out


def feast_peer(keys: Sequence[tuple[str, str, date]], config: FeaturesConfig) -> np.ndarray:
    """Per-key latency (ms) of Feast's ``get_online_features`` for the same features, keys and Redis.

    Every stored feature of the six views is asked (what the scorer reads); the first key's
    answer is checked against ours so that both paths do the same work.
    """
    store = build_store(config)
    refs = [f"{view}:{name}" for view, (_, names) in VIEWS.items() for name in names]

    def read(key: tuple[str, str, date]) -> dict[str, Any]:
        row = {"hotel_id": key[0], "room_type": key[1], "stay_date": key[2].isoformat()}
        return store.get_online_features(features=refs, entity_rows=[row]).to_dict()

    ours = RedisFeatureSource(config).read(*keys[0]).values
    theirs = read(keys[0])
    differ = [n for _, (_, names) in VIEWS.items() for n in names if theirs[n][0] != ours[n]]
    if differ:
        msg = f"Feast and RedisFeatureSource disagree on {keys[0]} for {differ[:5]}"
        raise SystemExit(msg)
    timed(read, keys[: min(200, len(keys))])  # warm-up (registry cache, connection)
    return timed(read, keys)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _client(port: int, bodies: Sequence[bytes], concurrency: int) -> np.ndarray:
    out = np.empty(len(bodies))
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(bodies)):
        queue.put_nowait(i)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", limits=limits) as client:

        async def worker() -> None:
            while not queue.empty():
                i = queue.get_nowait()
                t0 = time.perf_counter()
                response = await client.post("/v1/price", content=bodies[i],
                                             headers={"content-type": "application/json"})
                out[i] = (time.perf_counter() - t0) * 1000.0
                if response.status_code != 200:
                    msg = f"status {response.status_code}: {response.text[:200]}"
                    raise RuntimeError(msg)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


def over_http(bundles: tuple[Path, Path], n_hotels: int, requests: Sequence[PricingRequest], *,
              concurrency: int, seed: int, config: FeaturesConfig | None) -> tuple[np.ndarray, float]:
    """Latencies (ms) and throughput (req/s) against a uvicorn child process serving the same scorer."""
    port = _free_port()
    cmd = [sys.executable, __file__, "--serve", str(port), "--light", str(bundles[0]), "--heavy", str(bundles[1]),
           "--hotels", str(n_hotels), "--seed", str(seed)]
    if config is not None:
        cmd += ["--redis-url", config.redis_url, "--project", config.project, "--state", str(config.state_dir)]
    else:
        cmd += ["--source", "memory"]
    server = subprocess.Popen(cmd)
    try:
        deadline = time.monotonic() + 120.0
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        bodies = [r.model_dump_json().encode() for r in requests]
        asyncio.run(_client(port, bodies[: min(200, len(bodies))], concurrency))  # warm-up
        t0 = time.perf_counter()
        latencies = asyncio.run(_client(port, bodies, concurrency))
        return latencies, len(bodies) / (time.perf_counter() - t0)
    finally:
        server.terminate()
        server.wait(timeout=30)


def serve(port: int, bundles: tuple[Path, Path], n_hotels: int, seed: int, config: FeaturesConfig | None) -> None:
    """Child-process mode: serve the benchmark scorer with uvicorn on 127.0.0.1."""
    import uvicorn

    from pricing.service import create_app

    scorer = build_scorer(bundles, stay_keys(n_hotels, seed=seed), config=config, seed=seed)
    uvicorn.run(create_app(scorer), host="127.0.0.1", port=port, log_level="warning", access_log=False)


def rss_after(scorer: Scorer, requests: Sequence[PricingRequest], counts: Sequence[int]) -> list[tuple[int, float]]:
    """Process RSS (MiB) after each cumulative count of decisions (requests are cycled)."""
    proc, done, out = psutil.Process(), 0, []
    for target in sorted(counts):
        while done < target:
            scorer.price(requests[done % len(requests)])
            done += 1
        gc.collect()
        out.append((target, proc.memory_info().rss / 2**20))
    return out


def _tier_counts(scorer: Scorer) -> dict[str, int]:
    return {t: int(scorer.stats.value("pricestream_decisions_total", tier=t)) for t in ("rules", "light", "heavy")}


# -- report ---------------------------------------------------------------------------------------
def _row(name: str, ms: np.ndarray, ref: float | None) -> str:
    p50, p99 = np.percentile(ms, [50, 99])
    ratio = f"{p50 / ref:8.2f}x" if ref else f"{'':>9}"
    return f"{name:<26}{len(ms):>8}{p50:>11.3f}{p99:>11.3f}{ratio:>10}"


def _p99(ms: np.ndarray) -> float:
    return float(np.percentile(ms, 99))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=2_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--hotels", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="small models (fast to train)")
    parser.add_argument("--source", choices=("redis", "memory"), default="redis")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--rss-small", type=int, default=10_000)
    parser.add_argument("--rss-large", type=int, default=1_000_000)
    parser.add_argument("--skip-rss", action="store_true")
    parser.add_argument("--rss-only", action="store_true", help="skip the latency tables")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--light", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--heavy", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--project", help=argparse.SUPPRESS)
    parser.add_argument("--state", type=Path, help=argparse.SUPPRESS)
    return parser


def latency_report(scorer: Scorer, bundles: tuple[Path, Path], requests: Sequence[PricingRequest],
                   config: FeaturesConfig | None, args: argparse.Namespace) -> None:
    """Print the latency table and the goal line (decision p99 vs Feast's read p99)."""
    timed(scorer.price, requests[: min(500, len(requests))])  # warm-up
    before = _tier_counts(scorer)
    local = timed(scorer.price, requests)
    shares = {t: n - before[t] for t, n in _tier_counts(scorer).items()}
    http, rps = over_http(bundles, args.hotels, requests, concurrency=args.concurrency, seed=args.seed,
                          config=config)
    read_keys = [(r.hotel_id, r.room_type, r.stay_date) for r in requests]
    ours = timed(lambda k: scorer.feature_source.read(*k), read_keys)
    ref = float(np.percentile(local, 50))
    print(f"{'path':<26}{'n':>8}{'p50 ms':>11}{'p99 ms':>11}{'p50 ratio':>10}")
    print(_row("in-process decision", local, None))
    print(_row(f"http decision (c={args.concurrency})", http, ref))
    print(_row(f"features (ours, {args.source})", ours, None))
    if config is not None:
        feast = feast_peer(read_keys, config)
        print(_row("features (feast)", feast, float(np.percentile(ours, 50))))
        print(f"goal: routed decision p99 / Feast read p99 = in-process {_p99(local) / _p99(feast):.2f}, "
              f"http c={args.concurrency} {_p99(http) / _p99(feast):.2f} (<= 1 meets it)")
    print(f"http throughput {rps:,.0f} req/s; in-process decisions by tier {shares}")


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.serve:
        child = None if args.source == "memory" else FeaturesConfig(
            project=args.project, state_dir=args.state, redis_url=args.redis_url)
        serve(args.serve, (args.light, args.heavy), args.hotels, args.seed, child)
        return
    with tempfile.TemporaryDirectory() as tmp:
        config = None
        if args.source == "redis":
            config = FeaturesConfig(project=f"bench{uuid.uuid4().hex[:8]}", state_dir=Path(tmp),
                                    redis_url=args.redis_url)
        keys = stay_keys(args.hotels, seed=args.seed)
        try:
            if config is not None:
                write_features(config, keys, seed=args.seed)
            bundles = train_bundles(Path(tmp), quick=args.quick, seed=args.seed)
            scorer = build_scorer(bundles, keys, config=config, seed=args.seed)
            requests = requests_for(keys, args.requests, seed=args.seed)
            if not args.rss_only:
                latency_report(scorer, bundles, requests, config, args)
            if not args.skip_rss:
                (n1, r1), (n2, r2) = rss_after(scorer, requests, [args.rss_small, args.rss_large])
                print(f"RSS after {n1:,} decisions {r1:.1f} MiB; after {n2:,} {r2:.1f} MiB; ratio {r2 / r1:.3f}")
        finally:
            if config is not None:
                drop_features(config)


if __name__ == "__main__":
    main()
