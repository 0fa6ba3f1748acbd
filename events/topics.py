"""Topic registry: every topic pricestream reads or writes, with its settings.

Every *input* topic has a ``<topic>.dlq`` twin for records that cannot be processed.

Example:
    >>> TOPICS["behaviour.events"].key
    'hotel_id'
    >>> "behaviour.events.dlq" in TOPICS
    True
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

_DAY_MS = 24 * 3600 * 1000


class TopicSpec(BaseModel):
    """Settings for one topic."""

    model_config = ConfigDict(frozen=True)

    name: str
    partitions: int = Field(default=3, ge=1)
    key: str = "hotel_id"
    retention_ms: int = 7 * _DAY_MS
    is_input: bool = True
    description: str = ""
    cleanup_policy: Literal["delete", "compact"] = "delete"
    """``compact`` keeps the newest record of every key (the control plane's state), ``delete`` ages records out."""

    @property
    def dlq(self) -> str:
        return f"{self.name}.dlq"


_BASE = (
    TopicSpec(name="behaviour.events", partitions=6, description="search/view/booking/... from producers"),
    TopicSpec(name="features.v1", partitions=6, description="feature rows from the Flink feature job"),
    TopicSpec(name="behaviour.events.accepted", partitions=6,
              description="every event the feature job accepted, with its columns (the offline store's raw events)"),
    TopicSpec(name="pricing.requests", partitions=3, description="pricing requests for the stream scorer"),
    TopicSpec(name="pricing.decisions", partitions=3, retention_ms=30 * _DAY_MS, description="scorer decisions"),
    TopicSpec(
        name="feedback.labels", partitions=3, retention_ms=30 * _DAY_MS, description="decisions joined with outcomes"
    ),
    TopicSpec(
        name="training.examples", partitions=3, retention_ms=30 * _DAY_MS, description="actively sampled examples"
    ),
    TopicSpec(
        name="control.v1", partitions=1, key="control key", is_input=False, cleanup_policy="compact",
        description="registry and rollout state for every serving replica (delivery.control_plane), one partition",
    ),
    TopicSpec(
        name="audit.heads", partitions=1, key="audit log id", is_input=False, retention_ms=3650 * _DAY_MS,
        description="anchors (MAC'd heads) of the serving audit logs (audit.kafka_anchors), kept ten years",
    ),
)


def _registry() -> dict[str, TopicSpec]:
    out: dict[str, TopicSpec] = {}
    for spec in _BASE:
        out[spec.name] = spec
        if spec.is_input:
            out[spec.dlq] = TopicSpec(
                name=spec.dlq,
                partitions=1,
                key=spec.key,
                retention_ms=30 * _DAY_MS,
                is_input=False,
                description=f"records from {spec.name} that could not be processed",
            )
    return out


TOPICS: MappingProxyType[str, TopicSpec] = MappingProxyType(_registry())
