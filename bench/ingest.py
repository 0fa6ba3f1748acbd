"""Ingest benchmark: ``behaviour.events`` → feature job (MiniCluster) → ``features.v1`` → online writer → Redis.

Run: ``.venv/bin/python bench/ingest.py [--events 200000] [--rates 5000] [--duration 60]``

Needs the local stack (Kafka, Redis). Every run uses uuid-prefixed topics, its own consumer
groups and its own Feast project (its Redis keys are deleted at the end).

1. **Throughput.** N simulator events are produced first; then the tiled job (bounded) and the
   online writer start together. Printed: events in / wall time from job start until the
   last tile is merged in Redis, the job's own rate while its source was busy (REST metrics
   of the MiniCluster), the writer's rows/s, and per operator busy / backpressured / idle
   time (the profile). Peers, in the same run on the same events: a plain confluent-kafka
   consumer (the pipe's ceiling) and the old job of five per-event OVER views
   (``bench/over_job.py``), whose JVM CPU per event is divided by the tiled job's.
2. **Freshness.** For each delivery mode and rate, the job runs unbounded and the producer
   publishes at a fixed rate (event time = wall clock); the writer's lags
   (Redis write time − Kafka append time of the newest source event of the tile, per applied
   row) after a warm-up give p50/p99/max. ``--deliveries`` compares the tile sink's delivery modes.

The last line is the summary the issue asks for: sustained events/s into Redis, JVM and writer
CPU per event, OVER / tiled CPU ratio, freshness p50/p99 at each rate, the load average.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client import CollectorRegistry
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.table import TableResult
from rich.progress import track

from events.admin import create_topics
from events.config import KafkaConfig
from events.consumer import EventConsumer
from events.models import dumps
from events.topics import TopicSpec
from features.config import FeaturesConfig
from features.freshness import SINK_LAG_EDGES_MS, FreshnessTracker
from features.online_writer import OnlineWriter, redis_client
from features.rows import parse_row
from infra.config import StackConfig
from infra.flink_cluster import free_port
from market import Market, MarketConfig, simulate
from pipelines.config import FeatureJobConfig, OnlineSink
from pipelines.feature_job import StreamJob, build_feature_job, job_configuration
from pricestream.settings import Settings

try:
    from bench.over_job import OVER_TOPIC, build_over_job, build_parse_only_job, build_source_only_job
except ModuleNotFoundError:  # run as a script: bench/ is the path's first entry, the repo root is not
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.over_job import OVER_TOPIC, build_over_job, build_parse_only_job, build_source_only_job

PARTITIONS = 6  # as events.topics registers behaviour.events and features.v1
_REST_GONE_S = 180.0  # REST silent this long after answering: the job's MiniCluster is gone (a busy host is slow)
_JOB_END_TIMEOUT_S = 1800.0
WRITER_BATCH = 2000  # rows per Redis round trip; the writer's default (500) is sized for latency, not bulk


@dataclass
class WriterLog:
    rows: int = 0
    cpu_s: float = 0.0  # the writer thread's own CPU time
    first_s: float | None = None
    last_s: float | None = None
    tracker: FreshnessTracker = field(default_factory=lambda: FreshnessTracker(window=10_000_000))


def events_payloads(n: int, *, hotels: int, seed: int) -> list[tuple[bytes, dict]]:
    """``n`` simulator events as (key, JSON dict), in event-time order."""
    start = datetime.now(tz=UTC).replace(microsecond=0)
    market = Market(MarketConfig(hotels=hotels, seed=seed, start=start))
    stream = simulate(market, start=start, duration=timedelta(days=365), max_events=n, rng_seed=seed)
    out = []
    for event in stream:
        body = json.loads(dumps(event))
        out.append((str(body["hotel_id"]).encode(), body))
    return out


def make_topics(kafka: KafkaConfig) -> None:
    names = ("behaviour.events", "behaviour.events.dlq", "features.v1", "features.v1.dlq", OVER_TOPIC)
    create_topics(kafka, [TopicSpec(name=n, partitions=PARTITIONS) for n in names])


def _producer(kafka: KafkaConfig) -> Producer:
    return Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 5, "compression.type": "lz4",
                     "enable.idempotence": True, "acks": "all"})


def produce_all(kafka: KafkaConfig, payloads: list[tuple[bytes, dict]]) -> float:
    """Publish everything as fast as the producer goes; returns seconds."""
    producer, topic, t0 = _producer(kafka), kafka.topic("behaviour.events"), time.perf_counter()
    for key, body in payloads:
        while True:
            try:
                producer.produce(topic, json.dumps(body).encode(), key)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)
    return time.perf_counter() - t0


def produce_paced(bootstrap: str, prefix: str, payloads: list[tuple[bytes, dict]], rate: float, seconds: float) -> None:
    """Child process: publish at ``rate``/s for ``seconds``, each event stamped with the wall clock."""
    kafka = KafkaConfig(bootstrap_servers=bootstrap, topic_prefix=prefix)
    producer, topic = _producer(kafka), kafka.topic("behaviour.events")
    t0, total = time.perf_counter(), int(rate * seconds)
    for i in range(total):
        key, body = payloads[i % len(payloads)]
        body = {**body, "event_id": str(uuid.uuid4()), "event_time": int(time.time() * 1000)}
        producer.produce(topic, json.dumps(body).encode(), key)
        if i % 50 == 0:  # pace in small steps: a smooth rate, not bursts
            producer.poll(0)
            ahead = i / rate - (time.perf_counter() - t0)
            if ahead > 0:
                time.sleep(ahead)
    producer.flush(60)


def topic_size(kafka: KafkaConfig, topic: str) -> int:
    """Records in a topic (sum of high watermarks; transaction markers count too)."""
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": f"size-{uuid.uuid4().hex}"})
    name = kafka.topic(topic)
    total = sum(consumer.get_watermark_offsets(TopicPartition(name, p), timeout=10)[1] for p in range(PARTITIONS))
    consumer.close()
    return total


def peer_consume(kafka: KafkaConfig, n: int) -> float:
    """Seconds for a plain consumer to read ``n`` records of ``behaviour.events`` (the pipe's ceiling)."""
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": f"peer-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([kafka.topic("behaviour.events")])
    seen, t0 = 0, time.perf_counter()
    while seen < n and time.perf_counter() - t0 < 120:
        seen += sum(1 for m in consumer.consume(num_messages=10_000, timeout=1.0) if m.error() is None)
    consumer.close()
    return time.perf_counter() - t0


JOBS = {"tiled": build_feature_job, "over": build_over_job, "parse-only": build_parse_only_job,
        "source-only": build_source_only_job}


def start_job(config: FeatureJobConfig, rest_port: int, *, job: str = "tiled") -> TableResult | StreamJob:
    conf = job_configuration(config)
    conf.set_string("rest.port", str(rest_port))  # the MiniCluster's REST API, for the metrics below
    conf.set_string("metrics.fetcher.update-interval", "250")  # REST's record counts 250 ms old, not 10 s
    return JOBS[job](StreamExecutionEnvironment.get_execution_environment(conf), config).execute()


def rest(port: int, path: str) -> dict:
    return dict(rest_json(port, path))


def rest_json(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=15) as resp:  # noqa: S310
        return json.loads(resp.read())


def job_id(result: TableResult | StreamJob) -> str:
    client = result.get_job_client()
    if client is None:
        msg = "the job has no client: was it submitted?"
        raise RuntimeError(msg)
    return str(client.get_job_id())


def run_writer(features: FeaturesConfig, log: WriterLog, stop: threading.Event, *, idle_s: float | None) -> None:
    """The online writer's loop (features.online_writer.run) with a whole-run freshness window."""
    writer = OnlineWriter(features, registry=CollectorRegistry())
    writer.freshness = log.tracker
    consumer = EventConsumer(features.kafka, topic=features.topic, group_id=features.online_group, parse=parse_row)

    def handle(rows: list) -> None:
        writer.freshness = log.tracker  # the caller swaps in a fresh tracker after the warm-up
        writer.write_rows(rows)
        log.cpu_s = time.thread_time() - cpu0
        log.rows += len(rows)
        log.last_s = time.perf_counter()
        log.first_s = log.first_s or log.last_s

    idle_since, cpu0 = time.perf_counter(), time.thread_time()
    try:
        while not stop.is_set():
            if consumer.process(handle, max_records=WRITER_BATCH, timeout_s=0.2):
                idle_since = time.perf_counter()
            elif idle_s is not None and time.perf_counter() - idle_since > idle_s:
                break
    finally:
        consumer.close()
        writer.close()


def sample_vertices(port: int, jid: str) -> tuple[str, list[dict]]:
    """(job state, vertices with name and metrics) from the MiniCluster's REST API."""
    body = rest(port, f"/jobs/{jid}")
    return str(body["state"]), [{"name": v["name"], **v["metrics"]} for v in body["vertices"]]


_COUNTED = ("tiles: stay", "OverAggregate")
"""Vertices that read each valid event once (a chained source's own count is per output edge)."""


def watch_job(port: int, result: TableResult | StreamJob, *, watch_sink: bool = False) -> dict:
    """Poll the job's REST API until it ends; returns when its source started emitting, and the last metrics.

    The per-job MiniCluster shuts down with its job, so a REST endpoint that stops answering
    after the job was seen running also means the end.
    """
    jid = job_id(result)
    out: dict = {"source_first_s": None, "vertices": [], "state": None}
    ended = threading.Event()

    def wait_end() -> None:  # the end of a bounded job, and the JVM's CPU then (REST may lag on a busy host)
        try:
            result.wait()
        finally:
            out["ended_s"], out["jvm_cpu_end_s"] = time.perf_counter(), jvm_cpu_s()
            ended.set()

    threading.Thread(target=wait_end, daemon=True).start()
    last_ok = time.perf_counter()
    while time.perf_counter() - last_ok < _REST_GONE_S and not ended.is_set():
        try:
            out["state"], vertices = sample_vertices(port, jid)
        except OSError:  # not registered yet, or shutting down
            time.sleep(0.5)
            continue
        last_ok = time.perf_counter()
        # the first record anywhere (a job chained into one vertex writes nothing downstream)
        moving = any(int(v["write-records"]) > 0 or int(v["read-records"]) > 0 for v in vertices)
        if moving and out["source_first_s"] is None:
            out["source_first_s"], out["jvm_cpu_at_first_s"] = last_ok, jvm_cpu_s()
        out["jvm_cpu_last_s"] = jvm_cpu_s()
        out["vertices"] = vertices
        # every aggregation (or the blackhole sink) reads each valid event once; a chained source's own
        # count is per output edge, so only the fallback
        inner = [int(v["read-records"]) for v in vertices if v["name"].startswith(_COUNTED)]
        seen = max(inner, default=0)
        if seen > out.get("events_seen", 0):
            out["events_seen"], out["seen_s"] = seen, last_ok
        if watch_sink:
            try:
                rows = int(sink_metrics(port, jid).get("rows", 0))  # type: ignore[call-overload]
            except OSError:
                rows = out.get("sink_rows", 0)
            if rows > out.get("sink_rows", 0):
                out["sink_rows"], out["sink_last_s"] = rows, last_ok
                out.setdefault("sink_first_s", last_ok)
        if out["state"] in {"RESTARTING", "FAILING", "FAILED"} and "exception" not in out:
            out["exception"] = root_exception(port, jid)
            print(f"  job {out['state']}: {out['exception']}")
        if out["state"] in {"FINISHED", "FAILED", "CANCELED"}:
            break
        time.sleep(0.5)
    # A busy host's REST can stop answering for a while before the job ends: the figures wait for the
    # job itself (a bounded job ends once it read everything), never for the last REST sample only.
    if not ended.wait(_JOB_END_TIMEOUT_S):
        msg = f"watch: job {jid} did not end within {_JOB_END_TIMEOUT_S:.0f} s of its last REST answer"
        raise RuntimeError(msg)
    out["end_s"] = out["ended_s"]
    out["jvm_cpu_last_s"] = out.get("jvm_cpu_end_s", out.get("jvm_cpu_last_s", 0.0))
    return out


LAG_EDGES_MS = SINK_LAG_EDGES_MS
"""Upper edges of the job's Redis sink freshness buckets (``RedisFeatureSink.LAG_EDGES_MS``); the last is open."""


def sink_metrics(port: int, jid: str) -> dict[str, object]:
    """The job's Redis sink: rows written (``redisRowsWritten``) and cumulative lag bucket counts, from REST."""
    out: dict[str, object] = {}
    for vertex in rest(port, f"/jobs/{jid}")["vertices"]:
        base = f"/jobs/{jid}/vertices/{vertex['id']}/metrics"
        names = (".redisRowsWritten", ".freshnessLagBuckets")
        wanted = [m["id"] for m in rest_json(port, base) if m["id"].endswith(names)]
        if not wanted:
            continue
        for metric in rest_json(port, f"{base}?get={','.join(wanted)}"):
            if metric["id"].endswith("redisRowsWritten"):
                out["rows"] = int(float(metric["value"]))
            else:
                out["buckets"] = [int(x) for x in str(metric["value"]).split(",")]
    return out


def bucket_quantiles(before: list[int], after: list[int], qs: tuple[float, ...] = (0.5, 0.99)) -> tuple[int, list]:
    """(rows, upper edge in ms of the bucket holding each quantile) of the lags observed between two readings."""
    before = before or [0] * len(after)  # no reading yet: nothing observed before
    counts = [b - a for a, b in zip(before, after, strict=True)]
    total = sum(counts)
    out: list = []
    for q in qs:
        seen, edge = 0, float("inf")
        for i, c in enumerate(counts):
            seen += c
            if total and seen >= q * total:
                edge = LAG_EDGES_MS[i] if i < len(LAG_EDGES_MS) else float("inf")
                break
        out.append(edge)
    return total, out


def redis_cpu_s(stack: StackConfig) -> float:
    """User + system CPU seconds of this stack's redis-server (its port in the command line)."""
    port = str(urlsplit(stack.redis_url).port)
    for proc in psutil.process_iter(["name", "cmdline"]):
        try:
            if "redis-server" in (proc.info["name"] or "") and any(port in part for part in proc.info["cmdline"] or []):
                cpu = proc.cpu_times()
                return cpu.user + cpu.system
        except psutil.Error:
            continue
    return float("nan")


def jvm_cpu_s() -> float:
    """User + system CPU seconds of the JVM(s) that PyFlink started under this process (the MiniCluster)."""
    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            if "java" in child.name():
                cpu = child.cpu_times()
                total += cpu.user + cpu.system
        except psutil.Error:
            continue
    return total


def root_exception(port: int, jid: str) -> str:
    try:
        entries = rest(port, f"/jobs/{jid}/exceptions").get("exceptionHistory", {}).get("entries", [])
    except OSError:
        return "(REST gone)"
    trace = str(entries[0].get("stacktrace", "")) if entries else ""
    causes = [line for line in trace.splitlines() if "Exception" in line and not line.startswith("\tat")]
    return " <- ".join(causes[-2:])[:600]


def all_running(port: int, jid: str) -> bool:
    try:
        vertices = rest(port, f"/jobs/{jid}")["vertices"]
    except OSError:
        return False
    return bool(vertices) and all(v["status"] == "RUNNING" for v in vertices)


def wait_writer_idle(log: WriterLog, *, idle_s: float, timeout_s: float) -> None:
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        if log.last_s is not None and time.perf_counter() - log.last_s > idle_s:
            return
        time.sleep(0.2)


def cleanup(features: FeaturesConfig) -> int:
    """Delete this run's Redis keys (Feast suffixes every key with the project) and checkpoints."""
    shutil.rmtree(Path(tempfile.gettempdir()) / "pricestream-bench" / features.project, ignore_errors=True)
    client = redis_client(features)
    keys = list(client.scan_iter(match=f"*{features.project}*".encode(), count=10_000))
    for i in range(0, len(keys), 10_000):
        client.delete(*keys[i:i + 10_000])
    client.close()
    return len(keys)


def configs(stack: StackConfig, tag: str, *, job_writes_redis: bool = True,
            **job: object) -> tuple[KafkaConfig, FeatureJobConfig, FeaturesConfig]:
    """Topics, job and feature-store settings of one run (the job writes Redis itself unless ``job_writes_redis``)."""
    run = f"{tag}{uuid.uuid4().hex[:8]}"
    if job_writes_redis:
        job = {**job, "online": OnlineSink(redis_url=stack.redis_url, project=run, timeout_ms=10_000)}
    kafka = KafkaConfig(bootstrap_servers=stack.kafka_bootstrap, topic_prefix=f"{run}-")
    job_config = FeatureJobConfig(
        bootstrap_servers=stack.kafka_bootstrap, topic_prefix=kafka.topic_prefix,
        connector_jar=stack.flink_kafka_connector_jar, group_id=f"{run}-job", transactional_id_prefix=run,
        startup="earliest-offset", checkpoint_dir=Path(tempfile.gettempdir()) / "pricestream-bench" / run,
        **job,  # type: ignore[arg-type]
    )
    features = FeaturesConfig(project=run, kafka=kafka, online_group=f"{run}-writer", batch_size=WRITER_BATCH,
                              redis_url=stack.redis_url, redis_timeout_s=10.0)  # bulk: a busy host stalls Redis
    return kafka, job_config, features


def _ms(vertex: dict, name: str) -> float:
    try:
        return float(vertex.get(name, "nan"))  # Flink reports "NaN" before a task measured anything
    except (TypeError, ValueError):
        return float("nan")


def print_profile(vertices: list[dict]) -> None:
    print("  operator                                   busy ms  backpressured ms  idle ms   records in/out")
    for v in vertices:
        print(f"  {v['name'][:42]:42s} {_ms(v, 'accumulated-busy-time'):8.0f} "
              f"{_ms(v, 'accumulated-backpressured-time'):17.0f} {_ms(v, 'accumulated-idle-time'):8.0f}"
              f"   {v['read-records']}/{v['write-records']}")


def throughput(stack: StackConfig, args: argparse.Namespace) -> dict:
    # Catching up on a backlog, a split that the starved fetcher did not serve for the idle timeout is
    # marked idle and the watermark jumps past its records (they become "late"): a generous timeout here.
    in_job = args.online == "job"
    kafka, job_config, features = configs(
        stack, "bt", bounded=True, parallelism=args.parallelism, idle_timeout_ms=args.backlog_idle_timeout_ms,
        job_writes_redis=in_job,
    )
    make_topics(kafka)
    payloads = events_payloads(args.events, hotels=args.hotels, seed=args.seed)
    produce_s = produce_all(kafka, payloads)
    peer_s = peer_consume(kafka, len(payloads))
    log, stop, port = WriterLog(), threading.Event(), free_port()
    writer = threading.Thread(target=run_writer, args=(features, log, stop), kwargs={"idle_s": None}, daemon=True)
    redis0 = redis_cpu_s(stack)
    t0 = time.perf_counter()
    result = start_job(job_config, port)
    if not in_job:
        writer.start()
    watched = watch_job(port, result, watch_sink=in_job)
    if in_job:  # the job's sink flushed everything before the bounded job finished
        log.rows, log.first_s = int(watched.get("sink_rows", 0)), watched.get("sink_first_s")
        log.last_s = watched.get("ended_s", watched.get("sink_last_s"))
    else:
        wait_writer_idle(log, idle_s=10.0, timeout_s=600.0)
        stop.set()
        writer.join()
    redis_s = redis_cpu_s(stack) - redis0
    n, end = len(payloads), log.last_s or time.perf_counter()
    # events through the aggregations over the time since the source started (REST samples, 0.5 s apart)
    first, last = watched["source_first_s"], watched.get("seen_s")
    source_s = last - first if first is not None and last is not None and last > first else float("nan")  # too short
    out = {
        "online": args.online, "events": n, "produce_eps": n / produce_s, "peer_consume_eps": n / peer_s,
        "end_to_end_eps": n / (end - t0), "job_eps": watched.get("events_seen", 0) / source_s, "rows": log.rows,
        "writer_rows_per_s": log.rows / ((log.last_s or end) - (log.first_s or t0)),
        "sustained_eps": n / ((log.last_s or end) - (log.first_s or t0)),
        "startup_s": (first - t0) if first is not None else float("nan"), "wall_s": end - t0,
        # a bounded job reads all n events: its JVM CPU from the source's first record to the job's end
        "jvm_cpu_us_per_event": 1e6 * (watched.get("jvm_cpu_last_s", 0.0) - watched.get("jvm_cpu_at_first_s", 0.0))
        / n,
        "writer_cpu_us_per_event": 1e6 * log.cpu_s / n,
        "redis_cpu_us_per_event": 1e6 * redis_s / n,
        "redis_keys_deleted": cleanup(features), "dlq_records": topic_size(kafka, "behaviour.events.dlq"),
    }
    print(f"throughput over {n} events (parallelism {args.parallelism}), job {watched['state']}:")
    print(f"  end to end (job start -> last row in Redis): {out['end_to_end_eps']:,.0f} events/s "
          f"in {out['wall_s']:.1f} s, of which {out['startup_s']:.1f} s job start-up")
    print(f"  sustained end to end (first -> last row in Redis): {out['sustained_eps']:,.0f} events/s")
    print(f"  job alone while its source ran:             {out['job_eps']:,.0f} events/s")
    who = "the job's Redis sink" if in_job else "online writer"
    print(f"  {who + ':':44s}{out['writer_rows_per_s']:,.0f} rows/s ({log.rows} rows)")
    print(f"  peer, plain consumer of the same topic:     {out['peer_consume_eps']:,.0f} events/s "
          f"-> pipeline/peer ratio {out['end_to_end_eps'] / out['peer_consume_eps']:.3f}")
    cpu_us = out["jvm_cpu_us_per_event"] + out["writer_cpu_us_per_event"] + out["redis_cpu_us_per_event"]
    print(f"  CPU per event (load-independent): job JVM {out['jvm_cpu_us_per_event']:,.0f} us + online writer "
          f"{out['writer_cpu_us_per_event']:,.0f} us + redis-server {out['redis_cpu_us_per_event']:,.0f} us "
          f"= {cpu_us:,.0f} us -> {1e6 / cpu_us:,.0f} events per CPU-second, "
          f"{os.cpu_count()} idle cores would carry ~{(os.cpu_count() or 1) * 1e6 / cpu_us:,.0f} events/s")
    print(f"  events to the DLQ: {out['dlq_records']} (late or invalid)")
    print_profile(watched["vertices"])
    if not args.skip_marginal:
        out.update(marginal_cpu(stack, kafka, job_config, payloads, small=max(n // 4, 1000),
                                repeats=args.marginal_repeats))
    return out


MARGINAL_JOBS = ("tiled", "over", "parse-only", "source-only")


def marginal_cpu(stack: StackConfig, kafka: KafkaConfig, job_config: FeatureJobConfig,
                 payloads: list[tuple[bytes, dict]], *, small: int, repeats: int = 1) -> dict:
    """JVM CPU per event of each job, marginal: (CPU over all n events - CPU over the first ``small``) / difference.

    Each run is a bounded job in a fresh process (a cold JVM each time: start-up, planning and JIT
    cancel out in the difference), on the same events. The issue's own method ("marginal, two sizes").
    A cold JVM's start-up varies by a second or two of CPU, which is tens of microseconds per event
    over a difference of 90,000 events: the tiled and OVER pairs run ``repeats`` times, interleaved,
    and their median is the figure (the spread is printed).
    """
    small_kafka = KafkaConfig(bootstrap_servers=kafka.bootstrap_servers, topic_prefix=f"{kafka.topic_prefix}s-")
    make_topics(small_kafka)
    produce_all(small_kafka, payloads[:small])
    out: dict = {}
    n = len(payloads)
    per_event: dict[str, list[float]] = {job: [] for job in MARGINAL_JOBS}
    rates: dict[str, list[float]] = {job: [] for job in MARGINAL_JOBS}
    cpus: dict[str, dict[int, list[float]]] = {job: {n: [], small: []} for job in MARGINAL_JOBS}
    in_run: dict[str, list[float]] = {job: [] for job in MARGINAL_JOBS}
    plan = [job for r in range(max(repeats, 1)) for job in MARGINAL_JOBS
            if r == 0 or job in ("tiled", "over")]
    for job in track(plan, description="marginal CPU runs"):
        try:
            sizes = ((n, kafka.topic_prefix), (small, small_kafka.topic_prefix))
            cpu = {size: _job_cpu(job_config, prefix, job, size) for size, prefix in sizes}
        except subprocess.CalledProcessError as exc:  # a repeat that failed: say why, keep the runs that passed
            if per_event[job]:
                print(f"  {job} marginal run failed (exit {exc.returncode}), kept the {len(per_event[job])} before it:"
                      f" {(exc.stderr or '')[-1500:]}")
                continue
            raise
        per_event[job].append(1e6 * (cpu[n]["jvm_cpu_s"] - cpu[small]["jvm_cpu_s"]) / (n - small))
        rates[job].append((n - small) / max(cpu[n]["run_s"] - cpu[small]["run_s"], 1e-9))
        for size in (n, small):
            cpus[job][size].append(cpu[size]["jvm_cpu_s"])
        if "in_run_us_per_event" in cpu[n]:
            in_run[job].append(cpu[n]["in_run_us_per_event"])
    for job in MARGINAL_JOBS:
        figures = sorted(per_event[job])
        out[f"{job}_jvm_cpu_us_per_event"] = statistics.median(figures)
        out[f"{job}_jvm_cpu_us_per_event_runs"] = per_event[job]
        out[f"{job}_job_eps"] = statistics.median(rates[job])
        spread = f" (runs {', '.join(f'{x:,.1f}' for x in per_event[job])})" if len(figures) > 1 else ""
        print(f"  {job:12s} JVM CPU {statistics.median(cpus[job][small]):6.1f} s for {small:,} events, "
              f"{statistics.median(cpus[job][n]):6.1f} s for {n:,} -> "
              f"{out[f'{job}_jvm_cpu_us_per_event']:,.1f} us per event (marginal, median){spread}, "
              f"{out[f'{job}_job_eps']:,.0f} events/s marginal wall")
        if in_run[job]:
            out[f"{job}_in_run_us_per_event"] = statistics.median(in_run[job])
            print(f"  {'':12s} in-run marginal (from {IN_RUN_FROM:.0%} of the {n:,} events to the end): "
                  f"{out[f'{job}_in_run_us_per_event']:,.1f} us per event (runs "
                  f"{', '.join(f'{x:,.1f}' for x in in_run[job])})")
    out["over_to_tiled_cpu"] = out["over_jvm_cpu_us_per_event"] / out["tiled_jvm_cpu_us_per_event"]
    if "over_in_run_us_per_event" in out and "tiled_in_run_us_per_event" in out:
        out["over_to_tiled_cpu_in_run"] = out["over_in_run_us_per_event"] / out["tiled_in_run_us_per_event"]
        print(f"  OVER / tiled JVM CPU per event (in-run marginal): {out['over_to_tiled_cpu_in_run']:.1f}x")
    print(f"  OVER / tiled JVM CPU per event (marginal): {out['over_to_tiled_cpu']:.1f}x; the tiles add "
          f"{out['tiled_jvm_cpu_us_per_event'] - out['parse-only_jvm_cpu_us_per_event']:,.1f} us to the parse, "
          f"the parse {out['parse-only_jvm_cpu_us_per_event'] - out['source-only_jvm_cpu_us_per_event']:,.1f} us "
          f"to the engine's bare Kafka source ({out['source-only_jvm_cpu_us_per_event']:,.1f} us)")
    return out


def _job_cpu(job_config: FeatureJobConfig, prefix: str, job: str, events: int) -> dict:
    """Run ``job`` bounded over the topics of ``prefix`` in a fresh process; its JVM CPU and run time."""
    run = uuid.uuid4().hex[:8]
    config = job_config.model_copy(update={
        "topic_prefix": prefix, "group_id": f"{run}-{job}", "transactional_id_prefix": f"{run}{job}",
        "checkpoint_dir": Path(tempfile.gettempdir()) / "pricestream-bench" / f"{run}-{job}",
        "sink_topic": OVER_TOPIC if job == "over" else job_config.sink_topic,
    })
    argv = [sys.executable, str(Path(__file__).resolve()), "--run-job", job, "--job-config", config.model_dump_json(),
            "--events", str(events)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=1800)  # noqa: S603
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


IN_RUN_FROM = 0.25
"""The in-run marginal counts the JVM's CPU from the first REST sample past this fraction of the events."""


def _run_job_main(job: str, config_json: str, events: int | None = None) -> None:
    """``--run-job``: one bounded job in this process; prints its JVM CPU and wall time as JSON.

    With ``events`` (the input's size) it also samples the job's record counts over REST and gives the
    in-run marginal: the JVM's CPU from the first sample past :data:`IN_RUN_FROM` of the events to the
    end, per event of that stretch (start-up, planning and the JIT's first minutes are out of it).
    """
    config = FeatureJobConfig.model_validate_json(config_json)
    t0, port = time.perf_counter(), free_port()
    result = start_job(config, port, job=job)
    mark: dict[str, float] = {}
    done = threading.Event()

    def sample() -> None:
        jid = job_id(result)
        while events and not done.is_set() and not mark:
            try:
                _, vertices = sample_vertices(port, jid)
            except OSError:
                time.sleep(0.25)
                continue
            inner = [int(v["read-records"]) for v in vertices if v["name"].startswith(_COUNTED)]
            seen = max(inner or [int(v["read-records"]) for v in vertices])
            if seen >= IN_RUN_FROM * events:
                mark.update(seen=seen, cpu=jvm_cpu_s())
            time.sleep(0.25)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    result.wait()
    done.set()
    out = {"jvm_cpu_s": jvm_cpu_s(), "run_s": time.perf_counter() - t0}
    if events and mark and events > mark["seen"]:
        out["in_run_us_per_event"] = 1e6 * (out["jvm_cpu_s"] - mark["cpu"]) / (events - mark["seen"])
    print(json.dumps(out))


def freshness(stack: StackConfig, args: argparse.Namespace, *, delivery: str, rate: float) -> dict:
    """Lags (Redis write time minus Kafka append time of the row's newest event) at a paced ``rate``.

    With the job's own sink (``--online job``) the lags are the sink's bucket counts, read at the end
    of the warm-up and after the backlog drained; their quantiles are bucket upper edges (``<= x ms``).
    """
    in_job = args.online == "job"
    kafka, job_config, features = configs(
        stack, "bf", tile_delivery=delivery, out_of_orderness_ms=args.out_of_orderness_ms, watermark_emit="on-event",
        checkpoint_interval_ms=args.checkpoint_ms, parallelism=args.parallelism, job_writes_redis=in_job,
    )
    make_topics(kafka)
    payloads = events_payloads(min(50_000, int(rate * 10)), hotels=args.hotels, seed=args.seed)
    log, stop, port = WriterLog(), threading.Event(), free_port()
    result = start_job(job_config, port)
    jid = job_id(result)
    while not all_running(port, jid):
        time.sleep(0.5)
    writer = threading.Thread(target=run_writer, args=(features, log, stop), kwargs={"idle_s": None}, daemon=True)
    if not in_job:
        writer.start()
    seconds = args.warmup + args.duration
    child = mp.get_context("spawn").Process(
        target=produce_paced, args=(stack.kafka_bootstrap, kafka.topic_prefix, payloads, rate, seconds)
    )
    child.start()
    time.sleep(args.warmup)
    log.tracker = FreshnessTracker(window=10_000_000)  # drop the warm-up lags
    before = sink_metrics(port, jid) if in_job else {}
    child.join()
    load = os.getloadavg()
    # the backlog's lags count too: wait until the writer drained it (bounded, reported as undelivered)
    if in_job:
        after = _sink_drained(port, jid, idle_s=max(5.0, 3 * args.checkpoint_ms / 1000), timeout_s=args.drain_timeout)
        count, (p50_ms, p99_ms) = bucket_quantiles(list(before.get("buckets", [])),  # type: ignore[call-overload]
                                                    list(after.get("buckets", [])))  # type: ignore[call-overload]
        p50, p99, top = p50_ms / 1000, p99_ms / 1000, float("nan")
        rows_total = int(after.get("rows", 0))  # type: ignore[call-overload]
    else:
        wait_writer_idle(log, idle_s=max(5.0, 3 * args.checkpoint_ms / 1000), timeout_s=args.drain_timeout)
        stop.set()
        writer.join()
        summary = log.tracker.summary()  # its window holds every post-warm-up lag (see WriterLog)
        p50, p99, top = (v if v is not None else float("nan") for v in (summary.p50_s, summary.p99_s, summary.max_s))
        count, rows_total = summary.count, log.rows
    if all_running(port, jid):
        result.get_job_client().cancel().result()  # type: ignore[union-attr]
    else:
        print(f"  job not running at the end: {root_exception(port, jid)}")
    out: dict[str, float | str] = {
        "online": args.online, "delivery": delivery, "rate": rate, "checkpoint_ms": args.checkpoint_ms,
        "rows": count, "p50_s": p50, "p99_s": p99,
        "max_s": top, "load_1m": load[0], "produced": int(rate * seconds), "rows_total": rows_total,
        "redis_keys_deleted": cleanup(features),
    }
    bound = "<= " if in_job else ""
    print(f"freshness {delivery:13s} at {rate:6,.0f} events/s ({args.online} writes Redis): p50 {bound}"
          f"{p50 * 1000:7.0f} ms  p99 {bound}{p99 * 1000:7.0f} ms  max {top * 1000:7.0f} ms over {count} rows "
          f"(load {load[0]:.1f}; {rows_total} rows for {int(rate * seconds)} events incl. warm-up)")
    return out


def _sink_drained(port: int, jid: str, *, idle_s: float, timeout_s: float) -> dict[str, object]:
    """The sink's metrics once its row count stopped moving for ``idle_s`` (bounded by ``timeout_s``)."""
    deadline = time.perf_counter() + timeout_s
    last, since = sink_metrics(port, jid), time.perf_counter()
    while time.perf_counter() < deadline:
        time.sleep(1.0)
        now = sink_metrics(port, jid)
        if now.get("rows") != last.get("rows"):
            last, since = now, time.perf_counter()
        elif time.perf_counter() - since >= idle_s:
            break
    return last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--hotels", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--parallelism", type=int, default=1)
    parser.add_argument("--rates", default="5000", help="comma-separated events/s for the freshness runs")
    parser.add_argument("--deliveries", default="at-least-once", help="of the tile sink, comma-separated")
    parser.add_argument("--duration", type=float, default=60.0, help="measured seconds per freshness run")
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--checkpoint-ms", type=int,
                        default=FeatureJobConfig.model_fields["checkpoint_interval_ms"].default,
                        help="checkpoint interval of the freshness runs (default: the deployed job's)")
    parser.add_argument("--out-of-orderness-ms", type=int, default=200)
    parser.add_argument("--drain-timeout", type=float, default=120.0, help="max seconds to wait for the backlog")
    parser.add_argument("--backlog-idle-timeout-ms", type=int, default=120_000)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-marginal", action="store_true", help="no marginal CPU runs (nor the OVER ratio)")
    parser.add_argument("--marginal-repeats", type=int, default=3,
                        help="runs of the tiled and OVER pairs; the median is the figure")
    parser.add_argument("--online", choices=("job", "writer"), default="job",
                        help="who writes Redis: the job's own sink (default) or the Python online writer")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--run-job", choices=MARGINAL_JOBS, help=argparse.SUPPRESS)
    parser.add_argument("--job-config", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_job:
        _run_job_main(args.run_job, args.job_config, args.events)
        return
    stack = Settings().stack()  # the PRICESTREAM_* ports and state dir, as every command
    print(f"load average at start: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")
    figures: dict = {"load_start": os.getloadavg()[0], "freshness": []}
    if not args.skip_throughput:
        figures["throughput"] = throughput(stack, args)
    for rate in (float(r) for r in args.rates.split(",") if r):
        for delivery in args.deliveries.split(","):
            figures["freshness"].append(freshness(stack, args, delivery=delivery, rate=rate))
    by = {(f["delivery"], f["rate"]): f for f in figures["freshness"]}
    for rate in sorted({f["rate"] for f in figures["freshness"]}):
        eos, alo = by.get(("exactly-once", rate)), by.get(("at-least-once", rate))
        if eos and alo and alo["p99_s"] > 0:
            ratio = eos["p99_s"] / alo["p99_s"]
            print(f"p99 freshness exactly-once / at-least-once at {rate:,.0f} events/s: {ratio:.1f}x")
    figures["load_end"] = os.getloadavg()[0]
    print(f"load average at end: {figures['load_end']:.2f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(figures, fh, indent=2)
    print(summary_line(figures))


def summary_line(figures: dict) -> str:
    """The issue's figures in one line (goals: >= 20,000 events/s, >= 8x less CPU, p99 < 1 s at 5,000/s)."""
    parts = []
    t = figures.get("throughput")
    if t and "over_to_tiled_cpu" in t:
        parts.append(f"sustained {t['sustained_eps']:,.0f} events/s producer->Redis ({t['online']} writes Redis); "
                     f"CPU/event JVM {t['tiled_jvm_cpu_us_per_event']:,.0f} us (marginal) + writer "
                     f"{t['writer_cpu_us_per_event']:,.0f} us + redis-server {t['redis_cpu_us_per_event']:,.0f} us; "
                     f"engine ceiling (bare source) "
                     f"{t['source-only_jvm_cpu_us_per_event']:,.1f} us; "
                     f"OVER/tiled JVM CPU {t['over_to_tiled_cpu']:.1f}x (two sizes), "
                     f"{t.get('over_to_tiled_cpu_in_run', float('nan')):.1f}x (in-run); "
                     f"peer consumer {t['peer_consume_eps']:,.0f}/s")
    for f in figures["freshness"]:
        bound = "<=" if f.get("online") == "job" else ""
        parts.append(f"freshness {f['delivery']} at {f['rate']:,.0f}/s p50 {bound}{f['p50_s'] * 1000:.0f} ms "
                     f"p99 {bound}{f['p99_s'] * 1000:.0f} ms (checkpoints {f.get('checkpoint_ms', '?')} ms)")
    parts.append(f"load {figures['load_start']:.1f} -> {figures['load_end']:.1f} on {os.cpu_count()} cores")
    return "SUMMARY: " + "; ".join(parts)


if __name__ == "__main__":
    main()
