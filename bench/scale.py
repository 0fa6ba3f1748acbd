"""Scale-out benchmark: online store on a Redis Cluster against one Redis; the feature job at parallelism 1 and 2.

Run: ``.venv/bin/python bench/scale.py [--keys 20000] [--clients 2] [--seconds 10] [--events 40000]
[--skip-flink] [--png reports/scale.png]``

Needs the local stack with the cluster (``pricestream up --redis-cluster 3``). For the Flink part it
starts a standalone cluster of two TaskManagers of one slot each (``pricestream flink up
--taskmanagers 2``'s settings, on a free REST port, stopped at the end).

1. **Online store.** The same rows (every view of ``--keys`` stay keys) go through the online
   writer's compare-and-set (batches of 500 rows) into one Redis and into the cluster; then
   ``--clients`` processes read random keys through the scorer's source (``read_many`` of 8 keys,
   the scorer's batch) for ``--seconds`` each. Printed: rows/s written and key reads/s, cluster /
   single ratios. On one host the cluster's six servers share the same cores as the single one,
   so the ratio measures the cost of slot routing (script calls of one slot, one pipeline per
   master), not the capacity a cluster of machines adds.
2. **Feature job.** ``--events`` simulator events are produced once per run; the bounded job
   (it writes Redis itself) runs at parallelism 1, then 2, on the standalone cluster. events/s is
   events over the job's own duration (the REST API's start to end, so JVM start-up on the
   client is outside it); ratio p2 / p1.

The last line is the summary with the load average (``os.getloadavg``) at the start and the end.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import sys
import tempfile
import time
import uuid
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prometheus_client import CollectorRegistry  # noqa: E402

from bench.online_read import T0_MS, seed_rows  # noqa: E402
from features.config import FeaturesConfig  # noqa: E402
from features.connection import redis_client  # noqa: E402
from features.online_source import RedisFeatureSource  # noqa: E402
from features.online_writer import OnlineWriter  # noqa: E402
from infra import redis_cluster  # noqa: E402
from infra.config import REPO_ROOT, StackConfig  # noqa: E402
from pricestream.settings import Settings  # noqa: E402

WRITE_BATCH = 500  # the online writer's batch (FeaturesConfig.batch_size)
READ_BATCH = 8  # keys per scorer read (a price_batch of a few stays)
MASTERS = 3


def _drop(config: FeaturesConfig) -> int:
    client = redis_client(config)
    keys = list(client.scan_iter(match=b"*" + config.project.encode(), count=10_000))
    for key in keys:
        client.delete(key)
    client.close()
    return len(keys)


def write_rate(config: FeaturesConfig, rows: list) -> float:
    writer = OnlineWriter(config, registry=CollectorRegistry())
    t0 = time.perf_counter()
    written = 0
    for i in range(0, len(rows), WRITE_BATCH):
        written += writer.write_rows(rows[i : i + WRITE_BATCH]).written
    elapsed = time.perf_counter() - t0
    writer.close()
    if written != len(rows):
        msg = f"wrote {written} of {len(rows)} rows into {config.redis_url}"
        raise RuntimeError(msg)
    return len(rows) / elapsed


def _reader(args: tuple[str, str, list[tuple[str, str, str]], float, int]) -> int:
    url, project, keys, seconds, seed = args
    as_of = datetime.fromtimestamp(T0_MS / 1000 + 60, tz=UTC)  # the seeded rows' time: inside every TTL
    source = RedisFeatureSource(FeaturesConfig(project=project, redis_url=url, redis_timeout_s=5.0),
                                clock=lambda: as_of)
    rng = random.Random(seed)
    parsed = [(h, r, date.fromisoformat(s)) for h, r, s in keys]
    reads, deadline = 0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        got = source.read_many(rng.sample(parsed, READ_BATCH))
        if any(g.version is None for g in got):
            msg = f"a key read empty from {url}"
            raise RuntimeError(msg)
        reads += READ_BATCH
    source.close()
    return reads


def read_rate(config: FeaturesConfig, keys: list, *, clients: int, seconds: float) -> float:
    plain = [(h, r, s.isoformat()) for h, r, s in keys]
    jobs = [(config.redis_url, config.project, plain, seconds, seed) for seed in range(clients)]
    with mp.get_context("spawn").Pool(clients) as pool:
        total = sum(pool.map(_reader, jobs))
    return total / seconds


def online_store(stack: StackConfig, args: argparse.Namespace) -> dict[str, float]:
    keys, rows = seed_rows(args.keys, seed=args.seed)
    urls = {"single": stack.redis_url, "cluster": redis_cluster.cluster_url(stack, MASTERS)}
    out: dict[str, float] = {}
    for name, url in urls.items():
        config = FeaturesConfig(project=f"sc{uuid.uuid4().hex[:8]}", redis_url=url, redis_timeout_s=5.0)
        try:
            out[f"{name}_write_rows_s"] = write_rate(config, rows)
            out[f"{name}_read_keys_s"] = read_rate(config, keys, clients=args.clients, seconds=args.seconds)
        finally:
            _drop(config)
        print(f"  {name:8s} ({url}): writes {out[f'{name}_write_rows_s']:,.0f} rows/s, "
              f"reads {out[f'{name}_read_keys_s']:,.0f} keys/s ({args.clients} clients)")
    out["write_ratio"] = out["cluster_write_rows_s"] / out["single_write_rows_s"]
    out["read_ratio"] = out["cluster_read_keys_s"] / out["single_read_keys_s"]
    print(f"  cluster / single: writes {out['write_ratio']:.2f}x, reads {out['read_ratio']:.2f}x")
    return out


def feature_job(stack: StackConfig, args: argparse.Namespace) -> dict[str, float]:
    from bench.ingest import cleanup, configs, events_payloads, make_topics, produce_all
    from infra import flink_cluster

    cluster = stack.model_copy(update={
        "state_dir": Path(tempfile.mkdtemp(prefix="scale-flink-")), "flink_rest_port": flink_cluster.free_port(),
        "flink_taskmanager_slots": 1, "flink_taskmanagers": 2, "flink_process_memory": "1024m",
        "ready_timeout_s": 180.0})
    payloads = events_payloads(args.events, hotels=args.hotels, seed=args.seed)
    out: dict[str, float] = {}
    flink_cluster.start(cluster)
    try:
        for parallelism in (1, 2):
            kafka, job, features = configs(stack, f"sp{parallelism}", bounded=True, parallelism=parallelism)
            make_topics(kafka)
            produce_all(kafka, payloads)
            job_id = flink_cluster.submit_python_job(
                cluster, REPO_ROOT / "pipelines" / "feature_job.py", ["--config-json", job.model_dump_json()])
            state = flink_cluster.wait_for_job(cluster, job_id, timeout_s=900.0)
            detail: dict[str, Any] = flink_cluster._get(cluster, f"/jobs/{job_id}") or {}
            duration_s = float(detail.get("duration", 0)) / 1000.0
            keys = cleanup(features)
            if state != "FINISHED" or keys == 0:
                msg = f"parallelism {parallelism}: job {state}, {keys} keys in Redis"
                raise RuntimeError(msg)
            out[f"p{parallelism}_eps"] = len(payloads) / duration_s
            print(f"  parallelism {parallelism}: {len(payloads):,} events in {duration_s:.1f} s (job duration) "
                  f"= {out[f'p{parallelism}_eps']:,.0f} events/s, {keys:,} Redis keys")
    finally:
        flink_cluster.stop(cluster)
    out["flink_ratio"] = out["p2_eps"] / out["p1_eps"]
    print(f"  parallelism 2 / 1: {out['flink_ratio']:.2f}x")
    return out


def plot(figures: dict[str, float], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("online writes (rows/s)", ["single_write_rows_s", "cluster_write_rows_s"], ["1 Redis", "cluster"]),
              ("online reads (keys/s)", ["single_read_keys_s", "cluster_read_keys_s"], ["1 Redis", "cluster"]),
              ("feature job (events/s)", ["p1_eps", "p2_eps"], ["parallelism 1", "parallelism 2"])]
    panels = [p for p in panels if all(k in figures for k in p[1])]
    fig, axes = plt.subplots(1, len(panels), figsize=(max(4 * len(panels), 7), 3.5))
    for ax, (title, keys, labels) in zip([axes] if len(panels) == 1 else axes, panels, strict=True):
        ax.bar(labels, [figures[k] for k in keys], color=["#888888", "#3070b0"])
        ax.set_title(title)
    load = figures.get("load_start", float("nan"))
    fig.suptitle(f"bench/scale.py, one host of {os.cpu_count()} cores, load average {load:.1f} at the start",
                 fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--events", type=int, default=40_000)
    parser.add_argument("--hotels", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--skip-flink", action="store_true")
    parser.add_argument("--skip-online", action="store_true", help="the feature job's part only")
    parser.add_argument("--png", type=Path, default=Path("reports/scale.png"))
    args = parser.parse_args()
    stack = Settings().stack()
    redis_cluster.start(stack, MASTERS)  # idempotent: the one `pricestream up --redis-cluster 3` started
    figures: dict[str, float] = {"load_start": os.getloadavg()[0]}
    if not args.skip_online:
        print(f"online store, {args.keys:,} stay keys, load average {figures['load_start']:.1f}:")
        figures.update(online_store(stack, args))
    if not args.skip_flink:
        print(f"feature job on the standalone cluster (2 TaskManagers x 1 slot), {args.events:,} events:")
        figures.update(feature_job(stack, args))
    figures["load_end"] = os.getloadavg()[0]
    plot(figures, args.png)
    flink = (f", feature job p2/p1 {figures['flink_ratio']:.2f}x ({figures['p1_eps']:,.0f} -> "
             f"{figures['p2_eps']:,.0f} events/s)" if "flink_ratio" in figures else "")
    store = (f"cluster/single writes {figures['write_ratio']:.2f}x, reads {figures['read_ratio']:.2f}x"
             if "write_ratio" in figures else "online store skipped")
    print(f"summary: {store}{flink}; load average {figures['load_start']:.1f} -> {figures['load_end']:.1f}; "
          f"wrote {args.png}")


if __name__ == "__main__":
    main()
