"""Decision latency against Feast's feature read, in-process and over HTTP, and memory after N decisions.

One process, one Redis, one set of stored features (all six views per key, written with
:class:`features.online_writer.OnlineWriter` under a throwaway Feast project whose keys are
deleted at the end), one seeded request list. Warm-up calls are excluded everywhere.

In-process (concurrency 1): for every request, four paths take turns, their order rotating
from one request to the next, so that each sees the same moments of host load:

* ``decision (routed)``: ``Scorer.price`` with the default router thresholds, feature read
  from Redis included (the whole routed decision);
* ``decision (calibrated)``: the same, with the router calibrated to the default target
  shares (35% rules, 50% light, 15% heavy) on 2,000 of the requests: the clean seeded
  features send almost nothing to the heavy tier under the default thresholds;
* ``decision (heavy)``: the same pricers and Redis, with thresholds that send everything to
  the heavy tier (feature read, rules, light quote for its uncertainty, heavy quote);
* ``features (ours)``: :class:`features.online_source.RedisFeatureSource` alone;
* ``features (feast)``: ``FeatureStore.get_online_features`` for the same features and keys.

Over HTTP (fixed concurrency ``--concurrency``, httpx client, uvicorn servers in child
processes): ``POST /v1/price`` of our service, and Feast's own feature server
(``feast.feature_server.get_app``, ``POST /get-online-features``) on the same Redis, in
alternating chunks of requests at the same concurrency.

Printed: p50/p99/p999 (ms) per path and each one's p99 ratio to Feast's in-process read p99
(the goal: a whole routed decision no slower than Feast's read alone, ratio <= 1.0), the HTTP
decision's ratio to Feast's HTTP read, the share per tier, and the load average before and
after each part. Then (unless ``--skip-rss``) the process RSS after each count of
``--rss-at`` decisions, with a progress line every ``--progress`` decisions.

Run: ``.venv/bin/python bench/decide.py [--quick] [--requests 2000] [--concurrency 8]
[--redis-url redis://127.0.0.1:6379/0] [--rss-at 10000,100000,500000,1000000 | --skip-rss] [--rss-only]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil
from scoring_fixtures import build_scorer, drop_features, requests_for, stay_keys, train_bundles, write_features

from audit.log import AuditLog
from events.catalog import VIEWS
from events.models import PricingRequest
from features.config import FeaturesConfig
from features.online_source import RedisFeatureSource
from features.store import build_store
from pricing.scorer import Scorer
from routing.calibration import DEFAULT_SHARES, MIN_CALIBRATION_SAMPLES, Thresholds
from routing.router import TieredRouter

ALL_HEAVY = Thresholds(rules_below=0.0, heavy_above=0.0)
"""Router thresholds that send every request that the rules do not settle to the heavy tier."""


# -- measurements -----------------------------------------------------------------------------
Path_ = Callable[[PricingRequest], object]


def taking_turns(paths: dict[str, Path_], requests: Sequence[PricingRequest]) -> dict[str, np.ndarray]:
    """Per-call wall time (ms) of every path on every request; the paths take turns, in a rotating order."""
    names = list(paths)
    out = {name: np.empty(len(requests)) for name in names}
    for i, request in enumerate(requests):
        k = i % len(names)
        for name in names[k:] + names[:k]:
            t0 = time.perf_counter()
            paths[name](request)
            out[name][i] = (time.perf_counter() - t0) * 1000.0
    return out


def _refs() -> list[str]:
    return [f"{view}:{name}" for view, (_, names) in VIEWS.items() for name in names]


def _entity(request: PricingRequest) -> dict[str, str]:
    return {"hotel_id": request.hotel_id, "room_type": request.room_type, "stay_date": request.stay_date.isoformat()}


def feast_reader(config: FeaturesConfig, probe: PricingRequest) -> Path_:
    """Feast's ``get_online_features`` for every stored feature of one request's key (what the scorer reads).

    The probe's answer is checked against :class:`RedisFeatureSource` so that both do the same work.
    """
    store, refs = build_store(config), _refs()

    def read(request: PricingRequest) -> dict[str, Any]:
        return store.get_online_features(features=refs, entity_rows=[_entity(request)]).to_dict()

    ours = RedisFeatureSource(config).read(probe.hotel_id, probe.room_type, probe.stay_date).values
    theirs = read(probe)
    differ = [n for _, (_, names) in VIEWS.items() for n in names if theirs[n][0] != ours[n]]
    if differ:
        msg = f"Feast and RedisFeatureSource disagree on {_entity(probe)} for {differ[:5]}"
        raise SystemExit(msg)
    return read


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _client(url: str, bodies: Sequence[bytes], concurrency: int) -> np.ndarray:
    out, queue = np.empty(len(bodies)), list(range(len(bodies)))[::-1]
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits) as client:

        async def worker() -> None:
            while queue:
                i = queue.pop()
                t0 = time.perf_counter()
                response = await client.post(url, content=bodies[i], headers={"content-type": "application/json"})
                out[i] = (time.perf_counter() - t0) * 1000.0
                if response.status_code != 200:
                    msg = f"{url}: status {response.status_code}: {response.text[:200]}"
                    raise RuntimeError(msg)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


def _start(args: argparse.Namespace, mode: str, bundles: tuple[Path, Path], config: FeaturesConfig) -> tuple[
        subprocess.Popen[bytes], int]:
    port = _free_port()
    cmd = [sys.executable, __file__, "--serve", str(port), "--serve-mode", mode, "--light", str(bundles[0]),
           "--heavy", str(bundles[1]), "--hotels", str(args.hotels), "--seed", str(args.seed),
           "--redis-url", config.redis_url, "--project", config.project, "--state", str(config.state_dir),
           "--bid-method", args.bid_method]
    server = subprocess.Popen(cmd)
    health = "/health" if mode == "feast" else "/healthz"
    deadline = time.monotonic() + 120.0
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}{health}", timeout=1.0).status_code == 200:
                return server, port
        except httpx.TransportError:
            time.sleep(0.2)
    server.terminate()
    msg = f"the {mode} server did not come up on port {port} within 120 s"
    raise RuntimeError(msg)


def over_http(args: argparse.Namespace, bundles: tuple[Path, Path], requests: Sequence[PricingRequest],
              config: FeaturesConfig, *, chunk: int = 250) -> dict[str, np.ndarray]:
    """Latencies (ms) of our ``POST /v1/price`` and Feast's ``POST /get-online-features``, in alternating chunks."""
    servers = [_start(args, mode, bundles, config) for mode in ("scorer", "feast")]
    try:
        (_, ours), (_, feast) = servers
        refs = _refs()
        bodies = {
            f"http://127.0.0.1:{ours}/v1/price": [r.model_dump_json().encode() for r in requests],
            f"http://127.0.0.1:{feast}/get-online-features": [
                httpx.Request("POST", "/", json={"features": refs, "entities": {k: [v] for k, v in _entity(r).items()}}
                              ).content for r in requests],
        }
        for url, body in bodies.items():  # warm-up
            asyncio.run(_client(url, body[: min(200, len(body))], args.concurrency))
        parts: dict[str, list[np.ndarray]] = {url: [] for url in bodies}
        for start in range(0, len(requests), chunk):
            for url, body in bodies.items():
                parts[url].append(asyncio.run(_client(url, body[start : start + chunk], args.concurrency)))
        decision, read = (np.concatenate(p) for p in parts.values())
        return {"decision": decision, "feast": read}
    finally:
        for server, _ in servers:
            server.terminate()
            server.wait(timeout=30)


