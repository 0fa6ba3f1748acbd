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


_TILE_COLUMNS = ("hotel_id", "room_type", "stay_date", "event_time_ms", "src_offset", "publish_ms",
                 "competitor_id", "rate")


def tile_columns() -> tuple[str, ...]:
    """Columns of ``valid`` the tile operator reads, in order: keys, time, offset, publish time, rates, partials."""
    partial_columns = [p.split(":", 1)[1] for spec in VIEW_SPECS for p in spec.partials if ":" in p]
    return tuple(dict.fromkeys([*_TILE_COLUMNS, *partial_columns]))


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
