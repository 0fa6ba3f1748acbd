"""Peers of the tiled feature job, bench only: the job as it was (five per-event OVER views +
inventory + DLQ, on the SQL source side of :mod:`bench.sql_source`), the tiled job's own source side
into a blackhole (the ceiling of any aggregation behind it) and a bare Kafka source (the engine's).

Kept only until ``bench/ingest.py`` has recorded its CPU per event next to the tiled job's (issue
13, item 8); production has one engine. The OVER job parses and validates by the same contract rules
(``ParseEvent.java``) as the tiled job's source, so the two differ in the source side's plumbing (SQL
there, one JVM task here) and in the aggregation.
"""

from __future__ import annotations

from pyflink.common import WatermarkStrategy
from pyflink.common.serialization import SimpleStringSchema
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.datastream.connectors.kafka import KafkaOffsetsInitializer, KafkaSource
from pyflink.java_gateway import get_gateway
from pyflink.table import StatementSet, StreamTableEnvironment
from pyflink.util.java_utils import add_jars_to_context_class_loader

from bench.sql_source import (
    _PUBLISH_MS,
    _VERSION,
    classified_view,
    dlq_insert,
    function_ddl,
    register_parsed,
    source_ddl,
    valid_view,
)
from pipelines.config import FeatureJobConfig
from pipelines.feature_sql import _kafka_with, dlq_sink_ddl, source_spec

OVER_TOPIC = "features.over"


def _over_select(view: str, partition: str, frame: str, aggregates: dict[str, str], *, stay: bool = True) -> str:
    inner = ",\n    ".join(f"CAST({expr} OVER w AS DOUBLE) AS {name}" for name, expr in aggregates.items())
    entries = ", ".join(f"'{name}', {name}" for name in aggregates)
    keys = "room_type, stay_date" if stay else "CAST(NULL AS STRING), CAST(NULL AS STRING)"
    return f"""
SELECT hotel_id, '{view}', {keys}, event_time_ms, {_VERSION}, publish_ms, MAP[{entries}]
FROM (
  SELECT hotel_id, room_type, stay_date, event_time_ms, src_offset, publish_ts, {_PUBLISH_MS} AS publish_ms,
    {inner}
  FROM valid
  WINDOW w AS (PARTITION BY {partition} ORDER BY ts RANGE BETWEEN INTERVAL {frame} PRECEDING AND CURRENT ROW)
)"""


def over_selects() -> list[str]:
    stay = "hotel_id, room_type, stay_date"
    return [
        _over_select("stay_1h", stay, "'1' HOUR",
                     {"searches_1h": "SUM(is_search)", "views_1h": "SUM(is_view)", "bookings_1h": "SUM(n_booked)"}),
        _over_select("stay_24h", stay, "'1' DAY", {
            "searches_24h": "SUM(is_search)", "views_24h": "SUM(is_view)", "bookings_24h": "SUM(n_booked)",
            "cancellations_24h": "SUM(n_cancelled)", "mean_price_shown_24h": "AVG(price_shown)",
            "comp_rate_median_24h": "PERCENTILE(rate, 0.5)", "comp_rate_min_24h": "MIN(rate)",
        }),
        _over_select("stay_7d", stay, "'7' DAY", {
            "searches_7d": "SUM(is_search)", "views_7d": "SUM(is_view)", "bookings_7d": "SUM(n_booked)",
            "cancellations_7d": "SUM(n_cancelled)", "lead_time_mean_days_7d": "AVG(lead_days)",
            "lead_time_std_days_7d": "STDDEV_POP(lead_days)",
        }),
        _over_select("stay_14d", stay, "'14' DAY", {"bookings_14d": "SUM(n_booked)"}),
        _over_select("hotel_stats", "hotel_id", "'1' DAY", {
            "hotel_searches_24h": "SUM(is_search)", "hotel_bookings_24h": "SUM(n_booked)",
            "hotel_views_24h": "SUM(is_view)",
        }, stay=False),
        f"""
SELECT hotel_id, 'stay_inventory', room_type, stay_date, event_time_ms, {_VERSION}, {_PUBLISH_MS},
  MAP['rooms_left', CAST(rooms_left AS DOUBLE), 'capacity', CAST(capacity AS DOUBLE),
      'occupancy', 1.0 - CAST(rooms_left AS DOUBLE) / CAST(capacity AS DOUBLE)]
FROM valid WHERE event_type = 'inventory'""",
    ]