def serve(port: int, mode: str, bundles: tuple[Path, Path], n_hotels: int, seed: int,
          config: FeaturesConfig | None) -> None:
    """Child-process mode: serve the benchmark scorer (or, ``mode == "feast"``, Feast's feature server)."""
    import uvicorn

    if mode == "feast":
        from feast.feature_server import get_app

        if config is None:
            msg = "--serve-mode feast needs the Redis source"
            raise SystemExit(msg)
        app = get_app(build_store(config))
    else:
        from serving.http import create_app

        app = create_app(build_scorer(bundles, stay_keys(n_hotels, seed=seed), config=config, seed=seed))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def rss_after(scorer: Scorer, requests: Sequence[PricingRequest], counts: Sequence[int], *,
              progress: int = 100_000) -> list[tuple[int, float]]:
    """Process RSS (MiB) after each cumulative count of decisions (requests are cycled); prints progress."""
    proc, done, out, started = psutil.Process(), 0, [], time.monotonic()
    for target in sorted(counts):
        while done < target:
            scorer.price(requests[done % len(requests)])
            done += 1
            if done % progress == 0:
                print(f"  {done:>9,} decisions, {time.monotonic() - started:7.0f} s, RSS "
                      f"{proc.memory_info().rss / 2**20:.1f} MiB, load {_load()}", flush=True)
        gc.collect()
        out.append((target, proc.memory_info().rss / 2**20))
        print(f"RSS after {target:,} decisions: {out[-1][1]:.1f} MiB", flush=True)
    return out


