"""Configuration of the Flink feature job (data; endpoints and jar paths never literals)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class FeatureJobConfig(BaseModel):
    """Everything the feature job needs to know.

    Example:
        >>> FeatureJobConfig(connector_jar=Path("/x.jar")).source_topic
        'behaviour.events'
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    bootstrap_servers: str = "127.0.0.1:9092"
    topic_prefix: str = ""
    source_topic: str = "behaviour.events"
    sink_topic: str = "features.v1"
    group_id: str = "pricestream-feature-job"
    connector_jar: Path
    startup: Literal["earliest-offset", "group-offsets", "latest-offset"] = "group-offsets"
    bounded: bool = False
    """Stop at the offsets that were latest when the job started (tests, backfills)."""
    out_of_orderness_ms: int = Field(default=2000, ge=0)
    # Long: a partition marked idle while its reader is merely starved (2 cores, a backlog)
    # lets the watermark run ahead and turns its events late; 2 s lost 76% of a backfill.
    idle_timeout_ms: int = Field(default=60_000, gt=0)
    watermark_emit: Literal["on-periodic", "on-event"] = "on-periodic"
    """on-event: a watermark after every record (deterministic lateness in tests, lower latency)."""
    checkpoint_interval_ms: int = Field(default=2000, gt=0)
    checkpoint_dir: Path | None = None
    restore_from: Path | None = None
    delivery: Literal["exactly-once", "at-least-once"] = "exactly-once"
    transactional_id_prefix: str = "pricestream-features"
    # Below the broker's transaction.max.timeout.ms (15 min by default), above the
    # longest checkpoint we expect, so a slow checkpoint does not abort the transaction.
    transaction_timeout_ms: int = Field(default=600_000, gt=0)
    parallelism: int = Field(default=1, ge=1)
    restart_attempts: int = Field(default=3, ge=0)

    def topic(self, name: str) -> str:
        return f"{self.topic_prefix}{name}"
