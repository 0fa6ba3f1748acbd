"""The feature job's source side as it was in SQL, bench only: the peers' (``bench/over_job.py``) parse.

Production reads, parses and splits on the JVM in one task (``SourceJob.java``, registered by
:func:`pipelines.feature_job.register_source`). The OVER job and the parse-only ceiling keep this SQL
path so that ``bench/ingest.py`` can record the old design's CPU per event beside the tiled job's:
a raw Kafka table, the lateral ``parse_event`` (the same ``ParseEvent.java`` rules), a DataStream
boundary so that the parse runs once, and the ``classified`` / ``valid`` views.
"""

from __future__ import annotations

from pyflink.table import DataTypes, Schema, StreamTableEnvironment

from pipelines.config import FeatureJobConfig
from pipelines.job_specs import late_reason


def _kafka_with(config: FeatureJobConfig, topic: str, **extra: str) -> str:
    opts = {
        "connector": "kafka",
        "topic": config.topic(topic),
        "properties.bootstrap.servers": config.bootstrap_servers,
        **{f"properties.{k}": v for k, v in config.kafka_properties.items()},
        **extra,
    }
    return ",\n  ".join(f"'{k}' = '{_quoted(v)}'" for k, v in opts.items())


def _quoted(value: str) -> str:
    """A SQL string literal's body (a JAAS line may hold quotes)."""
    return value.replace("'", "''")


def dlq_sink_ddl(config: FeatureJobConfig) -> str:
    extra = {
        "format": "raw",
        "sink.delivery-guarantee": config.delivery,
        "sink.transactional-id-prefix": f"{config.transactional_id_prefix}-dlq",
        "properties.transaction.timeout.ms": str(config.transaction_timeout_ms),
    }
    return f"""
CREATE TEMPORARY TABLE dlq_sink (
  payload BYTES,
  headers MAP<STRING, BYTES> METADATA
) WITH (
  {_kafka_with(config, config.source_topic + '.dlq', **extra)}
)"""


_VERSION = "CAST(event_time_ms AS BIGINT) * 1000000 + MOD(src_offset, 1000000)"
# Broker append time of the record, in ms: the start of the freshness clock.
_PUBLISH_MS = "CAST(EXTRACT(EPOCH FROM publish_ts) AS BIGINT) * 1000 + EXTRACT(MILLISECOND FROM publish_ts)"

PARSE_FUNCTION = "io.pricestream.flink.ParseEvent"
EVENT_TIME_FUNCTION = "io.pricestream.flink.EventTime"


def function_ddl() -> list[str]:
    """The job's JVM functions (``pipelines/udf``): the one-pass parser and the rowtime extractor."""
    return [
        f"CREATE TEMPORARY SYSTEM FUNCTION parse_event AS '{PARSE_FUNCTION}' LANGUAGE JAVA",
        f"CREATE TEMPORARY SYSTEM FUNCTION event_time_of AS '{EVENT_TIME_FUNCTION}' LANGUAGE JAVA",
    ]


def source_ddl(config: FeatureJobConfig) -> str:
    """Raw source: the value as bytes, so that malformed JSON and invalid UTF-8 reach the DLQ, not the floor."""
    extra = {
        "properties.group.id": config.group_id,
        "properties.isolation.level": "read_committed",
        "properties.auto.offset.reset": "earliest",
        "scan.startup.mode": config.startup,
        "format": "raw",
        "scan.watermark.emit.strategy": config.watermark_emit,
    }
    if config.bounded:
        extra["scan.bounded.mode"] = "latest-offset"
    return f"""
CREATE TEMPORARY TABLE src (
  payload BYTES,
  src_topic STRING METADATA FROM 'topic' VIRTUAL,
  src_partition INT METADATA FROM 'partition' VIRTUAL,
  src_offset BIGINT METADATA FROM 'offset' VIRTUAL,
  publish_ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  ts AS TO_TIMESTAMP_LTZ(COALESCE(event_time_of(payload), 0), 3),
  WATERMARK FOR ts AS ts - INTERVAL '{config.out_of_orderness_ms / 1000:.3f}' SECOND
) WITH (
  {_kafka_with(config, config.source_topic, **extra)}
)"""



PARSED_ROWTIME = "ts"


def parsed_query() -> str:
    """The only place the payload is parsed: once, on the JVM, by the contract's rules.

    ``parse_event`` (``pipelines/udf/.../ParseEvent.java``) applies the field rules that
    :func:`events.contract.job_spec` derives from the pydantic models, so the job and the SDK refuse
    the same records and name the same field; a valid row comes out typed, with its flags.
    ``parsed`` has several readers (the DLQ, the inventory rows, the tile operator's input); the planner
    would inline the lateral call into each (their correlation ids differ, so no digest reuse): the job
    registers this query
    behind a DataStream boundary (:func:`register_parsed`) instead. ``ts`` is
    renamed: the boundary restores it as the rowtime with the source's watermarks.
    """
    return """
SELECT payload, src_topic, src_partition, src_offset, publish_ts, ts AS source_ts, p.*
FROM src, LATERAL TABLE(parse_event(payload)) AS p"""