def calibrated(scorer: Scorer, requests: Sequence[PricingRequest], *, n: int = 2_000) -> Scorer:
    """``scorer`` with its router calibrated to the default target shares on ``n`` of the requests (cycled).

    The seeded features are clean and fresh, so the default thresholds send almost nothing to the
    heavy tier; calibrated to ``DEFAULT_SHARES`` (15% heavy) the mix is the one production aims at.
    The first ``n`` decisions only warm the scorer up (hotels leave cold start, which moves the
    scores); a fresh router then learns the next ``n`` scores and is calibrated on them.
    """
    n = max(n, MIN_CALIBRATION_SAMPLES)
    for i in range(n):
        scorer.price(requests[i % len(requests)])
    scorer.router = TieredRouter()
    for i in range(n, 2 * n):
        scorer.price(requests[i % len(requests)])
    scorer.router.calibrate(DEFAULT_SHARES)
    return scorer


def _tier_counts(scorer: Scorer) -> dict[str, int]:
    return {t: int(scorer.stats.value("pricestream_decisions_total", tier=t)) for t in ("rules", "light", "heavy")}


# -- report ---------------------------------------------------------------------------------------
def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _p(ms: np.ndarray) -> tuple[float, float, float]:
    p50, p99, p999 = np.percentile(ms, [50, 99, 99.9])
    return float(p50), float(p99), float(p999)


def _row(name: str, ms: np.ndarray, ref_p99: float | None) -> str:
    p50, p99, p999 = _p(ms)
    ratio = f"{p99 / ref_p99:11.2f}" if ref_p99 else f"{'':>11}"
    return f"{name:<34}{len(ms):>7}{p50:>9.3f}{p99:>9.3f}{p999:>9.3f}{ratio}"


HEADER = f"{'path':<34}{'n':>7}{'p50 ms':>9}{'p99 ms':>9}{'p999 ms':>9}{'p99/feast':>11}"


def in_process(scorers: dict[str, Scorer], requests: Sequence[PricingRequest], config: FeaturesConfig | None,
               ) -> dict[str, np.ndarray]:
    """The in-process paths, taking turns (Feast's only with Redis features); warm-up excluded."""
    routed = scorers["routed"]
    paths: dict[str, Path_] = {f"decision ({name})": scorer.price for name, scorer in scorers.items()}
    source = routed.feature_source
    paths["features (ours)"] = lambda r: source.read(r.hotel_id, r.room_type, r.stay_date)
    if config is not None:
        paths["features (feast)"] = feast_reader(config, requests[0])
    taking_turns(paths, requests[: min(500, len(requests))])  # warm-up
    gc.collect()
    gc.freeze()  # what the HTTP service does at start-up (serving.http.create_app): no full-heap GC stalls
    return taking_turns(paths, requests)


