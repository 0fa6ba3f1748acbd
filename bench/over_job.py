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
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.kafka import KafkaOffsetsInitializer, KafkaSource
from pyflink.java_gateway import get_gateway
from pyflink.table import StatementSet, StreamTableEnvironment
from pyflink.util.java_utils import add_jars_to_context_class_loader

from bench.sql_source import (
    _PUBLISH_MS,
    _VERSION,
    _kafka_with,
    classified_view,
    dlq_insert,
    dlq_sink_ddl,
    function_ddl,
    register_parsed,
    source_ddl,
    valid_view,
)
from pipelines.config import FeatureJobConfig
from pipelines.feature_job import StreamJob
from pipelines.job_specs import source_spec

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


def build_over_job(stream_env: StreamExecutionEnvironment, config: FeatureJobConfig) -> StatementSet:
    """The OVER job: same source, parse, validation and DLQ as the tiled job, in SQL."""
    env = StreamTableEnvironment.create(stream_env)
    for statement in (*function_ddl(), source_ddl(config), over_sink_ddl(config), dlq_sink_ddl(config)):
        env.execute_sql(statement)
    register_parsed(env)
    env.execute_sql(classified_view(config))
    env.execute_sql(valid_view(config))
    job = env.create_statement_set()
    job.add_insert_sql(dlq_insert())
    job.add_insert_sql("INSERT INTO over_sink\n" + "\nUNION ALL\n".join(over_selects()))
    return job


def _discard(stream: object) -> None:
    stream.sinkTo(get_gateway().jvm.org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink())  # type: ignore[attr-defined]


def build_parse_only_job(stream_env: StreamExecutionEnvironment, config: FeatureJobConfig) -> StreamJob:
    """The tiled job's own source side (``SourceJob.java``: read, parse, validate, split) into discarding sinks.

    The ceiling of any aggregation behind this source.
    """
    add_jars_to_context_class_loader([config.functions_jar.resolve().as_uri()])
    source = get_gateway().jvm.io.pricestream.flink.SourceJob.build(stream_env._j_stream_execution_environment,
                                                                     source_spec(config))
    for stream in (source.valid(), source.inventory(), source.dlq()):
        _discard(stream)
    return StreamJob(stream_env, "parse only")


def build_source_only_job(stream_env: StreamExecutionEnvironment, config: FeatureJobConfig) -> StreamJob:
    """The engine's own ceiling on this host: a bare DataStream Kafka source (values as text) into a discarding sink.

    No SQL, no parse, no watermarks: what Flink's Kafka source costs per record on this machine.
    """
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
    _discard(stream._j_data_stream)
    return StreamJob(stream_env, "bare Kafka source")
