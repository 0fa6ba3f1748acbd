"""The feature job's JVM parts, configured from Python: each function returns the JSON spec of one.

Everything runs on the JVM (``pipelines/udf``); Python only assembles the specs, generated from the
one declaration of the views (:data:`events.catalog.VIEW_SPECS`) and of the Redis layout
(:mod:`features.layout`). :func:`source_spec` configures ``SourceJob.java`` (read, parse once,
validate, split valid / inventory / dead letters), :func:`tile_spec` the tile operators
(``TileAggregator.java``), which emit each changed entity's window values (one row for all
the views of its group), :func:`sink_spec` and
:func:`redis_sink_spec` the sinks (``SinkJob.java``, ``RedisFeatureSink.java``). The inventory view
is a state: its rows carry ``event_time_ms * 1e6 + offset % 1e6`` as version (deterministic on replay,
tie-broken by the partition offset). Both land on ``features.v1`` and in Redis as value rows, one per
(entity, view): the sinks split a group's row per view.

Each spec is a typed model of :mod:`pipelines.spec_models` serialised to JSON, which the JVM reads
once through one typed reader per spec (``SinkSpec.java``, ``SourceSpec.java``, ``TileSpec.java``,
``RedisSinkSpec.java``); ``tests/integration/test_job_spec_roundtrip.py`` reads these specs back there.
"""

from __future__ import annotations

import base64
from urllib.parse import SplitResult, urlsplit

from events.catalog import STAY_KEYS, VIEW_SPECS, VIEWS, ViewSpec
from pipelines.config import FeatureJobConfig
from pipelines.spec_models import (
    KafkaTarget,
    RedisSinkSpec,
    SinkSpec,
    SourceSpec,
    TileFeature,
    TileGroup,
    TileSpec,
    TileView,
    ViewLayout,
)


def sink_spec(config: FeatureJobConfig) -> str:
    """JSON of ``SinkJob.java``: where the value rows and the dead letters go, and how they are delivered.

    Value rows are keyed by (entity, view): a replayed row carries the same version and changes nothing.
    They go at-least-once by default (``tile_delivery``): the online writer's compare-and-set on the
    version makes a repeated row a no-op, so a row is visible as soon as it is written instead of at
    the next checkpoint. Dead letters keep ``delivery`` (exactly-once by default).
    """
    return SinkSpec(
        bootstrap=config.bootstrap_servers,
        views={name: list(names) for name, (_, names) in VIEWS.items()},  # a row's features, in this order
        groups=_group_views(),  # a group's row: its views' features one after another, split per view
        properties=dict(config.kafka_properties),  # SASL and TLS on a secure stack
        features=KafkaTarget(
            topic=config.topic(config.sink_topic),
            delivery=config.tile_delivery,
            transactional_id_prefix=config.scoped(f"{config.transactional_id_prefix}-features"),
            # Value rows are small (~400 bytes): larger batches cut the producer's network thread, which
            # cost ~45 us per event with the defaults (16 kB batches). No compression: each new lz4 batch
            # allocated its block buffers (~2% of the job's CPU samples).
            properties={"transaction.timeout.ms": str(config.transaction_timeout_ms), "linger.ms": "20",
                        "batch.size": "262144", "compression.type": "none"},
        ),
        dlq=KafkaTarget(
            topic=config.topic(config.source_topic + ".dlq"),
            delivery=config.delivery,
            transactional_id_prefix=config.scoped(f"{config.transactional_id_prefix}-dlq"),
            properties={"transaction.timeout.ms": str(config.transaction_timeout_ms)},
        ),
        accepted=None if config.accepted_topic is None else KafkaTarget(
            topic=config.topic(config.accepted_topic),
            # at-least-once: the offline store keeps one copy per (source topic, partition, offset)
            delivery="at-least-once",
            transactional_id_prefix=config.scoped(f"{config.transactional_id_prefix}-accepted"),
            properties={"linger.ms": "20", "batch.size": "262144"},
        ),
    ).to_json()


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

    return SourceSpec(
        bootstrap=config.bootstrap_servers,
        topic=config.topic(config.source_topic),
        group_id=config.scoped(config.group_id),
        properties={"isolation.level": "read_committed", "auto.offset.reset": "earliest",
                    **config.kafka_properties},
        startup=config.startup,
        bounded=config.bounded,
        out_of_orderness_ms=config.out_of_orderness_ms,
        idle_timeout_ms=config.idle_timeout_ms,
        watermark_emit=config.watermark_emit,
        allowed_lateness_ms=config.allowed_lateness_ms,
        late_reason=late_reason(config),
        contract=encoded_job_spec(config.hotels),
        columns=list(tile_columns()),
        accepted=config.accepted_topic is not None,
    ).to_json()


