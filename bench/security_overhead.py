"""Decision latency over HTTP with the security layers on, against the same service with them off.

Two uvicorn servers in child processes serve the same scorer (the same trained bundles, the
same seeded in-memory features, the default rules and router) through the serving path's
rollout scorer:

* ``off``: no API key, no rate limit, no output audit (the loopback development default);
* ``on``: ``Authorization: Bearer`` checked against a hashed keys file (re-read when it
  changes), a per-client moving-window rate limit (set far above the load, so nothing is
  refused: the cost of counting is what is measured), the input guard (ML01) before the models
  and the output audit of every price.

One seeded request list is sent to both in alternating chunks at the same concurrency (so
both see the same moments of host load); warm-up requests are excluded. Printed: p50 / p99
(ms) of each, the on/off ratios, the share of prices the output audit clamped, and the load
average before and after.

Run: ``.venv/bin/python bench/security_overhead.py [--quick] [--requests 3000] [--concurrency 8]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import numpy as np
from scoring_fixtures import build_scorer, requests_for, stay_keys, train_bundles

from serving.auth import KeyStore

RATE_LIMIT = "1000000/second"
"""Far above any load here: the limiter counts every request but never refuses one."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _client(url: str, bodies: Sequence[bytes], concurrency: int, headers: dict[str, str]) -> np.ndarray:
    out, queue = np.empty(len(bodies)), list(range(len(bodies)))[::-1]
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, headers={"content-type": "application/json", **headers}) as client:

        async def worker() -> None:
            while queue:
                i = queue.pop()
                t0 = time.perf_counter()
                response = await client.post(url, content=bodies[i])
                out[i] = (time.perf_counter() - t0) * 1000.0
                if response.status_code != 200:
                    msg = f"{url}: status {response.status_code}: {response.text[:200]}"
                    raise RuntimeError(msg)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


def serve(port: int, mode: str, bundles: tuple[Path, Path], keys_file: Path, state: Path, args: argparse.Namespace
          ) -> None:
    """Child-process mode: the benchmark scorer behind the HTTP app, security layers ``on`` or ``off``."""
    import uvicorn

    from delivery import DeliveryConfig
    from delivery.rollout import RolloutScorer
    from pricing.input_guard import InputGuardConfig
    from pricing.output_audit import OutputAudit, output_audit_counter, rules_band
    from pricing.scorer import Scorer, ScorerConfig
    from serving.http import ServiceConfig, create_app

    scorer = build_scorer(bundles, stay_keys(args.hotels, seed=args.seed), config=None, seed=args.seed)
    rollout = RolloutScorer(scorer, config=DeliveryConfig(state_path=state / f"rollout-{mode}.json"))
    service = ServiceConfig()
    if mode == "on":  # the same scorer with the input guard (ML01) in front of its models
        scorer = Scorer(ScorerConfig(deadline_ms=scorer.config.deadline_ms, input_guard=InputGuardConfig()),
                        rules=scorer.rules, feature_source=scorer.feature_source, light=scorer.light,
                        heavy=scorer.heavy, router=scorer.router)
        rollout = RolloutScorer(scorer, config=DeliveryConfig(state_path=state / f"rollout-{mode}.json"))
        rollout.output_audit = OutputAudit(band=rules_band(scorer.rules),
                                           counter=output_audit_counter(scorer.stats.registry))
        service = ServiceConfig(keys_file=keys_file, rate_limit=RATE_LIMIT)
    app = create_app(rollout, service, probes={})  # type: ignore[arg-type]
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def _start(mode: str, bundles: tuple[Path, Path], keys_file: Path, state: Path, args: argparse.Namespace
           ) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    cmd = [sys.executable, __file__, "--serve", str(port), "--serve-mode", mode, "--light", str(bundles[0]),
           "--heavy", str(bundles[1]), "--keys-file", str(keys_file), "--state", str(state),
           "--hotels", str(args.hotels), "--seed", str(args.seed)]
    server = subprocess.Popen(cmd)
    deadline = time.monotonic() + 180.0
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1.0).status_code == 200:
                return server, port
        except httpx.TransportError:
            time.sleep(0.2)
    server.terminate()
    msg = f"the {mode} server did not come up on port {port} within 180 s"
    raise RuntimeError(msg)


