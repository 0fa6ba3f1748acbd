"""Flink SQL of the feature job, as pure functions returning statements (and the tile spec).

Everything runs on the JVM; Python only assembles the text, generated from the one declaration of
the views (:data:`events.catalog.VIEW_SPECS`). The SQL parses and classifies each event once and
routes refused and late ones to the DLQ; the windowed views are tiled by one JVM operator per
entity group (``pipelines/udf/.../TileAggregator.java``, fed the rows of :func:`tile_input_query`
and configured by :func:`tile_spec`), which emits each changed view's window values; the inventory
view is a state: its rows carry ``event_time_ms * 1e6 + offset % 1e6`` as version (deterministic on
replay, tie-broken by the partition offset). Both land on ``features.v1`` as value rows, one per
(entity, view).
"""

from __future__ import annotations

import base64
import json
from urllib.parse import urlsplit

from events.catalog import STAY_KEYS, VIEW_SPECS, VIEWS, ViewSpec
from pipelines.config import FeatureJobConfig

_VERSION = "CAST(event_time_ms AS BIGINT) * 1000000 + MOD(src_offset, 1000000)"
# Broker append time of the record, in ms: the start of the freshness clock.
_PUBLISH_MS = "CAST(EXTRACT(EPOCH FROM publish_ts) AS BIGINT) * 1000 + EXTRACT(MILLISECOND FROM publish_ts)"


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


_VALUE_ROW_COLUMNS = """  hotel_id STRING,
  room_type STRING,
  stay_date STRING,
  `view` STRING,
  feature_time BIGINT,
  version BIGINT,
  publish_time BIGINT,
  features MAP<STRING, DOUBLE>
"""
"""A value row's columns (``TileJob.OUTPUT_NAMES``): both sinks of the rows take them."""


