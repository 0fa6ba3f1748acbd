"""Flink SQL of the feature job, as pure functions returning statements.

The aggregations run on the JVM; Python only assembles the text, generated from the one
declaration of the views (:data:`events.catalog.VIEW_SPECS`). Each windowed view is a tiled
group aggregation: mergeable partials (counts, sums, sums of squares, the latest rate per
competitor) per (entity, tile start), which :mod:`features.tiles` merges into window values in
Redis. The inventory view is a state: its rows carry ``event_time_ms * 1e6 + offset % 1e6`` as
version (deterministic on replay, tie-broken by the partition offset).
"""

from __future__ import annotations

from events.catalog import SPECS, VIEW_SPECS, ViewSpec
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
LATEST_RATES_FUNCTION = "io.pricestream.flink.LatestRates"


def function_ddl() -> list[str]:
    """The job's JVM functions (``pipelines/udf``): the one-pass parser, the rowtime extractor, a tile partial."""
    return [
        f"CREATE TEMPORARY SYSTEM FUNCTION parse_event AS '{PARSE_FUNCTION}' LANGUAGE JAVA",
        f"CREATE TEMPORARY SYSTEM FUNCTION event_time_of AS '{EVENT_TIME_FUNCTION}' LANGUAGE JAVA",
        f"CREATE TEMPORARY SYSTEM FUNCTION latest_rates AS '{LATEST_RATES_FUNCTION}' LANGUAGE JAVA",
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


def features_sink_ddl(config: FeatureJobConfig, view: str) -> str:
    """One view's tiles as upserts keyed by (entity, view, tile start): a replayed tile overwrites itself.

    One sink table per view, all on ``features.v1``, whose key is exactly its aggregation's group
    key: only then does the planner send just the new value of a tile (through a UNION, or with a
    constant column in the key, it asks for the retraction of the old value too, and upsert-kafka
    writes that as a tombstone). The Kafka key is the entity and the tile start; the view is in the value.
    At-least-once by default (``tile_delivery``): an idempotent upsert needs no transaction, so a
    row is visible as soon as it is written instead of at the next checkpoint.
    """
    extra = {
        "connector": "upsert-kafka",
        "key.format": "json",
        "value.format": "json",
        "value.fields-include": "ALL",
        "sink.delivery-guarantee": config.tile_delivery,
        "sink.transactional-id-prefix": f"{config.transactional_id_prefix}-{view}",
        "properties.transaction.timeout.ms": str(config.transaction_timeout_ms),
    }
    if SPECS[view].tile_ms is not None:
        # Rows of one tile within the interval collapse to the last one before they reach Kafka: the
        # last to arrive is the newest (a tile's versions only grow). Not for a state view: there an
        # event older than the one before it arrives later, and the buffer would keep the older.
        extra.update({"sink.buffer-flush.max-rows": str(config.sink_buffer_rows),
                      "sink.buffer-flush.interval": f"{config.sink_buffer_ms} ms"})
    keys = SPECS[view].keys
    columns = "".join(f"  {k} STRING,\n" for k in keys)
    return f"""
CREATE TEMPORARY TABLE {sink_name(view)} (
{columns}  `view` STRING,
  tile_start BIGINT,
  feature_time BIGINT,
  version BIGINT,
  publish_time BIGINT,
  features MAP<STRING, DOUBLE>,
  rates MAP<STRING, DOUBLE>,
  PRIMARY KEY ({", ".join(keys)}, tile_start) NOT ENFORCED
) WITH (
  {_kafka_with(config, config.sink_topic, **extra)}
)"""


def sink_name(view: str) -> str:
    return f"features_sink_{view}"


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


PARSED_ROWTIME = "ts"


def parsed_query() -> str:
    """The only place the payload is parsed: once, on the JVM, by the contract's rules.

    ``parse_event`` (``pipelines/udf/.../ParseEvent.java``) applies the field rules that
    :func:`events.contract.job_spec` derives from the pydantic models, so the job and the SDK refuse
    the same records and name the same field; a valid row comes out typed, with its flags.
    ``parsed`` has seven readers (the DLQ and every view); the planner would inline the lateral
    call into each (their correlation ids differ, so no digest reuse): the job registers this query
    behind a DataStream boundary (:func:`pipelines.feature_job.register_parsed`) instead. ``ts`` is
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
    why = (f"late event: event_time more than the allowed lateness ({config.allowed_lateness_ms} ms) behind "
           f"the watermark (out-of-orderness {config.out_of_orderness_ms} ms)")
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
  event_time_ms, src_offset, publish_ts,
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


def _partial_sql(partial: str) -> str:
    """SQL of one mergeable partial of a tile: ``n`` (events), ``sum:c``, ``n:c`` (non-null count), ``sq:c``."""
    if partial == "n":
        return "CAST(COUNT(*) AS DOUBLE)"
    kind, column = partial.split(":")
    return {"sum": f"CAST(SUM({column}) AS DOUBLE)", "n": f"CAST(COUNT({column}) AS DOUBLE)",
            "sq": f"CAST(SUM({column} * {column}) AS DOUBLE)"}[kind]


def tile_select(spec: ViewSpec) -> str:
    """One windowed view's tiles: a group aggregation per (entity, tile start).

    Each output row is the tile's partials so far, an upsert keyed by (entity, view, tile start):
    a tile is rewritten, never appended to, so delivering a row twice changes nothing. ``version``
    is the greatest source offset in the tile: a key's events share a partition (keyed by hotel), so
    it grows with every update of the tile and a replay reproduces it.
    """
    if spec.tile_ms is None:
        msg = f"view {spec.name!r} has no tile (a state view); expected a windowed view"
        raise ValueError(msg)
    keys = ", ".join(spec.keys)
    entries = ", ".join(f"'{p}', {_partial_sql(p)}" for p in spec.partials)
    rates = ("latest_rates(competitor_id, rate, event_time_ms, src_offset)" if spec.competitor_rates
             else "CAST(NULL AS MAP<STRING, DOUBLE>)")
    return f"""
SELECT {keys}, '{spec.name}', tile_start,
  MAX(event_time_ms), MAX(src_offset), MAX({_PUBLISH_MS}), MAP[{entries}], {rates}
FROM (SELECT *, event_time_ms - MOD(event_time_ms, {spec.tile_ms}) AS tile_start FROM valid)
GROUP BY {keys}, tile_start"""


def feature_inserts() -> list[str]:
    """One INSERT per feature view of :data:`events.catalog.VIEW_SPECS`, each into its own sink table."""
    return [f"INSERT INTO {sink_name(spec.name)}\n{select}" for spec, select in zip(VIEW_SPECS, feature_selects(),
                                                                                    strict=True)]


def feature_selects() -> list[str]:
    """The SELECT of each feature view: tiles for the windowed views, the newest row for inventory."""
    return [tile_select(spec) if spec.tile_ms is not None else _inventory_select() for spec in VIEW_SPECS]


def _inventory_select() -> str:
    """Inventory is a state, not a window: every inventory event is a row; the newest version wins in Redis."""
    return f"""
SELECT hotel_id, room_type, stay_date, 'stay_inventory', CAST(-1 AS BIGINT), event_time_ms, {_VERSION},
  {_PUBLISH_MS},
  MAP['rooms_left', CAST(rooms_left AS DOUBLE), 'capacity', CAST(capacity AS DOUBLE),
      'occupancy', 1.0 - CAST(rooms_left AS DOUBLE) / CAST(capacity AS DOUBLE)], CAST(NULL AS MAP<STRING, DOUBLE>)
FROM valid WHERE event_type = 'inventory'"""


def all_statements(config: FeatureJobConfig) -> tuple[list[str], list[str]]:
    """(DDL and views, INSERTs) of the whole job; ``parsed``, which the last two views read, is registered
    between them and the rest (:func:`pipelines.feature_job.register_parsed`)."""
    sinks = [features_sink_ddl(config, spec.name) for spec in VIEW_SPECS]
    ddl = [*function_ddl(), source_ddl(config), *sinks, dlq_sink_ddl(config), classified_view(config),
           valid_view(config)]
    return ddl, [dlq_insert(), *feature_inserts()]
