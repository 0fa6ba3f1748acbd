"""Flink SQL of the feature job, as pure functions returning statements.

The aggregations run on the JVM; Python only assembles the text. Each feature
view is one OVER aggregation (Flink allows one frame per query), and every
output row carries the feature event time and a version that increases per key:
``event_time_ms * 1e6 + offset % 1e6`` (deterministic on replay, tie-broken by
the partition offset, which is ordered within a hotel's partition).
"""

from __future__ import annotations

from pipelines.config import FeatureJobConfig

_VERSION = "CAST(event_time_ms AS BIGINT) * 1000000 + MOD(src_offset, 1000000)"
# Broker append time of the record, in ms: the start of the freshness clock.
_PUBLISH_MS = "CAST(EXTRACT(EPOCH FROM publish_ts) AS BIGINT) * 1000 + EXTRACT(MILLISECOND FROM publish_ts)"


def _kafka_with(config: FeatureJobConfig, topic: str, **extra: str) -> str:
    opts = {
        "connector": "kafka",
        "topic": config.topic(topic),
        "properties.bootstrap.servers": config.bootstrap_servers,
        **extra,
    }
    return ",\n  ".join(f"'{k}' = '{v}'" for k, v in opts.items())


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


def features_sink_ddl(config: FeatureJobConfig) -> str:
    extra = {
        "key.format": "raw",
        "key.fields": "hotel_id",
        "value.format": "json",
        "value.fields-include": "ALL",
        "sink.delivery-guarantee": config.delivery,
        "sink.transactional-id-prefix": f"{config.transactional_id_prefix}-features",
        "properties.transaction.timeout.ms": str(config.transaction_timeout_ms),
    }
    return f"""
CREATE TEMPORARY TABLE features_sink (
  hotel_id STRING,
  `view` STRING,
  room_type STRING,
  stay_date STRING,
  feature_time BIGINT,
  version BIGINT,
  publish_time BIGINT,
  features MAP<STRING, DOUBLE>
) WITH (
  {_kafka_with(config, config.sink_topic, **extra)}
)"""


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


def parsed_view() -> str:
    """The only place the payload is parsed: once, on the JVM, by the contract's rules.

    ``parse_event`` (``pipelines/udf/.../ParseEvent.java``) applies the field rules that
    :func:`events.contract.job_spec` derives from the pydantic models, so the job and the SDK refuse
    the same records and name the same field; a valid row comes out typed, with its flags.
    ``parsed`` has two readers (``classified`` and ``valid``); with
    ``table.optimizer.reuse-optimize-block-with-digest-enabled`` it is computed once per event.
    """
    return """
CREATE TEMPORARY VIEW parsed AS
SELECT payload, src_topic, src_partition, src_offset, publish_ts, ts, p.*
FROM src, LATERAL TABLE(parse_event(payload)) AS p"""


_LATE = "COALESCE(ts < CURRENT_WATERMARK(ts), FALSE)"
"""Late: behind the watermark. Before the first watermark CURRENT_WATERMARK is NULL, and a bare
comparison would be NULL too: neither valid nor classified, the row would vanish."""


def classified_view() -> str:
    """The rows that fail the contract or come late, with ``reason`` and ``error_class`` for the DLQ headers."""
    return f"""
CREATE TEMPORARY VIEW classified AS
SELECT payload, dlq_payload, payload_bytes, src_topic, src_partition, src_offset, error_field,
  CASE WHEN reason IS NOT NULL THEN reason
       WHEN {_LATE} THEN 'late event: event_time older than the allowed out-of-orderness'
  END AS reason,
  CASE WHEN reason IS NOT NULL THEN error_class WHEN {_LATE} THEN 'LateEvent' END AS error_class
FROM parsed"""


def _flagged(flag: str) -> str:
    return f"COALESCE(POSITION('{flag}' IN flags) > 0, FALSE)"


