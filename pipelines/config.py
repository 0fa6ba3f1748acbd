"""Configuration of the Flink feature job (data; endpoints and jar paths never literals)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from events.contract import HotelProfile

JOB_NAME = "features"
"""The job's name: the last part of its checkpoint directory."""
UDF_JAR_NAME = "pricestream-udf.jar"
"""The job's JVM functions, built by ``pricestream up`` next to the connector jar (``infra.jars.build_udf``)."""


class OnlineSink(BaseModel):
    """The online store the job writes itself (Feast's Redis layout, compare-and-set on the version).

    Example:
        >>> OnlineSink(redis_url="redis://127.0.0.1:6379/0", project="demo").flush_ms
        50
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    redis_url: str
    project: str
    """The Feast project: the suffix of every entity key."""
    username: str | None = None
    password: str | None = Field(default=None, repr=False)
    """The ACL user's password on a secure stack (a secret: never printed)."""
    timeout_ms: int = Field(default=5_000, gt=0)
    retry_ms: int = Field(default=60_000, ge=0)
    """How long a Redis outage blocks the job before it fails over to a restart from its checkpoint."""
    batch_rows: int = Field(default=2_000, gt=0)
    """Rows held (newest per entity and view) before a round trip, whatever the timer."""
    rows_per_call: int = Field(default=64, gt=0)
    """Rows per script call: one call blocks Redis while it runs (~5 us a row), so the scorer's reads wait little."""
    flush_ms: int = Field(default=50, gt=0)
    """How often the held rows go to Redis: with the tile operator's flush, the floor of freshness."""


class FeatureJobConfig(BaseModel):
    """Everything the feature job needs to know.

    Example:
        >>> FeatureJobConfig(connector_jar=Path("/x.jar")).source_topic
        'behaviour.events'
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    bootstrap_servers: str = "127.0.0.1:9092"
    kafka_properties: dict[str, str] = Field(default_factory=dict)
    """Extra client settings of every Kafka source and sink (librdkafka names without ``properties.``,
    e.g. ``security.protocol``, ``sasl.jaas.config`` of a secure stack); secrets: never logged."""
    topic_prefix: str = ""
    source_topic: str = "behaviour.events"
    sink_topic: str = "features.v1"
    group_id: str = "pricestream-feature-job"
    """The source's consumer group; the job uses it under the topic prefix (:meth:`scoped`)."""
    accepted_topic: str | None = "behaviour.events.accepted"
    """Where the job writes every event it accepts (its columns and the event's bytes), for the offline
    store's raw events and point-in-time history (``features.asof``); None: not written."""
    connector_jar: Path
    online: OnlineSink | None = None
    """Write the online store from the job (no hop through ``features.v1`` and the Python writer); None: Kafka only."""
    udf_jar: Path | None = None
    """``pipelines/udf`` built; None means the default place, next to ``connector_jar``."""
    hotels: dict[str, HotelProfile] = Field(default_factory=dict)
    """Per-hotel profiles of the contract's rules (time zone of the stay-date rule, price range)."""
    startup: Literal["earliest-offset", "group-offsets", "latest-offset"] = "group-offsets"
    bounded: bool = False
    """Stop at the offsets that were latest when the job started (tests, backfills)."""
    out_of_orderness_ms: int = Field(default=2000, ge=0)
    # Long: a partition marked idle while its reader is merely starved (2 cores, a backlog)
    # lets the watermark run ahead and turns its events late; 2 s lost 76% of a backfill.
    idle_timeout_ms: int = Field(default=60_000, gt=0)
    watermark_emit: Literal["on-periodic", "on-event"] = "on-periodic"
    """on-event: a watermark after every record (deterministic lateness in tests, lower latency)."""
    checkpoint_interval_ms: int = Field(default=10_000, gt=0)
    """Output does not wait for checkpoints (idempotent rows): they bound the replay after a crash. Each is a
    full snapshot of the tiles (heap state), so every 2 s cost ~40 us per event at 2,000 events/s."""
    checkpoint_dir: Path | None = None
    restore_from: Path | None = None
    allowed_lateness_ms: int = Field(default=86_400_000, ge=0)
    """How far behind the watermark an event may come and still update its tile (days for a backfill);
    beyond it the event goes to the DLQ as ``LateEvent``."""
    flush_ms: int = Field(default=200, gt=0)
    """How often (processing time) the tile operator emits the window values of the entities that changed:
    the floor of freshness, and the interval whose updates of one entity fold into one row per view."""
    backlog_flush_ms: int = Field(default=2000, gt=0)
    """The flush interval while the input is behind by more than ``backlog_lag_ms`` (a backlog, a backfill, a
    restart's replay): more of an entity's events fold into one row, and rows are what the job's cost follows."""
    backlog_lag_ms: int = Field(default=5000, gt=0)
    """How far behind (now minus the newest event's Kafka append time) the input must be for ``backlog_flush_ms``."""
    delivery: Literal["exactly-once", "at-least-once"] = "exactly-once"
    """Of the DLQ sink (a dead letter is not idempotent: at-least-once could repeat it)."""
    tile_delivery: Literal["exactly-once", "at-least-once"] = "at-least-once"
    """Of the tile sink: an upsert of a tile is idempotent, so at-least-once gives exactly-once values
    without waiting for a checkpoint to make a row visible."""
    transactional_id_prefix: str = "pricestream-features"
    """Of the job's transactional producers; the job uses it under the topic prefix (:meth:`scoped`)."""
    # Below the broker's transaction.max.timeout.ms (15 min by default), above the
    # longest checkpoint we expect, so a slow checkpoint does not abort the transaction.
    transaction_timeout_ms: int = Field(default=600_000, gt=0)
    parallelism: int = Field(default=1, ge=1)
    restart_attempts: int = Field(default=3, ge=0)

    def topic(self, name: str) -> str:
        return f"{self.topic_prefix}{name}"

    def scoped(self, name: str) -> str:
        """A consumer group or transactional id under this deployment's topic prefix (two deployments never share).

        Example:
            >>> FeatureJobConfig(connector_jar=Path("/x.jar"), topic_prefix="h3.").scoped("pricestream-feature-job")
            'h3.pricestream-feature-job'
        """
        return name if name.startswith(self.topic_prefix) else f"{self.topic_prefix}{name}"

    @property
    def checkpoints(self) -> Path | None:
        """This deployment's and job's checkpoints: ``checkpoint_dir/<topic prefix>features``, or None.

        Example:
            >>> job = FeatureJobConfig(connector_jar=Path("/x.jar"), topic_prefix="h3.", checkpoint_dir=Path("/s"))
            >>> job.checkpoints
            PosixPath('/s/h3.features')
        """
        if self.checkpoint_dir is None:
            return None
        return self.checkpoint_dir / f"{self.topic_prefix}{JOB_NAME}"

    @property
    def functions_jar(self) -> Path:
        return self.udf_jar or self.connector_jar.with_name(UDF_JAR_NAME)
