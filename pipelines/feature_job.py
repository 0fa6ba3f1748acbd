"""The feature job: ``behaviour.events`` → parsed once, validated → tiles on ``features.v1`` (+ DLQ).

Run it in the embedded MiniCluster (the default)::

    python -m pipelines.feature_job --bootstrap 127.0.0.1:9092 --connector-jar PATH

or submit the same module to a standalone cluster (``pricestream jobs submit features``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
from pathlib import Path

from pyflink.common import Configuration
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.java_gateway import get_gateway
from pyflink.table import StatementSet, StreamTableEnvironment, TableResult
from pyflink.util.java_utils import add_jars_to_context_class_loader

from events.contract import encoded_job_spec
from pipelines.config import FeatureJobConfig
from pipelines.feature_sql import (
    DEAD_LETTERS_VIEW,
    TILE_VALUES_VIEW,
    all_statements,
    source_spec,
    tile_spec,
)

SPEC_PARAMETER = "pricestream.contract"
"""Name of the job parameter ``ParseEvent.java`` reads the contract spec from."""


def job_configuration(config: FeatureJobConfig) -> Configuration:
    """Flink settings of the job: checkpointing, restore, stable uids, UTC."""
    conf = Configuration()
    conf.set_string("pipeline.jars", ";".join(jar.resolve().as_uri() for jar in (config.connector_jar,
                                                                                  config.functions_jar)))
    # The contract's rules reach the JVM parser as a job parameter: one definition, in events/.
    conf.set_string("pipeline.global-job-parameters", f"{SPEC_PARAMETER}:{encoded_job_spec(config.hotels)}")
    conf.set_string("pipeline.name", "pricestream-features")
    conf.set_string("parallelism.default", str(config.parallelism))
    conf.set_string("execution.checkpointing.interval", f"{config.checkpoint_interval_ms} ms")
    conf.set_string("execution.checkpointing.mode", "EXACTLY_ONCE")
    conf.set_string("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION")
    # Checkpoints always go to files: the JobManager-memory default holds a few MB and
    # fails once the state grows (seen at ~50k events with OVER windows).
    checkpoints = config.checkpoint_dir or Path(tempfile.gettempdir()) / "pricestream-checkpoints" / config.group_id
    conf.set_string("execution.checkpointing.dir", checkpoints.resolve().as_uri())
    conf.set_string("state.checkpoints.num-retained", "3")
    if config.restore_from is not None:
        conf.set_string("execution.state-recovery.path", config.restore_from.resolve().as_uri())
    # Savepoint compatibility: every operator gets a deterministic uid from the plan.
    conf.set_string("table.exec.uid.generation", "ALWAYS")
    conf.set_string("table.local-time-zone", "UTC")
    # Parse and classify each event once: without this the planner inlines the shared
    # parsed -> classified views into every consumer's Calc (seven), 247 JSON_VALUE calls
    # per event; with it the shared `parsed` view is one optimize block, computed once (13).
    conf.set_string("table.optimizer.reuse-optimize-block-with-digest-enabled", "true")
    # SQL operators copy what they keep; skipping the defensive copies between chained operators
    # cut the job's CPU per event by ~9% (bench/ingest.py).
    conf.set_string("pipeline.object-reuse", "true")
    conf.set_string("table.exec.source.idle-timeout", f"{config.idle_timeout_ms} ms")
    # No aggregation runs in SQL (the tile operator keeps and evicts its own state): no mini-batch,
    # whose assigner would also swap the event-time watermarks for processing-time ones, and no state TTL.
    conf.set_string("table.exec.mini-batch.enabled", "false")
    # Bad data never fails the job (it goes to the DLQ); a failure is infrastructure, so
    # retry a few times and then surface it instead of restarting forever.
    conf.set_string("restart-strategy.type", "fixed-delay")
    conf.set_string("restart-strategy.fixed-delay.attempts", str(config.restart_attempts))
    conf.set_string("restart-strategy.fixed-delay.delay", "2 s")
    return conf


def build_feature_job(env: StreamTableEnvironment, config: FeatureJobConfig) -> StatementSet:
    """Register the source side, the sinks and the views on ``env``; return the job's statement set."""
    ddl, inserts = all_statements(config)
    for statement in ddl:  # features.v1, the DLQ, Redis
        env.execute_sql(statement)
    register_source(env, config)
    job = env.create_statement_set()
    for statement in inserts:  # DLQ, the value rows (tiles and inventory) to features.v1 and Redis
        job.add_insert_sql(statement)
    return job


def register_source(env: StreamTableEnvironment, config: FeatureJobConfig) -> None:
    """The JVM source side (``SourceJob.java``) into the tile operator (``TileJob.java``), as two views.

    Kafka records are parsed once, validated, stamped with event time and watermarks, and split into
    valid events, inventory rows and dead letters, all in the source's task; the valid events go,
    keyed per entity group, to the tile operators. SQL cannot keep a key's tiles, merge them on a
    flush timer and drop the ones that left every window, so the job is DataStream code up to its
    sinks (all on the JVM: PyFlink only wires the Java objects). Registers
    :data:`~pipelines.feature_sql.TILE_VALUES_VIEW` (tiles and inventory) and
    :data:`~pipelines.feature_sql.DEAD_LETTERS_VIEW`.
    """
    add_jars_to_context_class_loader([config.functions_jar.resolve().as_uri()])  # the client's view of the jar
    flink = get_gateway().jvm.io.pricestream.flink
    source = flink.SourceJob.build(env._j_tenv.execEnv(), source_spec(config))
    rows = flink.TileJob.union(flink.TileJob.apply(source.valid(), tile_spec(config)), source.inventory())
    env.create_temporary_view(TILE_VALUES_VIEW, env.from_data_stream(DataStream(rows)))
    env.create_temporary_view(DEAD_LETTERS_VIEW, env.from_data_stream(DataStream(source.dlq())))


