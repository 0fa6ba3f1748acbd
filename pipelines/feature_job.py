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

from pyflink.common import Configuration, JobClient
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.java_gateway import get_gateway
from pyflink.util.java_utils import add_jars_to_context_class_loader

from events.contract import encoded_job_spec
from pipelines.config import FeatureJobConfig
from pipelines.identity import check_restore, write_identity
from pipelines.job_specs import redis_sink_spec, sink_spec, source_spec, tile_spec

ACCEPTED_PARTITIONS = 6
"""Partitions of the accepted-events topic (keyed by hotel, like the source)."""

SPEC_PARAMETER = "pricestream.contract"
"""Name of the job parameter ``ParseEvent.java`` reads the contract spec from."""


def job_configuration(config: FeatureJobConfig) -> Configuration:
    """Flink settings of the job: its jars and contract, checkpointing, restore, object reuse, restarts."""
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
    checkpoints = config.checkpoints or Path(tempfile.gettempdir()) / "pricestream-checkpoints" / config.scoped(
        config.group_id)
    conf.set_string("execution.checkpointing.dir", checkpoints.resolve().as_uri())
    conf.set_string("state.checkpoints.num-retained", "3")
    if config.restore_from is not None:
        conf.set_string("execution.state-recovery.path", config.restore_from.resolve().as_uri())
    # Savepoint compatibility: every operator of the job sets its own uid (SourceJob, TileJob, SinkJob).
    # Operators copy what they keep; skipping the defensive copies between chained operators cut the
    # job's CPU per event by ~9% (bench/ingest.py).
    conf.set_string("pipeline.object-reuse", "true")
    # Bad data never fails the job (it goes to the DLQ); a failure is infrastructure, so
    # retry a few times and then surface it instead of restarting forever.
    conf.set_string("restart-strategy.type", "fixed-delay")
    conf.set_string("restart-strategy.fixed-delay.attempts", str(config.restart_attempts))
    conf.set_string("restart-strategy.fixed-delay.delay", "2 s")
    return conf


class StreamJob:
    """A DataStream job: :meth:`execute` submits it; then its :meth:`get_job_client` and :meth:`wait` for its end."""

    def __init__(self, env: StreamExecutionEnvironment, name: str) -> None:
        self._env, self._name = env, name
        self._client: JobClient | None = None

    def execute(self) -> StreamJob:
        self._client = self._env.execute_async(self._name)
        return self

    def get_job_client(self) -> JobClient | None:
        return self._client

    def wait(self) -> None:
        """Block until the job ends; raises its failure if it failed."""
        if self._client is None:
            msg = "wait: got a job that was not executed, expected execute() first"
            raise RuntimeError(msg)
        self._client.get_job_execution_result().result()


def build_feature_job(env: StreamExecutionEnvironment, config: FeatureJobConfig) -> StreamJob:
    """The whole job on the JVM, added to ``env``: source side, tile operators, sinks.

    Kafka records are parsed once, validated, stamped with event time and watermarks, and split into
    valid events, inventory rows and dead letters, all in the source's task (``SourceJob.java``); the
    valid events go, keyed per entity group, to the tile operators (``TileJob.java``: SQL cannot keep a
    key's tiles, merge them on a flush timer and drop the ones that left every window); their value
    rows and the inventory rows go to ``features.v1`` and to Redis, the dead letters to the DLQ, by
    DataStream sinks (``SinkJob.java``) with no Table conversion. PyFlink only wires the Java objects.
    """
    add_jars_to_context_class_loader([config.functions_jar.resolve().as_uri()])  # the client's view of the jar
    flink = get_gateway().jvm.io.pricestream.flink
    source = flink.SourceJob.build(env._j_stream_execution_environment, source_spec(config))
    rows = flink.TileJob.union(flink.TileJob.apply(source.valid(), tile_spec(config)), source.inventory())
    online = redis_sink_spec(config) if config.online is not None else None
    flink.SinkJob.attach(rows, source.dlq(), source.accepted(), sink_spec(config), online)
    return StreamJob(env, "pricestream-features")


def create_env(config: FeatureJobConfig) -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment.get_execution_environment(job_configuration(config))


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


def stop_with_savepoint(result: StreamJob, config: FeatureJobConfig) -> str:
    """Stop the running job with a savepoint under the checkpoint directory; returns its path.

    The next ``resume_point`` picks it (it is the newest), so stop and start lose nothing.
    """
    client = result.get_job_client()
    if client is None or config.checkpoints is None:
        msg = "stop with savepoint: got a job without a client or a checkpoint_dir, expected a submitted job"
        raise RuntimeError(msg)
    target = (config.checkpoints / SAVEPOINTS).resolve().as_uri()
    # PyFlink 2.3's JobClient.stop_with_savepoint calls a Java signature that 2.x no longer has
    # (the savepoint format became a required argument): call the JVM's own.
    canonical = get_gateway().jvm.org.apache.flink.core.execution.SavepointFormatType.CANONICAL
    return str(client._j_job_client.stopWithSavepoint(False, target, canonical).get())


def resume_point(config: FeatureJobConfig, *, savepoint: Path | None = None, fresh: bool = False) -> Path | None:
    """Where a run restores from: ``savepoint`` if given, nothing if ``fresh``, else the latest retained checkpoint.

    The checkpoints are the deployment's and job's own (:attr:`FeatureJobConfig.checkpoints`); a path
    given that holds another job's (``job.json``) is refused when the job starts (:func:`check_restore`).

    A restart then keeps its window state and its source offsets (a restart from the group's
    offsets with empty state served wrong counts, issue 13).
    """
    if savepoint is not None:
        return savepoint
    if fresh or config.checkpoints is None or config.checkpoint_dir is None:
        return None
    # before checkpoints were per prefix and job they sat in checkpoint_dir itself: a deployment that
    # upgrades resumes from them once (its next checkpoints are in its own directory)
    return latest_checkpoint(config.checkpoints) or latest_checkpoint(config.checkpoint_dir)


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


def prepare_outputs(config: FeatureJobConfig) -> None:
    """Create the accepted-events topic (the broker does not create topics) and record the job's identity.

    A secure stack's job principal may not create topics: there ``pricestream up`` created it (it is in
    :data:`events.topics.TOPICS`), and the job only checks nothing else.
    """
    if config.accepted_topic is not None and not config.kafka_properties:
        from events.admin import create_topics
        from events.config import KafkaConfig
        from events.topics import TopicSpec

        kafka = KafkaConfig(bootstrap_servers=config.bootstrap_servers, topic_prefix=config.topic_prefix)
        create_topics(kafka, [TopicSpec(name=config.accepted_topic, partitions=ACCEPTED_PARTITIONS, is_input=False)])
    write_identity(config)


def run(config: FeatureJobConfig, *, wait: bool = True) -> StreamJob:
    """Build and execute the job; with ``wait`` block until it ends (bounded runs end).

    Submitted detached (``flink run -d``) it never waits: the client would otherwise
    stay up until an unbounded job ends.
    """
    check_restore(config)
    prepare_outputs(config)
    env = create_env(config)
    result = build_feature_job(env, config).execute()
    attached = get_gateway().jvm.org.apache.flink.configuration.DeploymentOptions.ATTACHED
    if wait and env._j_stream_execution_environment.getConfiguration().get(attached):
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
