"""The ``pricestream`` command: a thin shell over library calls.

Every flag has a ``PRICESTREAM_*`` environment variable (see :mod:`pricestream.settings`);
times are ISO-8601 with a timezone; long work shows a progress bar on stderr and results go
to stdout. Any error ends the command with one red line naming what is wrong and exit code 1.

Command groups live in :mod:`pricestream.commands`; this module holds the stack commands
(``up``, ``down``, ``status``, ``topics``, ``produce``), ``serve``, ``query``, ``audit`` and ``demo``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pricestream.commands import autoscale as autoscale_cmd
from pricestream.commands import bid_price as bid_price_cmd
from pricestream.commands import cancellations as cancellations_cmd
from pricestream.commands import cold_start as cold_start_cmd
from pricestream.commands import features as features_cmd
from pricestream.commands import heavy as heavy_cmd
from pricestream.commands import jobs as jobs_cmd
from pricestream.commands import k8s as k8s_cmd
from pricestream.commands import keys as keys_cmd
from pricestream.commands import market as market_cmd
from pricestream.commands import models as models_cmd
from pricestream.commands import overbooking as overbooking_cmd
from pricestream.commands import reports as reports_cmd
from pricestream.commands import run as run_cmd
from pricestream.commands import services as services_cmd
from pricestream.commands import simulate as simulate_cmd
from pricestream.commands import snapshots as snapshots_cmd
from pricestream.commands.common import (
    HandledGroup,
    ensure_bindable,
    err,
    fail,
    frame_table,
    new_app,
    out,
    settings,
    table,
)
from pricestream.progress import progress_bar

if TYPE_CHECKING:
    from events.config import KafkaConfig
    from infra.config import StackConfig

app = typer.Typer(
    help="Real-time hotel pricing on a streaming feature platform.",
    no_args_is_help=True,
    cls=HandledGroup,
    pretty_exceptions_enable=False,
)
topics_app = new_app("Kafka topics of the registry.")
audit_app = new_app("The hash-chained audit log of pricing decisions.")
app.add_typer(topics_app, name="topics")
app.add_typer(audit_app, name="audit")
app.add_typer(features_cmd.app, name="features")
app.add_typer(jobs_cmd.flink_app, name="flink")
app.add_typer(jobs_cmd.jobs_app, name="jobs")
app.add_typer(jobs_cmd.druid_app, name="druid")
app.add_typer(snapshots_cmd.app, name="snapshot")
app.add_typer(models_cmd.models_app, name="models")
app.add_typer(models_cmd.rollout_app, name="rollout")
app.add_typer(reports_cmd.monitor_app, name="monitor")
app.add_typer(reports_cmd.evaluate_app, name="evaluate")
app.add_typer(reports_cmd.router_app, name="router")
app.add_typer(services_cmd.app, name="services")
app.command("run")(run_cmd.run)
app.add_typer(market_cmd.app, name="market")
app.add_typer(cold_start_cmd.app, name="cold-start")
app.add_typer(bid_price_cmd.app, name="bid-price")
app.add_typer(cancellations_cmd.app, name="cancellations")
app.add_typer(overbooking_cmd.app, name="overbooking")
app.add_typer(keys_cmd.app, name="keys")
app.add_typer(heavy_cmd.app, name="heavy")
app.add_typer(k8s_cmd.app, name="k8s")
app.command("autoscale")(autoscale_cmd.autoscale)
app.command("simulate")(simulate_cmd.simulate)


@app.command()
def up(
    with_: Annotated[
        list[str] | None, typer.Option("--with", envvar="PRICESTREAM_WITH", help="extra services: druid, flink")
    ] = None,
    secure: Annotated[bool, typer.Option("--secure", envvar="PRICESTREAM_SECURE",
                                         help="Kafka SASL/SCRAM + ACLs per service, Redis ACL users per role")] = False,
    kafka_brokers: Annotated[int, typer.Option(
        "--kafka-brokers", envvar="PRICESTREAM_KAFKA_BROKERS", min=1,
        help="3: a local KRaft cluster (RF 3, min.insync 2) instead of one node")] = 1,
    redis_cluster: Annotated[int, typer.Option(
        "--redis-cluster", envvar="PRICESTREAM_REDIS_CLUSTER", min=0,
        help="3: also a local Redis Cluster of 3 masters + 3 replicas (prints its PRICESTREAM_REDIS_URL)")] = 0,
) -> None:
    """Start the local stack (Kafka, Redis; optionally Druid, Flink). Idempotent."""
    from infra import stack

    config = settings().stack()
    if redis_cluster:
        _up_redis_cluster(config, redis_cluster)
    if kafka_brokers > 1:
        _up_kafka_cluster(config, kafka_brokers)
        return
    if secure:
        config = config.model_copy(update={"secure": True})
    if config.secure:  # passwords nobody set are generated once into a 0600 file that every command reads
        from infra import credentials

        config, saved, made = credentials.ensure(config)
        if made:
            err.print(f"generated {len(made)} passwords of the secure stack ({', '.join(made)}) into {saved} "
                      f"(mode 0600); commands with PRICESTREAM_STATE_DIR={config.state_dir} read them from there",
                      soft_wrap=True, highlight=False)
    extras = set(with_ or [])
    unknown = extras - {"druid", "flink"}
    if unknown:
        fail(f"--with: got {sorted(unknown)}, expected any of ['druid', 'flink']")
    with err.status("resolving jars and starting Kafka and Redis"):
        statuses = stack.up(config)
    if "flink" in extras:
        from infra import flink_cluster

        with err.status("starting the standalone Flink cluster"):
            flink_cluster.start(config)
    if "druid" in extras:
        from infra import druid_stack

        with err.status("assembling and starting Druid (minutes on first run)"):
            druid_stack.assemble(config.cache_dir, mvn=config.mvn)
            druid_stack.start(settings().druid())
        statuses = stack.status(config, druid=settings().druid())
    _print_status(statuses)


def _up_kafka_cluster(config: StackConfig, brokers: int) -> None:
    """``up --kafka-brokers N``: Redis and an N-node Kafka cluster (``infra.kafka_cluster``)."""
    from infra import kafka_cluster, redis_server
    from infra.errors import StartError
    from infra.jars import resolve_all

    with err.status(f"resolving jars, starting Redis and a {brokers}-node Kafka cluster"):
        resolve_all(config)
        redis_server.start(config)
        try:
            kafka_cluster.start(config, brokers)
        except StartError as exc:
            fail(str(exc))
    out.print(f"kafka cluster of {brokers}: PRICESTREAM_KAFKA_BOOTSTRAP={kafka_cluster.bootstrap(config, brokers)}")


def _up_redis_cluster(config: StackConfig, masters: int) -> None:
    """``up --redis-cluster N``: N masters and a replica each (``infra.redis_cluster``), beside the single Redis."""
    from infra import redis_cluster
    from infra.errors import StartError

    with err.status(f"starting a Redis Cluster of {masters} masters and {masters} replicas"):
        try:
            url = redis_cluster.start(config, masters)
        except StartError as exc:
            fail(str(exc))
    out.print(f"redis cluster of {masters} masters: PRICESTREAM_REDIS_URL={url}")


@app.command()
def down() -> None:
    """Stop what ``up`` started (pid files only)."""
    from infra import druid_stack, flink_cluster, stack

    config = settings().stack()
    stopped = druid_stack.stop(settings().druid().state_dir)
    if flink_cluster.stop(config):
        stopped.append("flink")
    stopped += stack.down(config)
    from infra import kafka_cluster

    if kafka_cluster.stop(config):
        stopped.append("kafka-cluster")
    from infra import redis_cluster

    if redis_cluster.stop(config):
        stopped.append("redis-cluster")
    out.print(f"stopped: {', '.join(stopped) or 'nothing was running'}")


@app.command()
def status() -> None:
    """Show what is running: Kafka (each node of a cluster), Redis (and a Redis Cluster), Druid when started."""
    from infra import stack

    s = settings()
    _print_status(stack.status(s.stack(), druid=s.druid()))


def _print_status(statuses: list) -> None:
    rows = [(s.name, s.pid or "-", "yes" if s.ready else "no", s.endpoint) for s in statuses]
    out.print(table(("service", "pid", "ready", "endpoint"), rows))


@topics_app.command("create")
def topics_create() -> None:
    """Create every registry topic and its DLQ twin (idempotent).

    On a secure stack, as the admin, also each service principal's ACLs on this prefix's topics and groups
    and the Redis users' key pattern of its Feast project (as ``run`` does), so every principal may use them.
    """
    from events.admin import create_topics

    s = settings()
    result = create_topics(s.kafka())
    out.print(table(("topic", "result"), sorted(result.items())))
    if s.secure:
        from infra.kafka_security import apply_acls
        from infra.redis_server import grant_project

        with err.status(f"granting each principal its ACLs on the topics of prefix {s.topic_prefix!r}"):
            bindings = apply_acls(s.stack(), s.topic_prefix)
            grant_project(s.stack())
        out.print(f"ACLs: {bindings} bindings for prefix {s.topic_prefix!r} (each principal its own topics and "
                  f"groups); Redis users granted project {s.feast_project!r}")


@app.command()
def produce(
    hotels: Annotated[int, typer.Option(envvar="PRICESTREAM_HOTELS", min=1)] = 20,
    rate: Annotated[float, typer.Option(envvar="PRICESTREAM_RATE", help="events per second", min=1.0)] = 2000.0,
    duration: Annotated[float, typer.Option(envvar="PRICESTREAM_DURATION", help="seconds", min=0.1)] = 10.0,
    seed: Annotated[int, typer.Option(envvar="PRICESTREAM_SEED")] = 7,
) -> None:
    """Publish simulated behaviour events to Kafka at a steady rate."""
    from events.admin import create_topics
    from pricestream.produce import produce as run_produce

    s = settings().acting_as("producer")
    config = s.kafka()
    if not s.secure and "created" in create_topics(config).values():  # secure: the admin creates topics
        with err.status("waiting for the new topics' partition leaders"):
            _wait_for_leaders(config, ("behaviour.events", "behaviour.events.dlq"))
    with progress_bar("producing", total=int(rate * duration)) as bar:
        report = run_produce(
            config, hotels=hotels, rate=rate, duration_s=duration, seed=seed, profiles=s.hotel_profiles(),
            on_progress=lambda n: bar.advance(bar.task_ids[0], n),
        )
    out.print(
        f"sent {report.sent}, delivered {report.delivered}, failed {report.failed}, "
        f"rejected before sending {report.rejected}, DLQ'd {report.dlq_records} "
        f"({report.rate:,.0f} events/s over {report.seconds:.1f}s)"
    )


LEADER_WAIT_S = 15.0
"""How long a freshly created topic may take to elect partition leaders (KRaft: usually well under a second)."""


def _wait_for_leaders(config: KafkaConfig, topics: tuple[str, ...]) -> None:
    """Block until every partition of ``topics`` answers a watermark query (a just-created topic may not yet)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({**config.client_conf(), "group.id": "pricestream-leader-wait"})
    deadline = time.monotonic() + LEADER_WAIT_S
    try:
        for topic in (config.topic(t) for t in topics):
            while True:
                meta = consumer.list_topics(topic, timeout=5).topics.get(topic)
                try:
                    for pid in meta.partitions if meta is not None and meta.partitions else ():
                        consumer.get_watermark_offsets(TopicPartition(topic, pid), timeout=2)
                    if meta is not None and meta.partitions:
                        break
                except KafkaException:
                    pass  # leader not elected yet: retry until the deadline
                if time.monotonic() > deadline:
                    fail(f"topic {topic!r} has no partition leader after {LEADER_WAIT_S:.0f}s at "
                         f"{config.bootstrap_servers}")
                time.sleep(0.2)
    finally:
        consumer.close()


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(envvar="PRICESTREAM_HTTP_HOST", help="bind address")] = None,
    port: Annotated[int | None, typer.Option(envvar="PRICESTREAM_HTTP_PORT", min=1, max=65535)] = None,
    audit: Annotated[bool, typer.Option(envvar="PRICESTREAM_AUDIT", help="append decisions to the audit log")] = True,
) -> None:
    """Serve ``POST /v1/price`` (uvicorn) through the serving path of :mod:`pricestream.app`.

    Decisions go to the audit log and ``pricing.decisions``; the running server follows
    ``rollout`` and ``models`` commands and router recalibration within ``PRICESTREAM_FOLLOW_INTERVAL_S``.
    SIGTERM: in-flight requests are answered, the audit log is fsynced, Kafka has every decision, exit 0.
    """
    from events.admin import create_topics
    from events.topics import TOPICS
    from pricestream.app import build_serving_path, serve_http

    s = settings().acting_as("scorer", redis_user="scorer")  # a secure stack's least-privilege logins
    service = s.http_service(host or s.http_host)  # refuses security off on a bind beyond loopback, before loading
    ensure_bindable(host or s.http_host, port or s.http_port, what="serve --port")  # before minutes of training
    if s.http_ops_port is not None:
        ensure_bindable(s.ops_host, s.http_ops_port, what="serve ops port (PRICESTREAM_HTTP_OPS_PORT)")
    create_topics(s.kafka(), [TOPICS["pricing.decisions"], TOPICS["pricing.decisions.dlq"],
                              *([TOPICS["audit.heads"]] if audit and s.audit_topic_anchors() else [])])
    with progress_bar("loading models", total=2) as bar:
        path = build_serving_path(
            s, audit=audit, on_progress=lambda step, done, total: bar.update(
                bar.task_ids[0], description=step, completed=done, total=total)
        )
        bar.update(bar.task_ids[0], description="models loaded", completed=2, total=2)
    health = path.scorer.health()
    bind_host, bind_port = host or s.http_host, port or s.http_port
    err.print(
        f"serving on {service.scheme}://{bind_host}:{bind_port}  light {health['light']['version']}, "
        f"heavy {health['heavy']['version']}, rollout {health['rollout']['stage']}; "
        f"audit log: {s.audit() if audit else 'off'}; decisions to {s.kafka().topic('pricing.decisions')}"
    )
    ops = None if s.http_ops_port is None else (s.ops_host, s.http_ops_port)
    err.print(f"API keys: {service.keys_file or 'off (loopback bind)'}; rate limit: {service.rate_limit or 'off'}; "
              f"/healthz and /metrics on {f'port {ops[1]}' if ops else 'the pricing port'}")
    serve_http(path, host=bind_host, port=bind_port, service=service, ops=ops)