def create_env(config: FeatureJobConfig) -> StreamTableEnvironment:
    stream_env = StreamExecutionEnvironment.get_execution_environment(job_configuration(config))
    return StreamTableEnvironment.create(stream_env)


SAVEPOINTS = "savepoints"
"""Under the checkpoint directory: where a stop with savepoint writes (``stop_with_savepoint``)."""


def latest_checkpoint(root: Path) -> Path | None:
    """The newest completed checkpoint or savepoint under ``root``, or None.

    Retained checkpoints of earlier runs sit beside each other (``<job id>/chk-<n>`` with its
    ``_metadata``), savepoints of a stop in ``savepoints/``; the newest completed one wins,
    whichever run wrote it.
    """
    patterns = ("*/chk-*/_metadata", f"{SAVEPOINTS}/*/_metadata")
    found = [meta.parent for pattern in patterns for meta in root.glob(pattern)]
    return max(found, key=lambda chk: chk.stat().st_mtime_ns) if found else None


def stop_with_savepoint(result: TableResult, config: FeatureJobConfig) -> str:
    """Stop the running job with a savepoint under the checkpoint directory; returns its path.

    The next ``resume_point`` picks it (it is the newest), so stop and start lose nothing.
    """
    client = result.get_job_client()
    if client is None or config.checkpoint_dir is None:
        msg = "stop with savepoint: got a job without a client or a checkpoint_dir, expected a submitted job"
        raise RuntimeError(msg)
    target = (config.checkpoint_dir / SAVEPOINTS).resolve().as_uri()
    # PyFlink 2.3's JobClient.stop_with_savepoint calls a Java signature that 2.x no longer has
    # (the savepoint format became a required argument): call the JVM's own.
    canonical = get_gateway().jvm.org.apache.flink.core.execution.SavepointFormatType.CANONICAL
    return str(client._j_job_client.stopWithSavepoint(False, target, canonical).get())


def resume_point(config: FeatureJobConfig, *, savepoint: Path | None = None, fresh: bool = False) -> Path | None:
    """Where a run restores from: ``savepoint`` if given, nothing if ``fresh``, else the latest retained checkpoint.

    A restart then keeps its window state and its source offsets (a restart from the group's
    offsets with empty state served wrong counts, issue 13).
    """
    if savepoint is not None:
        return savepoint
    if fresh or config.checkpoint_dir is None:
        return None
    return latest_checkpoint(config.checkpoint_dir)


def run_until_stopped(config: FeatureJobConfig, stop: threading.Event, *, poll_s: float = 0.5) -> str | None:
    """Run the job until it ends (None) or ``stop`` is set: then stop it with a savepoint and return its path.

    The caller's signal handler only sets ``stop``: a JVM call interrupted by an exception raised in
    a handler breaks the gateway that the savepoint call needs.
    """
    result = run(config, wait=False)
    client = result.get_job_client()
    if client is None:
        msg = "run_until_stopped: got a job without a client, expected an attached run"
        raise RuntimeError(msg)
    while not stop.is_set():
        if client.get_job_status().result().is_globally_terminal_state():
            result.wait()  # raises the job's failure, if it failed
            return None
        stop.wait(poll_s)
    return stop_with_savepoint(result, config)


def run(config: FeatureJobConfig, *, wait: bool = True) -> TableResult:
    """Build and execute the job; with ``wait`` block until it ends (bounded runs end).

    Submitted detached (``flink run -d``) it never waits: the client would otherwise
    stay up until an unbounded job ends.
    """
    env = create_env(config)
    result = build_feature_job(env, config).execute()
    if wait and env.get_config().get("execution.attached", "true").lower() != "false":
        result.wait()
    return result


def _parse_args(argv: list[str] | None) -> FeatureJobConfig:
    parser = argparse.ArgumentParser(description="pricestream feature job")
    parser.add_argument("--config-json", help="FeatureJobConfig as JSON (overrides the flags)")
    parser.add_argument("--config-file", type=Path,
                        help="a file holding FeatureJobConfig as JSON (overrides the flags): a config with "
                             "secrets (SASL, Redis passwords) stays off the command line, where `ps` shows it")
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--connector-jar", type=Path)
    parser.add_argument("--topic-prefix", default="")
    args = parser.parse_args(argv)
    if args.config_file:
        return FeatureJobConfig.model_validate_json(args.config_file.read_text())
    if args.config_json:
        return FeatureJobConfig.model_validate(json.loads(args.config_json))
    return FeatureJobConfig(
        bootstrap_servers=args.bootstrap, connector_jar=args.connector_jar, topic_prefix=args.topic_prefix
    )


def main(argv: list[str] | None = None) -> None:
    run(_parse_args(argv))


if __name__ == "__main__":
    main()