def over_sink_ddl(config: FeatureJobConfig) -> str:
    extra = {"key.format": "raw", "key.fields": "hotel_id", "value.format": "json", "value.fields-include": "ALL",
             "sink.delivery-guarantee": "at-least-once"}
    return f"""
CREATE TEMPORARY TABLE over_sink (
  hotel_id STRING, `view` STRING, room_type STRING, stay_date STRING, feature_time BIGINT, version BIGINT,
  publish_time BIGINT, features MAP<STRING, DOUBLE>
) WITH (
  {_kafka_with(config, OVER_TOPIC, **extra)}
)"""


def build_over_job(env: StreamTableEnvironment, config: FeatureJobConfig) -> StatementSet:
    """The OVER job on ``env``: same source, parse, validation and DLQ as the tiled job."""
    for statement in (*function_ddl(), source_ddl(config), over_sink_ddl(config), dlq_sink_ddl(config)):
        env.execute_sql(statement)
    register_parsed(env)
    env.execute_sql(classified_view(config))
    env.execute_sql(valid_view(config))
    job = env.create_statement_set()
    job.add_insert_sql(dlq_insert())
    job.add_insert_sql("INSERT INTO over_sink\n" + "\nUNION ALL\n".join(over_selects()))
    return job


def build_parse_only_job(env: StreamTableEnvironment, config: FeatureJobConfig) -> StatementSet:
    """The tiled job's own source side (``SourceJob.java``: read, parse, validate, DLQ); valid rows into a blackhole.

    The ceiling of any aggregation behind this source.
    """
    env.execute_sql(dlq_sink_ddl(config))
    add_jars_to_context_class_loader([config.functions_jar.resolve().as_uri()])
    source = get_gateway().jvm.io.pricestream.flink.SourceJob.build(env._j_tenv.execEnv(), source_spec(config))
    env.create_temporary_view("dead_letters", env.from_data_stream(DataStream(source.dlq())))
    env.create_temporary_view("valid_rows", env.from_data_stream(DataStream(source.valid())))
    env.execute_sql("CREATE TEMPORARY TABLE parsed_sink (hotel_id STRING, event_time_ms BIGINT, lead_days DOUBLE) "
                    "WITH ('connector' = 'blackhole')")
    job = env.create_statement_set()
    job.add_insert_sql("INSERT INTO dlq_sink SELECT payload, headers FROM dead_letters")
    job.add_insert_sql("INSERT INTO parsed_sink SELECT hotel_id, event_time_ms, lead_days FROM valid_rows")
    return job


class _StreamJob:
    """A DataStream job in the shape ``bench/ingest.py`` runs a statement set: ``execute().wait()``."""

    def __init__(self, env: StreamExecutionEnvironment, name: str) -> None:
        self._env, self._name = env, name

    def execute(self) -> _StreamJob:
        self._client = self._env.execute_async(self._name)
        return self

    def wait(self) -> None:
        self._client.get_job_execution_result().result()


def build_source_only_job(env: StreamTableEnvironment, config: FeatureJobConfig) -> _StreamJob:
    """The engine's own ceiling on this host: a bare DataStream Kafka source (values as text) into a discarding sink.

    No SQL, no parse, no watermarks: what Flink's Kafka source costs per record on this machine.
    """
    stream_env = StreamExecutionEnvironment(env._j_tenv.execEnv())
    source = (KafkaSource.builder()
              .set_bootstrap_servers(config.bootstrap_servers)
              .set_topics(config.topic(config.source_topic))
              .set_group_id(f"{config.group_id}-bare")
              .set_properties({"isolation.level": "read_committed", **config.kafka_properties})
              .set_starting_offsets(KafkaOffsetsInitializer.earliest())
              .set_bounded(KafkaOffsetsInitializer.latest())
              .set_value_only_deserializer(SimpleStringSchema())
              .build())
    stream = stream_env.from_source(source, WatermarkStrategy.no_watermarks(), "bare Kafka source")
    discard = get_gateway().jvm.org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink()
    stream._j_data_stream.sinkTo(discard)
    return _StreamJob(stream_env, "bare Kafka source")