@app.command("serve-stream")
def serve_stream(
    max_idle: Annotated[
        float | None, typer.Option(envvar="PRICESTREAM_STREAM_MAX_IDLE", help="stop after this many idle seconds")
    ] = None,
    batch_size: Annotated[int, typer.Option(envvar="PRICESTREAM_STREAM_BATCH", min=1)] = 500,
    ops_port: Annotated[int | None, typer.Option(
        envvar="PRICESTREAM_OPS_PORT", min=0, max=65535, help="/healthz and /metrics (default: none; 0: any)")] = None,
) -> None:
    """Price ``pricing.requests`` into ``pricing.decisions`` as a consumer-group service."""
    from events.admin import create_topics
    from pricestream.app import build_serving_path
    from pricestream.commands.common import json_logs, stoppable
    from serving.stream import StreamScorerConfig, runtime_config
    from serving.stream import run as run_stream

    s = settings()
    if ops_port is not None:
        ensure_bindable(s.ops_host, ops_port, what="serve-stream --ops-port")  # before the models and the group
    json_logs()
    create_topics(s.kafka())
    config = StreamScorerConfig(kafka=s.kafka(), batch_size=batch_size)
    runtime = runtime_config(config, max_idle_s=max_idle, ops_host=s.ops_host, ops_port=ops_port,
                             grace_s=s.grace_s, log_every_s=s.log_every_s,
                             instance_id=f"{s.topic_prefix}serve-stream-{s.service_instance}")
    # the stream runtime publishes the decisions it serves; the path publishes only shadow ones
    with build_serving_path(s, publish="shadow") as path, stoppable(s.grace_s) as stop:
        stats = run_stream(config, path.scorer, stop_event=stop, runtime=runtime)
    out.print(
        f"decisions {stats.decisions}, dead-lettered {stats.dead_lettered}, tiers {dict(stats.by_tier)}, "
        f"{stats.throughput:,.0f} requests/s while busy"
    )


