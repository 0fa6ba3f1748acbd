"""``pricestream jobs ...``, ``flink ...`` and ``druid ...``: the feature job and the clusters it runs on."""

from __future__ import annotations

import os
import signal
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pricestream.commands.common import err, fail, kv_table, new_app, out, settings

if TYPE_CHECKING:
    from pipelines.config import FeatureJobConfig

jobs_app = new_app("Flink jobs (embedded MiniCluster or the standalone cluster).")
flink_app = new_app("The standalone Flink cluster shipped with the PyFlink wheel.")
druid_app = new_app("Druid ingestion (Kafka supervisors).")

JOBS = ("features",)
_Startup = Annotated[
    str | None,
    typer.Option(envvar="PRICESTREAM_JOB_STARTUP", help="earliest-offset, group-offsets or latest-offset"),
]
_Bounded = Annotated[
    bool, typer.Option(envvar="PRICESTREAM_JOB_BOUNDED", help="stop at the offsets latest when the job started")
]
_Parallelism = Annotated[int | None, typer.Option(envvar="PRICESTREAM_JOB_PARALLELISM", min=1)]
_Lateness = Annotated[
    int | None,
    typer.Option("--allowed-lateness-ms", envvar="PRICESTREAM_JOB_ALLOWED_LATENESS_MS", min=0,
                 help="how far behind the watermark an event still updates its tile (days for a backfill)"),
]
_Savepoint = Annotated[
    Path | None,
    typer.Option("--from-savepoint", envvar="PRICESTREAM_JOB_FROM_SAVEPOINT",
                 help="restore from this savepoint or checkpoint directory"),
]
_Fresh = Annotated[
    bool,
    typer.Option("--fresh", envvar="PRICESTREAM_JOB_FRESH",
                 help="ignore retained checkpoints: empty state, offsets per --startup"),
]


def _job_config(job: str, *, startup: str | None, bounded: bool, parallelism: int | None,
                allowed_lateness_ms: int | None = None) -> FeatureJobConfig:
    if job not in JOBS:
        fail(f"job: got {job!r}, expected one of {list(JOBS)}")
    config = settings().feature_job(startup=startup, bounded=bounded or None, parallelism=parallelism,
                                    allowed_lateness_ms=allowed_lateness_ms)
    if not config.connector_jar.exists():
        fail(f"Flink Kafka connector jar {config.connector_jar} not found; run `pricestream up` to resolve jars")
    return config


@jobs_app.command("run")
def jobs_run(
    job: Annotated[str, typer.Argument(help="job name: features")],
    startup: _Startup = None,
    bounded: _Bounded = False,
    parallelism: _Parallelism = None,
    allowed_lateness_ms: _Lateness = None,
    from_savepoint: _Savepoint = None,
    fresh: _Fresh = False,
) -> None:
    """Run a job in the embedded Flink MiniCluster, in this process, until it ends (bounded) or Ctrl-C.

    By default it resumes from the latest retained checkpoint (state and offsets), so a restart
    after a crash loses nothing; ``--from-savepoint PATH`` and ``--fresh`` choose explicitly.
    Ctrl-C or SIGTERM stops it with a savepoint, which the next run resumes from.
    """
    from pipelines import feature_job

    if from_savepoint is not None and fresh:
        fail("--from-savepoint and --fresh: got both, expected at most one")
    config = _job_config(job, startup=startup, bounded=bounded, parallelism=parallelism,
                         allowed_lateness_ms=allowed_lateness_ms)
    if settings().secure:  # the broker's verdict on the job's principal before the JVM starts, as services run's
        from pricestream.commands.services import check_principal_access

        check_principal_access(settings().acting_as("features"), "features")
    restore = feature_job.resume_point(config, savepoint=from_savepoint, fresh=fresh)
    config = config.model_copy(update={"restore_from": restore})
    err.print(f"restoring from {restore}" if restore else f"no checkpoint restored: offsets per {config.startup}")
    what = "bounded: until the offsets at start" if config.bounded else "unbounded: Ctrl-C to stop"
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    with err.status(f"feature job {config.topic(config.source_topic)} -> {config.topic(config.sink_topic)} ({what})"):
        savepoint = _run_until_stopped(config, stop)
    if savepoint is not None:
        err.print(f"stopped with a savepoint at {savepoint}")
        return
    out.print(f"feature job finished: {config.topic(config.source_topic)} -> {config.topic(config.sink_topic)}")


def _run_until_stopped(config: FeatureJobConfig, stop: threading.Event, *, poll_s: float = 0.5) -> str | None:
    """Run the job until it ends (None; its failure raised) or ``stop`` is set (a savepoint's path).

    An ended job is read from its execution result, a future that holds it after the job's MiniCluster
    has shut down: asking that cluster for the job's status then fails (issue 31 item 9: a bounded run
    that completed ended with exit 1 on ``MiniCluster ... has already been shut down``).
    """
    from pipelines import feature_job

    result = feature_job.run(config, wait=False)
    client = result.get_job_client()
    if client is None:
        msg = "jobs run: got a job without a client, expected an attached run"
        raise RuntimeError(msg)
    ended = client.get_job_execution_result()
    while not stop.is_set():
        if ended.done():
            ended.result()  # raises the job's failure, if it failed
            return None
        stop.wait(poll_s)
    if ended.done():  # it ended as the stop came: nothing left to stop
        ended.result()
        return None
    return feature_job.stop_with_savepoint(result, config)


