"""The stack's commands: ``up``, ``down``, ``status``, ``topics create`` and ``produce``.

``pricestream up`` starts Kafka and Redis (or clusters of them) under the state dir, idempotently;
``down`` stops them; ``status`` prints what runs and where; ``produce`` publishes events from a file.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from pricestream.commands.common import err, fail, new_app, out, settings, table
from pricestream.progress import progress_bar

if TYPE_CHECKING:
    from events.config import KafkaConfig
    from infra.config import StackConfig

F = TypeVar("F", bound=Callable[..., None])
topics_app = new_app("Kafka topics of the registry.")
COMMANDS: list[Callable[..., None]] = []
"""The top-level commands of this module, in the order ``pricestream --help`` lists them."""


def _command(fn: F) -> F:
    COMMANDS.append(fn)
    return fn


def _topics_create(fn: F) -> F:
    return topics_app.command("create")(fn)


@_command
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


@_command
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


@_command
def status() -> None:
    """Show what is running: Kafka (each node of a cluster), Redis (and a Redis Cluster), Druid when started."""
    from infra import stack

    s = settings()
    _print_status(stack.status(s.stack(), druid=s.druid()))


def _print_status(statuses: list) -> None:
    rows = [(s.name, s.pid or "-", "yes" if s.ready else "no", s.endpoint) for s in statuses]
    out.print(table(("service", "pid", "ready", "endpoint"), rows))


@_topics_create
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


@_command
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