def _late(config: FeatureJobConfig) -> str:
    """Late: more than the allowed lateness behind the watermark (whose tile may be gone from state and Redis).

    Before the first watermark CURRENT_WATERMARK is NULL, and a bare comparison would be NULL too:
    neither valid nor classified, the row would vanish; hence the COALESCE.
    """
    # TIMESTAMPDIFF, not an INTERVAL literal: the planner refuses day intervals beyond DAY(2) and a
    # SECOND interval holds at most 99 s. Whole seconds: late once more than the lateness behind.
    return (f"COALESCE(TIMESTAMPDIFF(SECOND, ts, CURRENT_WATERMARK(ts)) > {config.allowed_lateness_ms // 1000}, "
            "FALSE)")


def classified_view(config: FeatureJobConfig) -> str:
    """The rows that fail the contract or come late, with ``reason`` and ``error_class`` for the DLQ headers."""
    late = _late(config)
    why = late_reason(config)
    return f"""
CREATE TEMPORARY VIEW classified AS
SELECT payload, dlq_payload, payload_bytes, src_topic, src_partition, src_offset, error_field,
  CASE WHEN reason IS NOT NULL THEN reason WHEN {late} THEN '{why}' END AS reason,
  CASE WHEN reason IS NOT NULL THEN error_class WHEN {late} THEN 'LateEvent' END AS error_class
FROM parsed"""


def _flagged(flag: str) -> str:
    return f"COALESCE(POSITION('{flag}' IN flags) > 0, FALSE)"


def valid_view(config: FeatureJobConfig) -> str:
    """The rows that pass: typed by the parser; flagged prices kept out of the price aggregates.

    Written as its own view over ``parsed`` (not over ``classified``) so that ``parsed`` has two
    readers and is parsed once. A complimentary booking counts as a booking (a real room night) and
    a price outlier as an event, but neither moves a price feature (see :mod:`events.contract`).
    """
    plausible = f"NOT {_flagged('price_outlier')}"
    return f"""
CREATE TEMPORARY VIEW valid AS
SELECT hotel_id, room_type, CAST(stay_date AS STRING) AS stay_date, ts, event_type,
  event_time_ms, src_offset, publish_ts, {_PUBLISH_MS} AS publish_ms,
  CASE WHEN {plausible} THEN price_shown END AS price_shown,
  CASE WHEN {plausible} AND NOT {_flagged('complimentary')} THEN price_paid END AS price_paid,
  CASE WHEN {plausible} THEN rate END AS rate,
  rooms_left, capacity, rooms, competitor_id,
  CASE WHEN event_type = 'search' THEN 1 ELSE 0 END AS is_search,
  CASE WHEN event_type = 'view' THEN 1 ELSE 0 END AS is_view,
  CASE WHEN event_type = 'booking' THEN rooms ELSE 0 END AS n_booked,
  CASE WHEN event_type = 'cancellation' THEN rooms ELSE 0 END AS n_cancelled,
  CASE WHEN event_type = 'search' THEN CAST(TIMESTAMPDIFF(DAY, CAST(ts AS TIMESTAMP(3)),
    CAST(stay_date AS TIMESTAMP(3))) AS DOUBLE) END AS lead_days
FROM parsed
WHERE reason IS NULL AND NOT ({_late(config)})"""


def dlq_insert() -> str:
    """Refused and late rows, with the five DLQ headers, the field the contract named and the record's size.

    A record larger than ``events.contract.DLQ_PAYLOAD_BYTES`` is dead-lettered cut to that size.
    """
    return """
INSERT INTO dlq_sink
SELECT COALESCE(dlq_payload, payload), MAP[
  'payload_bytes', ENCODE(CAST(payload_bytes AS STRING), 'UTF-8'),
  'source_topic', ENCODE(src_topic, 'UTF-8'),
  'source_partition', ENCODE(CAST(src_partition AS STRING), 'UTF-8'),
  'source_offset', ENCODE(CAST(src_offset AS STRING), 'UTF-8'),
  'error_class', ENCODE(error_class, 'UTF-8'),
  'error_field', ENCODE(COALESCE(error_field, ''), 'UTF-8'),
  'error_message', ENCODE(reason, 'UTF-8')]
FROM classified WHERE reason IS NOT NULL"""


def register_parsed(env: StreamTableEnvironment) -> None:
    """``parsed``: the parse, computed once per event, behind a DataStream boundary (on the JVM).

    Without the boundary the planner inlines the lateral parse into each of its readers.
    The rowtime and the source's watermarks cross it (``SOURCE_WATERMARK()``).
    """
    stream = env.to_data_stream(env.sql_query(parsed_query()))
    schema = (Schema.new_builder()
              .column_by_metadata(PARSED_ROWTIME, DataTypes.TIMESTAMP_LTZ(3), "rowtime")
              .watermark(PARSED_ROWTIME, "SOURCE_WATERMARK()")
              .build())
    env.create_temporary_view("parsed", env.from_data_stream(stream, schema))