@jobs_app.command("backfill")
def jobs_backfill(
    job: Annotated[str, typer.Argument(help="job name: features")],
    files: Annotated[list[Path] | None, typer.Argument(help="event files, one JSON event per line")] = None,
    topic: Annotated[str | None, typer.Option(help="replay this historical topic instead of files")] = None,
    allowed_lateness_ms: _Lateness = None,
    parallelism: _Parallelism = None,
) -> None:
    """Replay a historical topic or a set of event files through the job, bounded, then exit.

    Files are published unchanged to their own topic first; the job reads it from the start with
    a fresh group and checkpoints and, by default, ten years of allowed lateness (history is rarely
    in event-time order). Its rows go to the usual sink, like the live job's.
    """
    import uuid

    from pipelines import backfill, feature_job

    if (topic is None) == (not files):
        fail("backfill: got " + ("both files and --topic" if topic else "neither files nor --topic")
             + ", expected exactly one of them")
    missing = [str(p) for p in files or [] if not p.is_file()]
    if missing:
        fail(f"backfill files: {missing} not found, expected readable files")
    run_id = uuid.uuid4().hex[:8]
    base = _job_config(job, startup=None, bounded=True, parallelism=parallelism)
    source = topic or f"{backfill.BACKFILL_TOPIC}-{run_id}"
    if files:
        with err.status(f"publishing {len(files)} file(s) to {base.topic(source)}") as status:
            sent = backfill.publish_files(settings().kafka(), source, files,
                                          progress=lambda n: status.update(f"published {n:,} records"))
        err.print(f"published {sent.records:,} records to {base.topic(source)}")
        for refused in sent.refused:
            err.print(f"[red]not published[/red] {refused}")
    backfill.prepare_topics(settings().kafka(), source)
    config = backfill.backfill_config(base, source_topic=source, run_id=run_id, allowed_lateness_ms=allowed_lateness_ms)
    with err.status(f"backfill {config.topic(source)} -> {config.topic(config.sink_topic)} (bounded)"):
        feature_job.run(config)
    out.print(f"backfill finished: {config.topic(source)} -> {config.topic(config.sink_topic)}; "
              f"dead letters in {config.topic(source)}.dlq")
    if files and sent.refused:
        raise typer.Exit(1)


@jobs_app.command("submit")
def jobs_submit(
    job: Annotated[str, typer.Argument(help="job name: features")],
    startup: _Startup = None,
    bounded: _Bounded = False,
    parallelism: _Parallelism = None,
) -> None:
    """Submit a job to the standalone Flink cluster (``pricestream flink up`` first); prints the job id."""
    from infra import flink_cluster
    from infra.config import REPO_ROOT

    config = _job_config(job, startup=startup, bounded=bounded, parallelism=parallelism)
    stack = settings().stack()
    if flink_cluster.overview(stack) is None:
        fail(f"no Flink cluster answers at {flink_cluster.rest_url(stack)}; start one with `pricestream flink up`")
    module = REPO_ROOT / "pipelines" / "feature_job.py"
    # The config holds the job's credentials on a secure stack: a file only its owner reads, not argv
    # (which `ps` shows to every user); the client reads it while it builds the job, then it goes.
    stack.state_dir.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="job-config-", suffix=".json", dir=stack.state_dir)  # mode 0600
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(config.model_dump_json())
        with err.status(f"submitting {module.name} to {flink_cluster.rest_url(stack)}"):
            job_id = flink_cluster.submit_python_job(stack, module, ["--config-file", name])
    finally:
        Path(name).unlink(missing_ok=True)
    out.print(f"submitted {job}: job id {job_id} ({flink_cluster.rest_url(stack)}/#/job/running/{job_id})")


@flink_app.command("up")
def flink_up(
    taskmanagers: Annotated[int, typer.Option("--taskmanagers", min=1, envvar="PRICESTREAM_FLINK_TASKMANAGERS",
                                              help="TaskManager processes (slots: flink_taskmanager_slots each)")] = 1,
) -> None:
    """Start the standalone JobManager and TaskManagers (idempotent); run jobs above parallelism 1 on them."""
    from infra import flink_cluster

    stack = settings().stack().model_copy(update={"flink_taskmanagers": taskmanagers})
    with err.status("starting the Flink cluster"):
        overview = flink_cluster.start(stack)
    out.print(f"flink up at {flink_cluster.rest_url(stack)}: {overview.get('taskmanagers')} taskmanager(s), "
              f"{overview.get('slots-total')} slots")


@flink_app.command("down")
def flink_down() -> None:
    """Stop the cluster that ``flink up`` started."""
    from infra import flink_cluster

    stopped = flink_cluster.stop(settings().stack())
    out.print("flink stopped" if stopped else "flink was not running (no pid files)")


@flink_app.command("status")
def flink_status() -> None:
    """Cluster overview from the REST API."""
    from infra import flink_cluster

    stack = settings().stack()
    overview = flink_cluster.overview(stack)
    if overview is None:
        out.print(f"flink: not running (nothing answers at {flink_cluster.rest_url(stack)})")
        return
    out.print(kv_table(sorted(overview.items()), title=f"flink at {flink_cluster.rest_url(stack)}"))


@druid_app.command("ingest")
def druid_ingest(
    druid_url: Annotated[str | None, typer.Option(envvar="PRICESTREAM_DRUID_URL", help="router or overlord")] = None,
) -> None:
    """Create or update the Kafka supervisors that ingest ``features.v1`` and ``behaviour.events``."""
    from infra.druid_stack import submit_supervisors

    s = settings()
    url = druid_url or s.druid_url
    kafka = s.kafka()
    with err.status(f"submitting supervisors to {url}"):
        from infra.kafka_security import java_client_properties

        login = java_client_properties(s.stack(), s.kafka_principal or "druid", shaded=False)  # secure stack
        ids = submit_supervisors(url, kafka.bootstrap_servers, topic_prefix=kafka.topic_prefix,
                                 consumer_properties=login)
    out.print(f"supervisors running: {', '.join(ids)} (Druid at {url})")