def features_sink_ddl(config: FeatureJobConfig) -> str:
    """Every view's value rows, keyed by (entity, view): a replayed row carries the same version and changes nothing.

    Plain Kafka, insert-only: the tile operator has already folded a flush interval's updates of an
    entity into one row per view. At-least-once by default (``tile_delivery``): the online writer's
    compare-and-set on the version makes a repeated row a no-op, so a row is visible as soon as it
    is written instead of at the next checkpoint.
    """
    extra = {
        "key.format": "json",
        "key.fields": "hotel_id;room_type;stay_date;view",
        "value.format": "json",
        "value.fields-include": "ALL",
        "sink.delivery-guarantee": config.tile_delivery,
        "sink.transactional-id-prefix": f"{config.transactional_id_prefix}-features",
        "properties.transaction.timeout.ms": str(config.transaction_timeout_ms),
        # Value rows are small (~400 bytes): larger batches cut the producer's network thread, which
        # cost ~45 us per event with the defaults (16 kB batches). No compression: each new lz4 batch
        # allocated its block buffers (~2% of the job's CPU samples); the JVM used 81 s instead of 95 s for
        # 120,000 events without it (one run each, loaded host).
        "properties.linger.ms": "20",
        "properties.batch.size": "262144",
        "properties.compression.type": "none",
    }
    return f"""
CREATE TEMPORARY TABLE features_sink (
{_VALUE_ROW_COLUMNS}) WITH (
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


PARSED_ROWTIME = "ts"


def parsed_query() -> str:
    """The only place the payload is parsed: once, on the JVM, by the contract's rules.

    ``parse_event`` (``pipelines/udf/.../ParseEvent.java``) applies the field rules that
    :func:`events.contract.job_spec` derives from the pydantic models, so the job and the SDK refuse
    the same records and name the same field; a valid row comes out typed, with its flags.
    ``parsed`` has several readers (the DLQ, the inventory rows, the tile operator's input); the planner
    would inline the lateral call into each (their correlation ids differ, so no digest reuse): the job
    registers this query
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


_TILE_COLUMNS = ("hotel_id", "room_type", "stay_date", "event_time_ms", "src_offset", "publish_ms",
                 "competitor_id", "rate")


def tile_columns() -> tuple[str, ...]:
    """Columns of ``valid`` the tile operator reads, in order: keys, time, offset, publish time, rates, partials."""
    partial_columns = [p.split(":", 1)[1] for spec in VIEW_SPECS for p in spec.partials if ":" in p]
    return tuple(dict.fromkeys([*_TILE_COLUMNS, *partial_columns]))


def tile_input_query() -> str:
    """The valid events as the tile operator reads them (the rowtime's watermarks come along)."""
    return f"SELECT {', '.join(tile_columns())} FROM valid"


def late_reason(config: FeatureJobConfig) -> str:
    """The ``error_message`` of a late event's dead letter."""
    return (f"late event: event_time more than the allowed lateness ({config.allowed_lateness_ms} ms) behind "
            f"the watermark (out-of-orderness {config.out_of_orderness_ms} ms)")


def source_spec(config: FeatureJobConfig) -> str:
    """JSON of ``SourceJob.java``: the Kafka source, its watermarks, the contract, the lateness and the columns.

    The source reads raw bytes, so that malformed JSON and invalid UTF-8 reach the DLQ; each record is
    parsed once, by the contract's rules (``ParseEvent.java``), with the same spec as the SDK's.
    """
    from events.contract import encoded_job_spec

    return json.dumps({
        "bootstrap": config.bootstrap_servers,
        "topic": config.topic(config.source_topic),
        "group_id": config.group_id,
        "properties": {"isolation.level": "read_committed", "auto.offset.reset": "earliest",
                       **config.kafka_properties},
        "startup": config.startup,
        "bounded": config.bounded,
        "out_of_orderness_ms": config.out_of_orderness_ms,
        "idle_timeout_ms": config.idle_timeout_ms,
        "watermark_emit": config.watermark_emit,
        "allowed_lateness_ms": config.allowed_lateness_ms,
        "late_reason": late_reason(config),
        "contract": encoded_job_spec(config.hotels),
        "columns": list(tile_columns()),
    })


def tile_spec(config: FeatureJobConfig) -> str:
    """JSON of the windowed views for ``TileSpec.java``: input columns, entity groups, tiles, partials, features.

    ``horizon_ms`` is how long an entity stays in the operator's state after its newest event: the
    longest window and its tile (a value can still change) plus the allowed lateness.
    """
    tiled = [spec for spec in VIEW_SPECS if spec.tile_ms is not None]
    groups: dict[tuple[str, ...], list[ViewSpec]] = {}
    for spec in tiled:
        groups.setdefault(spec.keys, []).append(spec)
    horizon = max((spec.window_ms or 0) + (spec.tile_ms or 0) for spec in tiled) + config.allowed_lateness_ms
    return json.dumps({
        "columns": list(tile_columns()),
        "flush_ms": config.flush_ms,
        "horizon_ms": horizon,
        "groups": [{
            "name": "stay" if keys == STAY_KEYS else "_".join(keys),
            "keys": list(keys),
            "views": [{
                "name": spec.name, "tile_ms": spec.tile_ms, "window_ms": spec.window_ms,
                "rates": spec.competitor_rates, "partials": list(spec.partials),
                "features": [{"name": f.name, "agg": f.agg, "column": f.column} for f in spec.features],
            } for spec in specs],
        } for keys, specs in groups.items()],
    })


def inventory_query() -> str:
    """Inventory is a state, not a window: every inventory event is a row; the newest version wins in Redis.

    Its rows join the tile operator's (:func:`pipelines.feature_job.register_tiles`), so one stream of
    value rows feeds both ``features.v1`` and the job's own online-store sink.
    """
    return f"""
SELECT hotel_id, room_type, stay_date, 'stay_inventory', event_time_ms, {_VERSION}, publish_ms,
  MAP['rooms_left', CAST(rooms_left AS DOUBLE), 'capacity', CAST(capacity AS DOUBLE),
      'occupancy', 1.0 - CAST(rooms_left AS DOUBLE) / CAST(capacity AS DOUBLE)]
FROM valid WHERE event_type = 'inventory'"""


TILE_VALUES_VIEW = "tile_values"
"""The tile operator's rows, registered by :func:`pipelines.feature_job.register_tiles`."""


def tile_values_insert() -> str:
    return f"INSERT INTO features_sink SELECT * FROM {TILE_VALUES_VIEW}"


DEAD_LETTERS_VIEW = "dead_letters"
"""The source's refused and late records with their headers (:func:`pipelines.feature_job.register_source`)."""


def all_statements(config: FeatureJobConfig) -> tuple[list[str], list[str]]:
    """(sink DDL, INSERTs) of the whole job. The INSERTs read the views that
    :func:`pipelines.feature_job.register_source` registers: the dead letters (:data:`DEAD_LETTERS_VIEW`)
    and the value rows of the tile operator and the inventory (:data:`TILE_VALUES_VIEW`)."""
    online = [online_sink_ddl(config)] if config.online is not None else []
    ddl = [features_sink_ddl(config), dlq_sink_ddl(config), *online]
    inserts = [f"INSERT INTO dlq_sink SELECT payload, headers FROM {DEAD_LETTERS_VIEW}", tile_values_insert()]
    if config.online is not None:
        inserts.append(f"INSERT INTO online_sink SELECT * FROM {TILE_VALUES_VIEW}")
    return ddl, inserts


def online_sink_ddl(config: FeatureJobConfig) -> str:
    """The job's own online-store sink (``RedisFeatureSinkFactory.java``): the value rows into Redis, no hop."""
    return f"""
CREATE TEMPORARY TABLE online_sink (
{_VALUE_ROW_COLUMNS}) WITH (
  'connector' = 'pricestream-redis',
  'spec' = '{_quoted(redis_sink_spec(config))}'
)"""


def redis_sink_spec(config: FeatureJobConfig) -> str:
    """JSON of ``RedisFeatureSink.java``: where Redis is, and each view's bytes in Feast's layout.

    The bytes come from :mod:`features.layout` (the encoding Feast's reader is tested against): the
    entity-key prefix of the view's join keys, the tag of a string value, the murmur field of each
    feature, the ``_ts``/``_v`` fields; the Java side only concatenates them with the key values and
    the project, so one implementation of the layout exists.
    """
    from features.freshness import SINK_LAG_EDGES_MS
    from features.layout import entity_key_prefix, feature_field, string_tag, ts_field, version_field
    from features.online_writer import CAS_SCRIPT

    online = config.online
    if online is None:
        msg = "online: got None, expected an OnlineSink to build the Redis sink's spec"
        raise ValueError(msg)
    from features.connection import cluster_seeds, is_cluster

    seeds = cluster_seeds(online.redis_url) if is_cluster(online.redis_url) else []  # a Redis Cluster's nodes
    parts = urlsplit(f"redis://{seeds[0][0]}:{seeds[0][1]}/0" if seeds else online.redis_url)
    if parts.scheme not in ("redis", ""):
        msg = (f"online.redis_url: got {online.redis_url!r}, expected redis://host:port/db or "
               "redis+cluster://host:port,... (TLS is not supported here)")
        raise ValueError(msg)

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode()

    return json.dumps({
        "host": parts.hostname or "127.0.0.1", "port": parts.port or 6379, "db": int(parts.path.strip("/") or 0),
        "cluster": [[host, port] for host, port in seeds],
        "user": online.username, "password": online.password, "timeout_ms": online.timeout_ms,
        "retry_ms": online.retry_ms, "project": online.project, "script": CAS_SCRIPT,
        "batch_rows": online.batch_rows, "rows_per_call": online.rows_per_call, "flush_ms": online.flush_ms,
        "lag_edges_ms": list(SINK_LAG_EDGES_MS),
        "views": {name: {
            "prefix": b64(entity_key_prefix(keys)), "key_count": len(keys), "string_tag": b64(string_tag()),
            "version_field": b64(version_field(name)), "ts_field": b64(ts_field(name)),
            "fields": [[f, b64(feature_field(name, f))] for f in names],
        } for name, (keys, names) in VIEWS.items()},
    })