@app.command()
def query(
    sql: Annotated[str, typer.Argument(help="SQL over features_v1, events (DuckDB) or behaviour_events (Druid)")],
    engine: Annotated[str, typer.Option(envvar="PRICESTREAM_QUERY_ENGINE", help="auto, druid or duckdb")] = "auto",
    out_file: Annotated[
        Path | None, typer.Option("--out", envvar="PRICESTREAM_QUERY_OUT", help="write all rows to .csv or .parquet")
    ] = None,
    limit: Annotated[int, typer.Option(envvar="PRICESTREAM_QUERY_LIMIT", min=1, help="rows shown")] = 50,
) -> None:
    """Run analyst SQL on Druid, or on DuckDB over the offline store when Druid is not up.

    features_v1 holds one row per feature row (Druid and DuckDB): COUNT(*) counts them. Druid's
    behaviour_events is rolled up per minute and key: there count events with SUM(events), not COUNT(*),
    which counts rolled-up rows (29,990 for 30,000 events), and average prices with
    SUM(price_sum) / SUM(priced_events). On DuckDB, events holds one row per event the feature job
    accepted, with the contract's field names (event_type, event_time, hotel_id, room_type, stay_date,
    channel, segment, rooms, price_shown, price_paid, rate, competitor_id, rooms_left, capacity,
    booking_id) and the job's columns (is_search, is_view, n_booked, n_cancelled, lead_days): for
    example SELECT hotel_id, count(*), avg(price_paid) FROM events WHERE event_type = 'booking' GROUP BY 1.
    """
    from features.analytics import query as run_query

    if engine not in ("auto", "druid", "duckdb"):
        fail(f"--engine: got {engine!r}, expected one of ['auto', 'druid', 'duckdb']")
    if out_file is not None and out_file.suffix not in (".csv", ".parquet"):
        fail(f"--out: got {str(out_file)!r}, expected a path ending in .csv or .parquet")
    s = settings()
    with err.status(f"querying ({engine})"):
        result = run_query(sql, engine=engine, druid_url=s.druid_url, offline_root=s.offline())  # type: ignore[arg-type]
    from pricestream.commands.features import plain_numbers

    out.print(frame_table(plain_numbers(result.frame.head(limit)), limit=limit))
    shown = min(limit, len(result.frame))
    line = f"{len(result.frame)} rows (showing {shown}), answered by {result.engine}"
    if out_file is not None:
        line += f"; written to {result.write(out_file)}"
    out.print(line)


