"""Settings of one stream-runtime process (data, validated at start-up)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from events.config import KafkaConfig

Mode = Literal["at_least_once", "transactional"]
Assignment = Literal["group", "all_partitions"]


class RuntimeConfig(BaseModel):
    """How :class:`~events.runtime.driver.Runtime` consumes, produces and commits.

    Attributes:
        name: service name (metrics label, log field, default client id).
        kafka: brokers and topic prefix.
        inputs: logical input topics; a record the step cannot handle goes to ``<topic>.dlq``.
        group_id: consumer group that stores the committed offsets.
        mode: ``at_least_once`` (outputs flushed and acknowledged, then offsets committed: a crash
            replays) or ``transactional`` (outputs, dead letters and offsets in one Kafka
            transaction per batch: consume-transform-produce exactly once).
        assignment: ``group`` (subscribe; instances share the partitions) or ``all_partitions``
            (one instance reads every partition; a stateful step whose state spans partitions).
        transactional_id: stable per instance (a restart fences its zombie); required when transactional.
        instance_id: static group membership (``group.instance.id``, ``group`` assignment): a restarted
            instance with the same id takes its partitions back at once, without a rebalance or waiting
            for the dead member's session to time out (a second process with the same id fences the first).
        max_batch: most records per batch (and per transaction).
        poll_timeout_s: longest wait of one poll; bounds how late a stop request is noticed.
        max_idle_s: return once no record arrived for this long (``None``: run until stopped).
        delivery_timeout_s: how long to wait for the broker to acknowledge a batch's outputs.
        grace_s: how long a stop may take (finish the batch, flush, commit) before the process is ended.
        ops_host: bind address of ``/healthz`` and ``/metrics``.
        ops_port: their port (``None``: no HTTP endpoint; ``0``: any free port).
        log_every_s: seconds between two progress log lines (records, lag, dead letters).

    Example:
        >>> RuntimeConfig(name="x", inputs=("a",), group_id="g").mode
        'at_least_once'
        >>> RuntimeConfig(name="x", inputs=("a",), group_id="g", mode="transactional")
        Traceback (most recent call last):
        ...
        pydantic_core._pydantic_core.ValidationError: 1 validation error for RuntimeConfig
          Value error, field 'transactional_id': got None, expected a stable id when mode='transactional' ...
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    kafka: KafkaConfig = KafkaConfig()
    inputs: tuple[str, ...] = Field(min_length=1)
    group_id: str = Field(min_length=1)
    mode: Mode = "at_least_once"
    assignment: Assignment = "group"
    transactional_id: str | None = None
    instance_id: str | None = None
    max_batch: int = Field(default=500, ge=1, le=100_000)
    poll_timeout_s: float = Field(default=0.5, gt=0, allow_inf_nan=False)
    max_idle_s: float | None = Field(default=None, gt=0)
    delivery_timeout_s: float = Field(default=30.0, gt=0, allow_inf_nan=False)
    grace_s: float = Field(default=30.0, gt=0, allow_inf_nan=False)
    ops_host: str = "127.0.0.1"
    ops_port: int | None = Field(default=None, ge=0, lt=65536)
    log_every_s: float = Field(default=10.0, gt=0, allow_inf_nan=False)
    auto_offset_reset: Literal["earliest", "latest"] = "earliest"

    @model_validator(mode="after")
    def _transactional_needs_an_id(self) -> RuntimeConfig:
        if self.mode == "transactional" and not self.transactional_id:
            msg = (f"field 'transactional_id': got {self.transactional_id!r}, expected a stable id when "
                   "mode='transactional'")
            raise ValueError(msg)
        return self
