"""Decision latency in-process vs over HTTP, the feature-read peer (Feast), and memory after N decisions.

Prints p50/p99 (ms) of:

* ``in-process``: ``Scorer.price`` called directly;
* ``http``: ``POST /v1/price`` against uvicorn on 127.0.0.1 (a separate process running
  the same scorer), from an httpx client with a fixed concurrency;
* ``features (ours)`` vs ``features (feast)``: the scorer's feature read against Feast's
  ``get_online_features`` for the same keys (see :func:`feast_peer`; the lead wires it);

each with its p50 ratio to the in-process decision (features: to our own read), and then
the process RSS after ``--rss-small`` and ``--rss-large`` decisions (psutil) to back the
"memory stays flat" claim.

Run: ``.venv/bin/python bench/decide.py [--quick] [--requests 2000] [--concurrency 8]
[--rss-small 10000 --rss-large 1000000 | --skip-rss]``
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
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil

from events.catalog import ALL_FEATURES
from events.models import CHANNELS, PricingRequest
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


def memory_source(keys: Sequence[tuple[str, str, date]], *, seed: int = 0) -> MemoryFeatureSource:
    """Seeded features for every key (rows of the synthetic training frame, a few seconds old)."""
    frame = training_frame(len(keys), seed=seed + 1)
    source = MemoryFeatureSource()
    for (hotel, room, stay), row in zip(keys, frame[list(ALL_FEATURES)].to_dict("records"), strict=True):
        source.put(hotel, room, stay, row, version=1, event_time=T0 - timedelta(seconds=5))
    return source


def make_feature_source(keys: Sequence[tuple[str, str, date]], *, seed: int = 0) -> FeatureSource:
    """The scorer's feature source for the run. LEAD: swap in the Redis-backed source here."""
    return memory_source(keys, seed=seed)


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


def build_scorer(bundles: tuple[Path, Path], keys: Sequence[tuple[str, str, date]], *, seed: int = 0) -> Scorer:
    """The scorer under test: default rules, both tiers, default router thresholds, no audit."""
    return Scorer(ScorerConfig(deadline_ms=50.0), rules=RuleSet.load(RULES),
                  feature_source=make_feature_source(keys, seed=seed), light=load_pricer(bundles[0]),
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


def feast_peer(keys: Sequence[tuple[str, str, date]]) -> np.ndarray | None:
    """LEAD: per-key latency (ms) of Feast's ``get_online_features`` for the same features.

    Fill in with the repo in ``features/``: ``store = FeatureStore(repo_path=...)``, then time
    ``store.get_online_features(features=[f"{view}:{name}" ...], entity_rows=[{"hotel_id": h,
    "room_type": r, "stay_date": s}]).to_dict()`` once per key (same keys as our read).
    Returns ``None`` while not wired; the table then says so.
    """
    del keys
    return None


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
              concurrency: int, seed: int) -> tuple[np.ndarray, float]:
    """Latencies (ms) and throughput (req/s) against a uvicorn child process serving the same scorer."""
    port = _free_port()
    cmd = [sys.executable, __file__, "--serve", str(port), "--light", str(bundles[0]), "--heavy", str(bundles[1]),
           "--hotels", str(n_hotels), "--seed", str(seed)]
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


def serve(port: int, bundles: tuple[Path, Path], n_hotels: int, seed: int) -> None:
    """Child-process mode: serve the benchmark scorer with uvicorn on 127.0.0.1."""
    import uvicorn

    from pricing.service import create_app

    scorer = build_scorer(bundles, stay_keys(n_hotels, seed=seed), seed=seed)
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
def _row(name: str, ms: np.ndarray | None, ref: float | None) -> str:
    if ms is None:
        return f"{name:<26}{'not wired (see feast_peer)':>40}"
    p50, p99 = np.percentile(ms, [50, 99])
    ratio = f"{p50 / ref:8.2f}x" if ref else f"{'':>9}"
    return f"{name:<26}{len(ms):>8}{p50:>11.3f}{p99:>11.3f}{ratio:>10}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=2_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--hotels", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="small models (fast to train)")
    parser.add_argument("--rss-small", type=int, default=10_000)
    parser.add_argument("--rss-large", type=int, default=1_000_000)
    parser.add_argument("--skip-rss", action="store_true")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--light", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--heavy", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve, (args.light, args.heavy), args.hotels, args.seed)
        return
    with tempfile.TemporaryDirectory() as tmp:
        bundles = train_bundles(Path(tmp), quick=args.quick, seed=args.seed)
        keys = stay_keys(args.hotels, seed=args.seed)
        scorer = build_scorer(bundles, keys, seed=args.seed)
        requests = requests_for(keys, args.requests, seed=args.seed)
        timed(scorer.price, requests[: min(500, len(requests))])  # warm-up
        before = _tier_counts(scorer)
        local = timed(scorer.price, requests)
        shares = {t: n - before[t] for t, n in _tier_counts(scorer).items()}
        http, rps = over_http(bundles, args.hotels, requests, concurrency=args.concurrency, seed=args.seed)
        read_keys = [(r.hotel_id, r.room_type, r.stay_date) for r in requests]
        ours = timed(lambda k: scorer.feature_source.read(*k), read_keys)
        feast = feast_peer(read_keys)
        ref = float(np.percentile(local, 50))
        print(f"{'path':<26}{'n':>8}{'p50 ms':>11}{'p99 ms':>11}{'p50 ratio':>10}")
        print(_row("in-process decision", local, None))
        print(_row(f"http decision (c={args.concurrency})", http, ref))
        print(_row("features (ours)", ours, None))
        print(_row("features (feast)", feast, float(np.percentile(ours, 50))))
        print(f"http throughput {rps:,.0f} req/s; in-process decisions by tier {shares}")
        if not args.skip_rss:
            (n1, r1), (n2, r2) = rss_after(scorer, requests, [args.rss_small, args.rss_large])
            print(f"RSS after {n1:,} decisions {r1:.1f} MiB; after {n2:,} {r2:.1f} MiB; ratio {r2 / r1:.3f}")


if __name__ == "__main__":
    main()