@audit_app.command("verify")
def audit_verify(
    path: Annotated[Path | None, typer.Argument(envvar="PRICESTREAM_AUDIT_LOG", help="audit log (default: settings)")]
    = None,
) -> None:
    """Walk the MAC chain, head and anchors of the audit log; exit 1 naming the first broken line."""
    from audit.verify import verify

    s = settings().acting_as("auditor")  # a secure stack's auditor principal reads audit.heads, nothing else
    target = path or s.audit()
    remote = None
    if s.audit_topic_anchors():  # the anchors on the audit.heads topic too (they survive deleted files)
        from audit.anchors import resolve_key
        from audit.errors import AuditLogError
        from audit.kafka_anchors import read_topic_anchors

        try:
            remote = read_topic_anchors(s.kafka(), target, resolve_key(s.audit_key))
        except AuditLogError as exc:  # e.g. the principal may not read the topic: a message, not a traceback
            fail(f"audit log {target}: {exc}")
    result = verify(target, key=s.audit_key, anchors=s.audit_anchors, remote=remote)
    last = f"last intact entry: seq {result.last_seq} at {result.last_timestamp or '-'}, hash {result.last_hash[:12]}"
    if not result.ok and result.first_bad_position is None:
        fail(f"audit log {target}: {result.reason}")
    if not result.ok:
        fail(f"audit log {target}: chain broken at line {result.first_bad_position}: {result.reason} "
             f"({result.entries} entries intact before it; {last})")
    out.print(f"audit log {target}: {result.entries} entries, hash chain intact; {last}")


