"""Typed models of the feature job's JVM specs: the JSON schema that ``pipelines/udf`` reads.

:mod:`pipelines.job_specs` fills these models from the job's config and the catalogue; each
serialises (:meth:`JobSpec.to_json`) to the JSON its Java reader takes, one typed class per spec
(``SinkSpec.java``, ``SourceSpec.java``, ``TileSpec.java``, ``RedisSinkSpec.java``, all through
``SpecNode.java``). Field names here are the JSON keys there: renaming one on either side fails the
round trip of ``tests/integration/test_job_spec_roundtrip.py``.

Example:
    >>> KafkaTarget(topic="t", delivery="none", transactional_id_prefix="p", properties={}).to_json()
    '{"topic": "t", "delivery": "none", "transactional_id_prefix": "p", "properties": {}}'
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Delivery = Literal["exactly-once", "at-least-once", "none"]


class JobSpec(BaseModel):
    """A spec the JVM reads: frozen, no field it does not declare, serialised in declaration order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_json(self) -> str:
        """The JSON the Java reader takes (``json.dumps`` of the fields, in their declared order)."""
        return json.dumps(self.model_dump(mode="json"))


class KafkaTarget(JobSpec):
    """One topic the job writes (``SinkSpec.Target``): its delivery guarantee and producer properties."""

    topic: str
    delivery: Delivery
    transactional_id_prefix: str
    properties: dict[str, str]
    """Producer properties of this target, over the sink's common ones."""


class SinkSpec(JobSpec):
    """Of ``SinkJob.java``: where the value rows, dead letters and accepted events go."""

    bootstrap: str
    views: dict[str, list[str]]
    """A view's features, in the order of its rows."""
    groups: dict[str, list[str]]
    """A group's views: its row holds their features one after another, split per view."""
    properties: dict[str, str]
    """Properties of every producer (SASL and TLS on a secure stack)."""
    features: KafkaTarget
    dlq: KafkaTarget
    accepted: KafkaTarget | None
    """None: the job writes no accepted events."""


class SourceSpec(JobSpec):
    """Of ``SourceJob.java``: the Kafka source, its watermarks, the contract, the lateness and the columns."""

    bootstrap: str
    topic: str
    group_id: str
    properties: dict[str, str]
    startup: Literal["earliest-offset", "group-offsets", "latest-offset"]
    bounded: bool
    out_of_orderness_ms: int
    idle_timeout_ms: int
    watermark_emit: Literal["on-periodic", "on-event"]
    allowed_lateness_ms: int
    late_reason: str
    contract: str
    """The contract spec, URL-safe base64 JSON (``events.contract.encoded_job_spec``)."""
    columns: list[str]
    accepted: bool


class TileFeature(JobSpec):
    """One feature of a tiled view: its aggregation over the column's partials."""

    name: str
    agg: str
    column: str | None


class TileView(JobSpec):
    """One tiled view: tile and window sizes, partials kept per tile, features computed from them."""

    name: str
    tile_ms: int
    window_ms: int
    rates: bool
    """Whether its tiles keep each competitor's latest rate."""
    partials: list[str]
    features: list[TileFeature]


class TileGroup(JobSpec):
    """The views keyed alike: one tile operator and one value row per entity and flush."""

    name: str
    keys: list[str]
    views: list[TileView]


class TileSpec(JobSpec):
    """Of ``TileSpec.java``: the input columns, the flush intervals, the state horizon and the groups."""

    columns: list[str]
    flush_ms: int
    backlog_flush_ms: int
    backlog_lag_ms: int
    horizon_ms: int
    groups: list[TileGroup]


class ViewLayout(JobSpec):
    """A view's bytes in Feast's Redis layout, base64: entity-key prefix, tags and murmur fields."""

    prefix: str
    key_count: int
    string_tag: str
    version_field: str
    ts_field: str
    fields: list[tuple[str, str]]
    """Per feature, in order: its name and its hash field."""


class RedisSinkSpec(JobSpec):
    """Of ``RedisSinkSpec.java``: where Redis is, how rows are batched, and each view's layout."""

    host: str
    port: int
    db: int
    cluster: list[tuple[str, int]]
    """A Redis Cluster's seed nodes; empty for one server."""
    user: str | None
    password: str | None = Field(repr=False)
    timeout_ms: int
    retry_ms: int
    project: str
    script: str
    batch_rows: int
    rows_per_call: int
    flush_ms: int
    lag_edges_ms: list[int]
    groups: dict[str, list[str]]
    views: dict[str, ViewLayout]