def _load() -> str:
    return "load %.2f %.2f %.2f" % os.getloadavg()  # noqa: UP031 - a fixed three-number format


def _counted(port: int, *prefixes: str) -> float:
    """Sum of the ``/metrics`` samples whose line starts with one of ``prefixes``."""
    total = 0.0
    for line in httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10.0).text.splitlines():
        if line.startswith(prefixes):
            total += float(line.rsplit(" ", 1)[1])
    return total


def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="ps-bench-sec-") as tmp:
        root = Path(tmp)
        print(f"training bundles ({'quick' if args.quick else 'tier defaults'}) ...", flush=True)
        bundles = train_bundles(root / "bundles", quick=args.quick, seed=args.seed)
        store = KeyStore(root / "keys.json")
        key = store.add("bench")
        requests = requests_for(stay_keys(args.hotels, seed=args.seed), args.requests, seed=args.seed)
        bodies = [r.model_dump_json().encode() for r in requests]
        servers = {mode: _start(mode, bundles, store.path, root, args) for mode in ("off", "on")}
        headers = {"off": {}, "on": {"Authorization": f"Bearer {key}"}}
        try:
            urls = {mode: f"http://127.0.0.1:{port}/v1/price" for mode, (_, port) in servers.items()}
            for mode, url in urls.items():  # warm-up
                asyncio.run(_client(url, bodies[:200], args.concurrency, headers[mode]))
            before = _load()
            parts: dict[str, list[np.ndarray]] = {mode: [] for mode in urls}
            for start in range(0, len(bodies), args.chunk):
                for mode, url in urls.items():
                    chunk = bodies[start : start + args.chunk]
                    parts[mode].append(asyncio.run(_client(url, chunk, args.concurrency, headers[mode])))
            after = _load()
            clamped = _counted(servers["on"][1], "pricestream_output_audit_total{")
            guarded = _counted(servers["on"][1], 'pricestream_degraded_decisions_total{reason="ood_input"',
                               'pricestream_degraded_decisions_total{reason="impossible_input"')
        finally:
            for server, _ in servers.values():
                server.terminate()
                server.wait(timeout=30)
    ms = {mode: np.concatenate(p) for mode, p in parts.items()}
    p50 = {m: float(np.percentile(v, 50)) for m, v in ms.items()}
    p99 = {m: float(np.percentile(v, 99)) for m, v in ms.items()}
    print(f"{len(bodies)} requests per mode, concurrency {args.concurrency}, chunks of {args.chunk}; "
          f"{before} -> {after}")
    for mode in ("off", "on"):
        print(f"  security {mode:>3}: p50 {p50[mode]:7.2f} ms   p99 {p99[mode]:7.2f} ms")
    print(f"  ratio on/off: p50 {p50['on'] / p50['off']:.3f}   p99 {p99['on'] / p99['off']:.3f}")
    print(f"  output audit: {clamped:.0f} of {len(bodies) + 200} prices clamped or held")
    print(f"  input guard: {guarded:.0f} of {len(bodies) + 200} requests sent to the rules")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=3_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--chunk", type=int, default=250)
    parser.add_argument("--hotels", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="small models (fast to train)")
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--serve-mode", default="off", help=argparse.SUPPRESS)
    parser.add_argument("--light", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--heavy", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--keys-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--state", type=Path, help=argparse.SUPPRESS)
    return parser


if __name__ == "__main__":
    parsed = _parser().parse_args()
    if parsed.serve is not None:
        serve(parsed.serve, parsed.serve_mode, (parsed.light, parsed.heavy), parsed.keys_file, parsed.state, parsed)
    else:
        main(parsed)