@audit_app.command("repair")
def audit_repair(
    path: Annotated[Path | None, typer.Argument(envvar="PRICESTREAM_AUDIT_LOG", help="audit log (default: settings)")]
    = None,
) -> None:
    """Cut a torn last line (a crash in the middle of a write) off the log; its bytes are saved aside."""
    from audit.log import repair

    target = path or settings().audit()
    if not target.exists():
        fail(f"audit log {target}: no such file")
    result = repair(target)
    if result.dropped_bytes == 0:
        out.print(f"audit log {target}: no torn last line; nothing to repair (last seq {result.last_seq})")
        return
    out.print(f"audit log {target}: cut {result.dropped_bytes} bytes of a torn last line (saved to "
              f"{result.saved_to}); last intact entry seq {result.last_seq}")


@app.command()
def demo(
    nights: Annotated[int, typer.Option(envvar="PRICESTREAM_DEMO_NIGHTS", min=1,
                                        help="consecutive stay nights counted, each played to its close")] = 10,
    hotels: Annotated[int, typer.Option(envvar="PRICESTREAM_DEMO_HOTELS", min=1)] = 3,
    seed: Annotated[int | None, typer.Option(envvar="PRICESTREAM_SEED")] = None,
    market: Annotated[str, typer.Option(envvar="PRICESTREAM_DEMO_MARKET",
                                        help="simulated market: resort, city (calibrated presets) or flat")] = "city",
    window_days: Annotated[int, typer.Option(envvar="PRICESTREAM_DEMO_WINDOW_DAYS", min=1,
                                             help="booking window played before the first night (at most the "
                                                  "market's horizon; earlier bookings are history)")] = 90,
    phases: Annotated[int, typer.Option(envvar="PRICESTREAM_DEMO_PHASES", min=1,
                                        help="parts of about equal shoppers; the services catch up after each")] = 6,
    scenario: Annotated[str, typer.Option(envvar="PRICESTREAM_DEMO_SCENARIO",
                                          help="regime change at the middle phase (market.scenarios)")] = "price_war",
    train_every: Annotated[int, typer.Option(envvar="PRICESTREAM_DEMO_TRAIN_EVERY", min=1,
                                             help="training examples per guarded update of the trainer")] = 150,
) -> None:
    """End to end on the local stack over complete stay nights: RevPAR, ADR and occupancy against static, rules
    only and the DP oracle on the same shoppers, a regime change mid-run, and what the loop did about it."""
    from pricestream.demo import MARKETS, SCENARIOS, phases_done, run_demo

    if market not in MARKETS:
        fail(f"--market / PRICESTREAM_DEMO_MARKET: {market!r} is not a market; expected one of {', '.join(MARKETS)}")
    if scenario not in SCENARIOS:
        fail(f"--scenario / PRICESTREAM_DEMO_SCENARIO: {scenario!r} is not a scenario; expected one of "
             f"{', '.join(SCENARIOS)}")
    s = settings()
    with progress_bar("demo", total=phases) as bar:
        task = bar.task_ids[0]
        report = run_demo(
            s, nights=nights, hotels=hotels, seed=s.seed if seed is None else seed, market=market,
            window_days=window_days, phases=phases, scenario=scenario, train_every=train_every,
            on_progress=lambda message: bar.update(task, description=message, completed=phases_done(message)),
        )
    for line in report.summary_lines():
        out.print(line, highlight=False, markup=False, soft_wrap=True)


def main() -> None:  # pragma: no cover - console script entry
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


__all__ = ["app", "main"]