def valid_view() -> str:
    """The rows that pass: typed by the parser; flagged prices kept out of the price aggregates.

    Written as its own view over ``parsed`` (not over ``classified``) so that ``parsed`` has two
    readers and is parsed once. A complimentary booking counts as a booking (a real room night) and
    a price outlier as an event, but neither moves a price feature (see :mod:`events.contract`).
    """
    plausible = f"NOT {_flagged('price_outlier')}"
    return f"""
CREATE TEMPORARY VIEW valid AS
SELECT hotel_id, room_type, CAST(stay_date AS STRING) AS stay_date, ts, event_type,
  event_time_ms, src_offset, publish_ts,
  CASE WHEN {plausible} THEN price_shown END AS price_shown,
  CASE WHEN {plausible} AND NOT {_flagged('complimentary')} THEN price_paid END AS price_paid,
  CASE WHEN {plausible} THEN rate END AS rate,
  rooms_left, capacity, rooms,
  CASE WHEN event_type = 'search' THEN 1 ELSE 0 END AS is_search,
  CASE WHEN event_type = 'view' THEN 1 ELSE 0 END AS is_view,
  CASE WHEN event_type = 'booking' THEN rooms ELSE 0 END AS n_booked,
  CASE WHEN event_type = 'cancellation' THEN rooms ELSE 0 END AS n_cancelled,
  CASE WHEN event_type = 'search' THEN CAST(TIMESTAMPDIFF(DAY, CAST(ts AS TIMESTAMP(3)),
    CAST(stay_date AS TIMESTAMP(3))) AS DOUBLE) END AS lead_days
FROM parsed
WHERE reason IS NULL AND NOT ({_LATE})"""


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


def _over_select(view: str, partition: str, frame: str, aggregates: dict[str, str], *, stay: bool = True) -> str:
    """One feature view: an OVER aggregation over a RANGE frame ending at the current row."""
    inner = ",\n    ".join(f"CAST({expr} OVER w AS DOUBLE) AS {name}" for name, expr in aggregates.items())
    entries = ", ".join(f"'{name}', {name}" for name in aggregates)
    keys = "room_type, stay_date" if stay else "CAST(NULL AS STRING), CAST(NULL AS STRING)"
    return f"""
SELECT hotel_id, '{view}', {keys}, event_time_ms, {_VERSION},
  publish_ms, MAP[{entries}]
FROM (
  SELECT hotel_id, room_type, stay_date, event_time_ms, src_offset, publish_ts,
    {_PUBLISH_MS} AS publish_ms,
    {inner}
  FROM valid
  WINDOW w AS (PARTITION BY {partition} ORDER BY ts RANGE BETWEEN INTERVAL {frame} PRECEDING AND CURRENT ROW)
)"""


def feature_insert() -> str:
    """One INSERT of every feature view (see :data:`events.catalog.VIEWS`), as a UNION ALL.

    One INSERT means one Kafka sink, hence one transactional-id prefix: the connector
    refuses two exactly-once sinks sharing a prefix.
    """
    return "INSERT INTO features_sink\n" + "\nUNION ALL\n".join(feature_selects())


def feature_selects() -> list[str]:
    """The SELECT of each feature view."""
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
        _inventory_select(),
    ]


def _inventory_select() -> str:
    """Inventory is a state, not a window: the newest inventory event per key is the value."""
    return f"""
SELECT hotel_id, 'stay_inventory', room_type, stay_date, event_time_ms, {_VERSION},
  {_PUBLISH_MS},
  MAP['rooms_left', CAST(rooms_left AS DOUBLE), 'capacity', CAST(capacity AS DOUBLE),
      'occupancy', 1.0 - CAST(rooms_left AS DOUBLE) / CAST(capacity AS DOUBLE)]
FROM valid WHERE event_type = 'inventory'"""


def all_statements(config: FeatureJobConfig) -> tuple[list[str], list[str]]:
    """(DDL and views, INSERTs) of the whole job."""
    ddl = [*function_ddl(), source_ddl(config), features_sink_ddl(config), dlq_sink_ddl(config), parsed_view(),
           classified_view(), valid_view()]
    return ddl, [dlq_insert(), feature_insert()]