def tile_groups() -> dict[str, list[ViewSpec]]:
    """The tiled views per entity group (views keyed alike), by group name, in catalogue order.

    A group of several views emits one value row per entity and flush with all its views' features
    (``TileAggregator.java``); the sinks split it per view (:func:`sink_spec`, :func:`redis_sink_spec`).

    Example:
        >>> {name: [v.name for v in views] for name, views in tile_groups().items()}["stay"]
        ['stay_1h', 'stay_24h', 'stay_7d', 'stay_14d']
    """
    groups: dict[str, list[ViewSpec]] = {}
    for spec in VIEW_SPECS:
        if spec.tile_ms is not None:
            groups.setdefault("stay" if spec.keys == STAY_KEYS else "_".join(spec.keys), []).append(spec)
    return groups


def _group_views() -> dict[str, list[str]]:
    """Group name -> its views, for the groups whose rows carry several views (what the sinks split)."""
    return {name: [v.name for v in views] for name, views in tile_groups().items() if len(views) > 1}


def tile_spec(config: FeatureJobConfig) -> str:
    """JSON of the windowed views for ``TileSpec.java``: input columns, entity groups, tiles, partials, features.

    ``horizon_ms`` is how long an entity stays in the operator's state after its newest event: the
    longest window and its tile (a value can still change) plus the allowed lateness.
    """
    groups = tile_groups()
    tiled = [spec for specs in groups.values() for spec in specs]
    horizon = max((spec.window_ms or 0) + (spec.tile_ms or 0) for spec in tiled) + config.allowed_lateness_ms
    return TileSpec(
        columns=list(tile_columns()),
        flush_ms=config.flush_ms,
        backlog_flush_ms=max(config.backlog_flush_ms, config.flush_ms),
        backlog_lag_ms=config.backlog_lag_ms,
        horizon_ms=horizon,
        groups=[TileGroup(name=name, keys=list(specs[0].keys), views=[_tile_view(spec) for spec in specs])
                for name, specs in groups.items()],
    ).to_json()


def _tile_view(spec: ViewSpec) -> TileView:
    """One tiled view of :func:`tile_spec` (its tile and window are set: :func:`tile_groups` keeps only those)."""
    return TileView(
        name=spec.name, tile_ms=spec.tile_ms or 0, window_ms=spec.window_ms or 0,
        rates=spec.competitor_rates, partials=list(spec.partials),
        features=[TileFeature(name=f.name, agg=f.agg, column=f.column) for f in spec.features],
    )


def redis_sink_spec(config: FeatureJobConfig) -> str:
    """JSON of ``RedisFeatureSink.java``: where Redis is, and each view's bytes in Feast's layout.

    The bytes come from :mod:`features.layout` (the encoding Feast's reader is tested against): the
    entity-key prefix of the view's join keys, the tag of a string value, the murmur field of each
    feature, the ``_ts``/``_v`` fields; the Java side only concatenates them with the key values and
    the project, so one implementation of the layout exists.
    """
    from features.freshness import SINK_LAG_EDGES_MS
    from features.online_writer import CAS_SCRIPT

    online = config.online
    if online is None:
        msg = "online: got None, expected an OnlineSink to build the Redis sink's spec"
        raise ValueError(msg)
    parts, seeds = _redis_address(online.redis_url)
    return RedisSinkSpec(
        host=parts.hostname or "127.0.0.1", port=parts.port or 6379, db=int(parts.path.strip("/") or 0),
        cluster=seeds,
        user=online.username, password=online.password, timeout_ms=online.timeout_ms,
        retry_ms=online.retry_ms, project=online.project, script=CAS_SCRIPT,
        batch_rows=online.batch_rows, rows_per_call=online.rows_per_call, flush_ms=online.flush_ms,
        lag_edges_ms=list(SINK_LAG_EDGES_MS),
        groups=_group_views(),
        views=_view_layouts(),
    ).to_json()


def _redis_address(redis_url: str) -> tuple[SplitResult, list[tuple[str, int]]]:
    """The server the sink connects to (a cluster's first seed) and a Redis Cluster's seed nodes (none: one server).

    Raises:
        ValueError: the URL is neither ``redis://`` nor ``redis+cluster://``.
    """
    from features.connection import cluster_seeds, is_cluster

    seeds = [(host, port) for host, port in cluster_seeds(redis_url)] if is_cluster(redis_url) else []
    parts = urlsplit(f"redis://{seeds[0][0]}:{seeds[0][1]}/0" if seeds else redis_url)
    if parts.scheme not in ("redis", ""):
        msg = (f"online.redis_url: got {redis_url!r}, expected redis://host:port/db or "
               "redis+cluster://host:port,... (TLS is not supported here)")
        raise ValueError(msg)
    return parts, seeds


def _view_layouts() -> dict[str, ViewLayout]:
    """Each view's bytes in Feast's layout (:mod:`features.layout`), base64."""
    from features.layout import entity_key_prefix, feature_field, string_tag, ts_field, version_field

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode()

    return {name: ViewLayout(
        prefix=b64(entity_key_prefix(keys)), key_count=len(keys), string_tag=b64(string_tag()),
        version_field=b64(version_field(name)), ts_field=b64(ts_field(name)),
        fields=[(f, b64(feature_field(name, f))) for f in names],
    ) for name, (keys, names) in VIEWS.items()}
