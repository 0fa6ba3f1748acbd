"""``serve`` under load against a bare peer on the same server stack: decisions/s and latency per connection count.

Two servers on loopback, measured in the same run by the same load generator (``wrk``, C, from
Debian's packages; ``infra/install_system_deps.sh`` installs it):

* **serve**: ``pricestream serve`` as a user starts it (its own state dir and topic prefix on the
  local stack, audit log on, every decision published to ``pricing.decisions``, cold start off so
  every key is priced by the models), with seeded features of ``--hotels`` hotels in Redis;
* **bare peer**: a minimal FastAPI app on uvicorn (the same server stack, one process) that parses
  the request body, reads the same Redis hashes of the request's stay key and hotel (one pipelined
  ``HMGET`` pair, like ``serve``'s feature read) and returns a constant price.

Each server gets ``--seconds`` of load per concurrency after a warm-up, the two alternating. Printed
per concurrency: decisions/s, p50, p99 (wrk's latency distribution), and serve's share of the peer's
throughput; the load average before and after. The last line reads
``serve X.XX of the bare peer at 64 connections, p99 N ms``.

Run (the local stack up: ``pricestream up``): ``.venv/bin/python bench/serve.py [--seconds 15] [--hotels 20]
[--connections 16,64,256] [--threads 2]``
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: bench/ is the path's first entry, the repo root is not
    sys.path.insert(0, str(ROOT))

from bench.scoring_fixtures import drop_features, requests_for, stay_keys, write_features  # noqa: E402
from pricestream.settings import Settings  # noqa: E402

PRICESTREAM = str(Path(sys.executable).with_name("pricestream"))
BODIES = 500  # distinct request bodies the load cycles through
_START_WAIT_S = 300.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(url: str, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + _START_WAIT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            msg = f"{what} exited with {proc.returncode} before answering {url}"
            raise RuntimeError(msg)
        try:
            if httpx.get(url, timeout=1.0).status_code < 500:
                return
        except httpx.TransportError:
            time.sleep(0.3)
    msg = f"{what} did not answer {url} within {_START_WAIT_S:.0f} s"
    raise RuntimeError(msg)


@contextmanager
def _process(cmd: list[str], env: dict[str, str], url: str, what: str, log: Path) -> Iterator[None]:
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            _wait(url, proc, what)
            yield
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _env(state: Path, prefix: str, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRICESTREAM_") or k in (
        "PRICESTREAM_KAFKA_BOOTSTRAP", "PRICESTREAM_REDIS_URL", "PRICESTREAM_KAFKA_PORT", "PRICESTREAM_REDIS_PORT")}
    env.update({"PRICESTREAM_STATE_DIR": str(state), "PRICESTREAM_TOPIC_PREFIX": prefix,
                "PRICESTREAM_HTTP_HOST": "127.0.0.1", "PRICESTREAM_HTTP_PORT": str(port),
                "PRICESTREAM_BOOTSTRAP_ROWS": "4000", "PRICESTREAM_COLD_START_SERVE": "false",
                "PRICESTREAM_HTTP_RATE_LIMIT": "", "PRICESTREAM_FEAST_PROJECT": f"bench{prefix.strip('-')}"})
    return env


def _lua(bodies: Sequence[bytes], path: Path) -> Path:
    """A wrk script that cycles through ``bodies`` as JSON POSTs."""
    quoted = ",\n".join(json.dumps(b.decode()) for b in bodies)
    path.write_text(
        "local bodies = {\n" + quoted + "\n}\nlocal i = 0\n"
        'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
        "request = function()\n  i = i % #bodies + 1\n  return wrk.format(nil, nil, nil, bodies[i])\nend\n"
    )
    return path


def _ms(text: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text.strip()).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def wrk(url: str, script: Path, *, connections: int, seconds: float, threads: int) -> dict[str, float]:
    """Decisions/s, p50 and p99 (ms) and non-2xx answers of ``seconds`` of load at ``connections``."""
    out = subprocess.run(["wrk", f"-t{min(threads, connections)}", f"-c{connections}", f"-d{seconds:.0f}s",
                          "--latency", "-s", str(script), url], capture_output=True, text=True, check=True).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p50 = _ms(re.search(r"\n\s+50%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    p99 = _ms(re.search(r"\n\s+99%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    return {"rate": rate, "p50": p50, "p99": p99, "non_2xx": float(bad.group(1)) if bad else 0.0}


def peer_app() -> object:
    """The bare peer: parse the body, read the key's two Redis hashes, answer a constant price."""
    import redis
    from fastapi import FastAPI, Request
    from fastapi.responses import Response

    from features.layout import redis_key

    project, url = os.environ["PEER_PROJECT"], os.environ["PEER_REDIS_URL"]
    client = redis.Redis.from_url(url)
    app = FastAPI()

    @app.post("/v1/price")
    async def price(request: Request) -> Response:
        body = json.loads(await request.body())
        stay = redis_key(("hotel_id", "room_type", "stay_date"),
                         (body["hotel_id"], body["room_type"], body["stay_date"]), project)
        with client.pipeline(transaction=False) as pipe:
            pipe.hgetall(stay)
            pipe.hgetall(redis_key(("hotel_id",), (body["hotel_id"],), project))
            pipe.execute()
        return Response(b'{"price": 120.0, "tier": "peer"}', media_type="application/json")

    return app


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="load per server and concurrency")
    parser.add_argument("--connections", default="16,64,256")
    parser.add_argument("--threads", type=int, default=2, help="wrk threads")
    parser.add_argument("--hotels", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed: apt-get install wrk (infra/install_system_deps.sh does)")
    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    prefix, port, peer_port = f"b{uuid.uuid4().hex[:8]}-", _free_port(), _free_port()
    env = _env(work, prefix, port)
    settings = Settings(state_dir=work, topic_prefix=prefix, feast_project=env["PRICESTREAM_FEAST_PROJECT"])
    features = settings.features()
    keys = stay_keys(args.hotels, seed=args.seed)
    print(f"writing features of {len(keys)} stay keys; load {_load()}", file=sys.stderr)
    write_features(features, keys, seed=args.seed)
    bodies = [r.model_dump_json().encode() for r in requests_for(keys, BODIES, seed=args.seed)]
    script = _lua(bodies, work / "post.lua")
    peer_env = {**env, "PEER_PROJECT": features.project, "PEER_REDIS_URL": features.redis_url}
    peer_cmd = [sys.executable, "-m", "uvicorn", "bench.serve:peer_app", "--factory", "--host", "127.0.0.1",
                "--port", str(peer_port), "--log-level", "warning", "--no-access-log"]
    rows: list[tuple[int, dict[str, float], dict[str, float]]] = []
    print(f"starting serve (bootstrap models) and the bare peer; load {_load()}", file=sys.stderr)
    with _process([PRICESTREAM, "serve"], env, f"http://127.0.0.1:{port}/healthz", "serve", work / "serve.log"), \
            _process(peer_cmd, {**peer_env, "PYTHONPATH": str(ROOT)}, f"http://127.0.0.1:{peer_port}/docs", "peer",
                     work / "peer.log"):
        ours_url, peer_url = f"http://127.0.0.1:{port}/v1/price", f"http://127.0.0.1:{peer_port}/v1/price"
        for url in (ours_url, peer_url):  # warm-up
            wrk(url, script, connections=16, seconds=5, threads=args.threads)
        before = _load()
        for c in (int(x) for x in args.connections.split(",")):
            ours = wrk(ours_url, script, connections=c, seconds=args.seconds, threads=args.threads)
            peer = wrk(peer_url, script, connections=c, seconds=args.seconds, threads=args.threads)
            rows.append((c, ours, peer))
            print(f"  {c} connections: serve {ours['rate']:,.0f}/s p99 {ours['p99']:.1f} ms, "
                  f"peer {peer['rate']:,.0f}/s p99 {peer['p99']:.1f} ms", file=sys.stderr)
        after = _load()
    drop_features(features)
    print(f"{'connections':>11} {'serve/s':>9} {'p50 ms':>7} {'p99 ms':>7} {'non-2xx':>7} "
          f"{'peer/s':>9} {'p50 ms':>7} {'p99 ms':>7} {'ratio':>6}")
    for c, ours, peer in rows:
        print(f"{c:>11} {ours['rate']:>9,.0f} {ours['p50']:>7.1f} {ours['p99']:>7.1f} {ours['non_2xx']:>7.0f} "
              f"{peer['rate']:>9,.0f} {peer['p50']:>7.1f} {peer['p99']:>7.1f} {ours['rate'] / peer['rate']:>6.2f}")
    print(f"load average before {before}, after {after}; {os.cpu_count()} cores, wrk on the same host")
    at = next(((c, o, p) for c, o, p in rows if c == 64), rows[len(rows) // 2])
    print(f"serve {at[1]['rate'] / at[2]['rate']:.2f} of the bare peer at {at[0]} connections, "
          f"p99 {at[1]['p99']:.0f} ms")


if __name__ == "__main__":
    main()
