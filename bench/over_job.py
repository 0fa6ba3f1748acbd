"""Peers of the tiled feature job, bench only: the job as it was (five per-event OVER views +
inventory + DLQ) and the engine's ceiling for our parse (parse + validate + DLQ into a blackhole).

Kept only until ``bench/ingest.py`` has recorded its CPU per event next to the tiled job's (issue
13, item 8); production has one engine. It shares the tiled job's source, one-pass parse and
validation as SQL (:mod:`bench.sql_source`), so the two differ in the aggregation alone.
"""

from __future__ import annotations

from pyflink.table import StatementSet, StreamTableEnvironment

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
from pipelines.feature_sql import _kafka_with, dlq_sink_ddl

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
    """Source, one-pass parse, validation and DLQ; valid rows into a blackhole: the ceiling of any aggregation."""
    for statement in (*function_ddl(), source_ddl(config), dlq_sink_ddl(config)):
        env.execute_sql(statement)
    register_parsed(env)
    env.execute_sql(classified_view(config))
    env.execute_sql(valid_view(config))
    columns = {"hotel_id": "STRING", "room_type": "STRING", "stay_date": "STRING", "event_type": "STRING",
               "event_time_ms": "BIGINT", "price_shown": "DOUBLE", "rate": "DOUBLE", "lead_days": "DOUBLE"}
    body = ", ".join(f"{name} {kind}" for name, kind in columns.items())
    env.execute_sql(f"CREATE TEMPORARY TABLE parsed_sink ({body}) WITH ('connector' = 'blackhole')")
    job = env.create_statement_set()
    job.add_insert_sql(dlq_insert())
    job.add_insert_sql(f"INSERT INTO parsed_sink SELECT {', '.join(columns)} FROM valid")
    return job


def build_source_only_job(env: StreamTableEnvironment, config: FeatureJobConfig) -> StatementSet:
    """The engine's own ceiling on this host: the same Kafka source (raw bytes), nothing parsed, into a blackhole."""
    env.execute_sql(source_ddl(config).replace(
        "ts AS TO_TIMESTAMP_LTZ(COALESCE(event_time_of(payload), 0), 3)", "ts AS publish_ts"))
    env.execute_sql("CREATE TEMPORARY TABLE raw_sink (payload BYTES, src_offset BIGINT) "
                    "WITH ('connector' = 'blackhole')")
    job = env.create_statement_set()
    job.add_insert_sql("INSERT INTO raw_sink SELECT payload, src_offset FROM src")
    return job