def latency_report(scorers: dict[str, Scorer], bundles: tuple[Path, Path], requests: Sequence[PricingRequest],
                   config: FeaturesConfig | None, args: argparse.Namespace) -> None:
    """Print the latency table and the goal lines (decision p99 / Feast read p99)."""
    print(f"in-process, concurrency 1, paths taking turns; load before {_load()}", flush=True)
    before = {name: _tier_counts(scorer) for name, scorer in scorers.items()}
    local = in_process(scorers, requests, config)
    shares = {name: {t: n - before[name][t] for t, n in _tier_counts(scorer).items()}
              for name, scorer in scorers.items() if name != "heavy"}
    feast = local.get("features (feast)")
    ref = _p(feast)[1] if feast is not None else None
    print(HEADER)
    for name, ms in local.items():
        print(_row(name, ms, ref))
    print(f"load after {_load()}; decisions by tier (incl. warm-up) {shares}")
    if feast is None or config is None:
        return
    ratios = ", ".join(f"{name} {_p(local[f'decision ({name})'])[1] / ref:.2f}" for name in scorers)
    print(f"goal, in-process: decision p99 / Feast read p99 = {ratios}; <= 1 meets it")
    if args.skip_http:
        return
    print(f"\nover HTTP, concurrency {args.concurrency}, alternating chunks; load before {_load()}", flush=True)
    http = over_http(args, bundles, requests, config)
    print(HEADER)
    print(_row("POST /v1/price (routed decision)", http["decision"], ref))
    print(_row("POST /get-online-features (feast)", http["feast"], ref))
    print(f"load after {_load()}")
    print(f"goal, HTTP: decision p99 / Feast in-process read p99 = {_p(http['decision'])[1] / ref:.2f}; "
          f"decision p99 / Feast feature server p99 = {_p(http['decision'])[1] / _p(http['feast'])[1]:.2f}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=2_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--hotels", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="small models (fast to train)")
    parser.add_argument("--source", choices=("redis", "memory"), default="redis")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--rss-at", default="10000,100000,500000,1000000",
                        help="comma-separated decision counts at which RSS is sampled")
    parser.add_argument("--progress", type=int, default=100_000, help="decisions between RSS progress lines")
    parser.add_argument("--skip-rss", action="store_true")
    parser.add_argument("--audit", action="store_true", help="the RSS run's scorer writes a hash-chained audit log")
    parser.add_argument("--skip-http", action="store_true")
    parser.add_argument("--bid-method", choices=("service", "fluid", "dp"), default="service",
                        help="the pricers' BidPriceConfig.method (service: the service's default)")
    parser.add_argument("--rss-only", action="store_true", help="skip the latency tables")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve-mode", choices=("scorer", "feast"), default="scorer", help=argparse.SUPPRESS)
    parser.add_argument("--light", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--heavy", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--project", help=argparse.SUPPRESS)
    parser.add_argument("--state", type=Path, help=argparse.SUPPRESS)
    return parser


def use_bid_method(method: str) -> None:
    """The pricers :func:`scoring_fixtures.build_scorer` loads price with ``BidPriceConfig(method=method)``.

    ``service``: the service's own default (``pricing.tiers.DEFAULT_CAPACITY``), left as it is.
    """
    if method == "service":
        return
    import functools

    import scoring_fixtures

    from pricing.bid_price import BidPriceConfig
    from pricing.tiers import load_pricer

    scoring_fixtures.load_pricer = functools.partial(load_pricer, capacity=BidPriceConfig(method=method))


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    use_bid_method(args.bid_method)
    if args.serve:
        child = None if args.source == "memory" else FeaturesConfig(
            project=args.project, state_dir=args.state, redis_url=args.redis_url)
        serve(args.serve, args.serve_mode, (args.light, args.heavy), args.hotels, args.seed, child)
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
            routed = build_scorer(bundles, keys, config=config, seed=args.seed)
            requests = requests_for(keys, args.requests, seed=args.seed)
            if not args.rss_only:
                heavy = build_scorer(bundles, keys, config=config, seed=args.seed, thresholds=ALL_HEAVY)
                shares = calibrated(build_scorer(bundles, keys, config=config, seed=args.seed), requests)
                latency_report({"routed": routed, "calibrated": shares, "heavy": heavy}, bundles, requests, config,
                               args)
            if not args.skip_rss:
                counts = [int(c) for c in args.rss_at.split(",")]
                if args.audit:
                    routed.audit = AuditLog(Path(tmp) / "audit.jsonl")
                print(f"\nRSS, one scorer (audit {'on' if args.audit else 'off'}), requests cycled; load before "
                      f"{_load()}", flush=True)
                samples = rss_after(routed, requests, counts, progress=args.progress)
                (n1, r1), (n2, r2) = samples[0], samples[-1]
                print(f"RSS after {n2:,} decisions / after {n1:,}: {r2:.1f} / {r1:.1f} MiB = {r2 / r1:.3f} "
                      f"(goal <= 1.05); load after {_load()}")
        finally:
            if config is not None:
                drop_features(config)


if __name__ == "__main__":
    main()
