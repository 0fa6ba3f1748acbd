"""Flink SQL of the feature job, as pure functions returning statements.

The aggregations run on the JVM; Python only assembles the text. Each feature
view is one OVER aggregation (Flink allows one frame per query), and every
output row carries the feature event time and a version that increases per key:
``event_time_ms * 1e6 + offset % 1e6`` (deterministic on replay, tie-broken by
the partition offset, which is ordered within a hotel's partition).
"""

from __future__ import annotations

from events.models import BEHAVIOUR_TYPES
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


def source_ddl(config: FeatureJobConfig) -> str:
    """Raw source: the value as a string, so that malformed JSON reaches the DLQ, not the floor."""
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
  payload STRING,
  src_topic STRING METADATA FROM 'topic' VIRTUAL,
  src_partition INT METADATA FROM 'partition' VIRTUAL,
  src_offset BIGINT METADATA FROM 'offset' VIRTUAL,
  publish_ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
  ts AS TO_TIMESTAMP_LTZ(COALESCE(TRY_CAST(JSON_VALUE(payload, '$.event_time') AS BIGINT), 0), 3),
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
  payload STRING,
  headers MAP<STRING, BYTES> METADATA
) WITH (
  {_kafka_with(config, config.source_topic + '.dlq', **extra)}
)"""


# Raw JSON fields read once per event, as strings (JSON_VALUE's default); everything else is
# typed from these. TRY_CAST over the string, not RETURNING: RETURNING DOUBLE fails on an integer
# literal (a ClassCastException that would crash the job on one odd record).
_RAW_FIELDS = ("event_type", "hotel_id", "room_type", "stay_date", "event_time", "price_shown", "price_paid",
               "rate", "rooms_left", "capacity", "rooms")
_TYPED = {
    "stay_date": "TRY_CAST(stay_date_raw AS DATE)",
    "event_time_ms": "TRY_CAST(event_time_raw AS BIGINT)",
    "price_shown": "TRY_CAST(price_shown_raw AS DOUBLE)",
    "price_paid": "TRY_CAST(price_paid_raw AS DOUBLE)",
    "rate": "TRY_CAST(rate_raw AS DOUBLE)",
    "rooms_left": "TRY_CAST(rooms_left_raw AS INT)",
    "capacity": "TRY_CAST(capacity_raw AS INT)",
    "rooms": "COALESCE(TRY_CAST(rooms_raw AS INT), 1)",
}


def parsed_view() -> str:
    """The only place the payload is parsed: one JSON_VALUE per field, raw strings out.

    ``parsed`` is read by two different views (the DLQ's ``classified`` and ``valid``), so with
    ``table.optimizer.reuse-optimize-block-with-digest-enabled`` it is its own optimize block and
    runs once per event. Anything typed or derived here would be re-inlined into both consumers.
    """
    keys = ("event_type", "hotel_id", "room_type")
    raw = ",\n  ".join(
        f"JSON_VALUE(payload, '$.{name}') AS {name if name in keys else name + '_raw'}" for name in _RAW_FIELDS
    )
    return f"""
CREATE TEMPORARY VIEW parsed AS
SELECT
  payload, src_topic, src_partition, src_offset, publish_ts, ts,
  payload IS JSON AS is_json,
  {raw}
FROM src"""


def _price_rule(event_type: str, column: str) -> tuple[str, str]:
    price = _TYPED[column]
    return (
        f"event_type = '{event_type}' AND ({price} IS NULL OR NOT ({price} > 0 AND {price} < 1e9))",
        f"'field {column}: got ' || COALESCE({column}_raw, 'null') || ', expected a finite price > 0'",
    )


def _rules() -> list[tuple[str, str]]:
    """(condition, reason) in order: the first condition that holds names the reason; none holds = valid."""
    types = ", ".join(f"'{t}'" for t in BEHAVIOUR_TYPES)
    listed = types.replace("'", "")
    stay, event_ms = _TYPED["stay_date"], _TYPED["event_time_ms"]
    left, capacity = _TYPED["rooms_left"], _TYPED["capacity"]
    return [
        ("NOT is_json", "'record: not a JSON object'"),
        (f"event_type IS NULL OR event_type NOT IN ({types})",
         f"'field event_type: got ' || COALESCE(event_type, 'null') || ', expected one of {listed}'"),
        ("hotel_id IS NULL OR hotel_id = ''", "'field hotel_id: missing, expected a non-empty string'"),
        ("room_type IS NULL OR room_type = ''", "'field room_type: missing, expected a non-empty string'"),
        (f"{stay} IS NULL",
         "'field stay_date: got ' || COALESCE(stay_date_raw, 'null') || ', expected an ISO date'"),
        (f"{event_ms} IS NULL", "'field event_time: missing, expected epoch milliseconds'"),
        _price_rule("view", "price_shown"),
        _price_rule("booking", "price_paid"),
        _price_rule("competitor_rate", "rate"),
        (f"event_type = 'inventory' AND ({left} IS NULL OR {capacity} IS NULL OR {capacity} <= 0 OR {left} < 0)",
         "'field rooms_left/capacity: expected rooms_left >= 0 and capacity > 0'"),
        (f"{stay} < CAST(ts AS DATE)",
         f"'field stay_date: ' || CAST({stay} AS STRING) || ' is before the event date ' "
         "|| CAST(CAST(ts AS DATE) AS STRING)"),
        ("ts < CURRENT_WATERMARK(ts)", "'late event: event_time older than the allowed out-of-orderness'"),
    ]


def classified_view() -> str:
    """The rows that fail a rule, with ``reason`` for the DLQ headers (NULL when valid)."""
    cases = "\n    ".join(f"WHEN {cond} THEN {reason}" for cond, reason in _rules())
    return f"""
CREATE TEMPORARY VIEW classified AS
SELECT payload, src_topic, src_partition, src_offset,
  CASE
    {cases}
    ELSE CAST(NULL AS STRING)
  END AS reason
FROM parsed"""


def valid_view() -> str:
    """The rows that pass every rule: the same ordered conditions as ``classified``, without the messages.

    Written as its own view over ``parsed`` (not over ``classified``) so that ``parsed`` has two
    readers and is parsed once; the CASE keeps the rules' order and NULL handling identical.
    """
    cases = "\n    ".join(f"WHEN {cond} THEN FALSE" for cond, _ in _rules())
    t = _TYPED
    return f"""
CREATE TEMPORARY VIEW valid AS
SELECT hotel_id, room_type, CAST({t['stay_date']} AS STRING) AS stay_date, ts, event_type,
  {t['event_time_ms']} AS event_time_ms, src_offset, publish_ts, {t['price_shown']} AS price_shown,
  {t['price_paid']} AS price_paid, {t['rate']} AS rate, {t['rooms_left']} AS rooms_left,
  {t['capacity']} AS capacity, {t['rooms']} AS rooms,
  CASE WHEN event_type = 'search' THEN 1 ELSE 0 END AS is_search,
  CASE WHEN event_type = 'view' THEN 1 ELSE 0 END AS is_view,
  CASE WHEN event_type = 'booking' THEN {t['rooms']} ELSE 0 END AS n_booked,
  CASE WHEN event_type = 'cancellation' THEN {t['rooms']} ELSE 0 END AS n_cancelled,
  CASE WHEN event_type = 'search' THEN CAST(TIMESTAMPDIFF(DAY, CAST(ts AS TIMESTAMP(3)),
    CAST({t['stay_date']} AS TIMESTAMP(3))) AS DOUBLE) END AS lead_days
FROM parsed
WHERE CASE
    {cases}
    ELSE TRUE
  END"""


def dlq_insert() -> str:
    return """
INSERT INTO dlq_sink
SELECT payload, MAP[
  'source_topic', ENCODE(src_topic, 'UTF-8'),
  'source_partition', ENCODE(CAST(src_partition AS STRING), 'UTF-8'),
  'source_offset', ENCODE(CAST(src_offset AS STRING), 'UTF-8'),
  'error_class', ENCODE(CASE WHEN reason LIKE 'late event%' THEN 'LateEvent'
                              WHEN reason LIKE 'record:%' THEN 'MalformedRecord'
                              ELSE 'ValidationError' END, 'UTF-8'),
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
    ddl = [source_ddl(config), features_sink_ddl(config), dlq_sink_ddl(config), parsed_view(), classified_view(),
           valid_view()]
    return ddl, [dlq_insert(), feature_insert()]
