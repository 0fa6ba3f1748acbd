"""The stream path of the scorer: ``pricing.requests`` -> :class:`~pricing.scorer.Scorer` -> ``pricing.decisions``.

A consumer-group service (scale out by running more instances of the same group, up to
the partition count of ``pricing.requests``). One loop step:

1. poll up to ``batch_size`` records (``read_committed``) through the one stream runtime
   (:mod:`events.runtime`, :class:`ScoreStep` plugged in); a record that is not a valid
   :class:`~events.models.PricingRequest`, or that the scorer cannot price, goes to
   ``pricing.requests.dlq`` with the five DLQ headers (source topic, partition, offset,
   error class, message) and the service goes on;
2. price the valid ones with one ``Scorer.price_batch`` call (one pipelined feature read);
3. produce one :class:`~events.models.PricingDecision` per request to ``pricing.decisions``,
   keyed by ``hotel_id``, and wait until the broker acknowledged every one of them;
4. only then commit the input offsets.

So delivery is at-least-once: a crash between 3 and 4 replays the batch, and a replay
produces a second decision with the same ``request_id`` (consumers dedupe on it). A
failed delivery raises :class:`StreamScorerError` out of :func:`run` without committing,
so a restarted instance re-prices the batch instead of losing it. The scorer itself never
raises for a valid request: a Redis outage yields rules-only decisions with
``degraded=True`` (see :mod:`pricing.scorer`).

Example:
    >>> cfg = StreamScorerConfig(batch_size=200)
    >>> cfg.requests_topic, cfg.decisions_topic, cfg.group_id
    ('pricing.requests', 'pricing.decisions', 'pricing-stream-scorer')
    >>> parse_request(b'{"event_type": "search"}')
    Traceback (most recent call last):
    ...
    events.errors.EventValidationError: field 'event_type': got 'search', expected 'pricing_request'
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field

from events.config import KafkaConfig
from events.errors import EventValidationError
from events.models import MAX_RECORD_BYTES, PricingDecision, PricingRequest, dumps
from events.runtime import BatchContext, DeliveryFailed, Output, Record, Runtime, RuntimeConfig, Step
from events.runtime.service import run_service, service_config
from pricing.errors import PricingError
from pricing.pricer import Pricer
from serving.body import parse_body
from serving.errors import BadRequest

__all__ = [
    "ScoreStep", "StreamScorerConfig", "StreamScorerError", "StreamStats", "parse_request", "run", "runtime_config",
]


class StreamScorerError(PricingError):
    """The stream scorer could not deliver a batch of decisions (its input offsets stay uncommitted)."""


class StreamScorerConfig(BaseModel):
    """Settings of the stream scorer.

    Attributes:
        kafka: brokers and topic prefix.
        requests_topic: logical input topic (its ``.dlq`` twin takes invalid records).
        decisions_topic: logical output topic.
        group_id: consumer group; instances of one group share the input partitions.
        batch_size: most records priced per ``price_batch`` call (and per offset commit).
        poll_timeout_s: how long one poll waits for records.
        deadline_ms: per-request budget inside a batch (``None``: the scorer's config).
        delivery_timeout_s: how long to wait for the broker to acknowledge a batch of decisions.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kafka: KafkaConfig = KafkaConfig()
    requests_topic: str = "pricing.requests"
    decisions_topic: str = "pricing.decisions"
    group_id: str = "pricing-stream-scorer"
    batch_size: int = Field(default=500, ge=1, le=100_000)
    poll_timeout_s: float = Field(default=0.5, gt=0, allow_inf_nan=False)
    deadline_ms: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    delivery_timeout_s: float = Field(default=30.0, gt=0, allow_inf_nan=False)


@dataclass
class StreamStats:
    """What one :func:`run` did.

    Attributes:
        polled: records read (valid and invalid).
        decisions: decisions produced and acknowledged.
        dead_lettered: invalid records sent to the DLQ.
        batches: committed batches.
        by_tier: decisions per deciding tier.
        degraded: decisions with ``degraded=True``.
        busy_s: wall time spent pricing and producing (excludes polls and commits).
        active_s: wall time from the first batch's arrival to the last batch's commit.
        elapsed_s: wall time of the whole run (group join and idle polls included).
    """

    polled: int = 0
    decisions: int = 0
    dead_lettered: int = 0
    batches: int = 0
    by_tier: Counter[str] = field(default_factory=Counter)
    degraded: int = 0
    busy_s: float = 0.0
    active_s: float = 0.0
    elapsed_s: float = 0.0

    @property
    def busy_rate(self) -> float:
        """Decisions per second of busy time (0.0 before the first decision)."""
        return self.decisions / self.busy_s if self.busy_s > 0 else 0.0

    @property
    def throughput(self) -> float:
        """Decisions per second while records were flowing (poll, parse, price, produce, commit)."""
        return self.decisions / self.active_s if self.active_s > 0 else 0.0

    def count(self, decisions: list[PricingDecision]) -> None:
        self.decisions += len(decisions)
        for decision in decisions:
            self.by_tier[decision.tier] += 1
            self.degraded += decision.degraded


def parse_request(raw: bytes | str) -> PricingRequest:
    """Parse one ``pricing.requests`` record with the HTTP API's strict parser (:func:`serving.body.parse_body`).

    The same bytes get the same verdict and the same field named on both paths: strict JSON types, no
    duplicate keys, no byte-order mark, at most :data:`~events.models.MAX_RECORD_BYTES` bytes.

    Raises:
        EventValidationError: not JSON, not a pricing request, or a field breaks the contract.

    Example:
        >>> parse_request(b'{"event_type": "pricing_request", "hotel_id": "h1", "room_type": "std",'
        ...               b' "stay_date": "2026-12-24", "nights": 2}').nights
        2
    """
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if len(data) > MAX_RECORD_BYTES:
        raise EventValidationError(field="<record>", value=f"{len(data)} bytes",
                                   expected=f"a record of at most {MAX_RECORD_BYTES} bytes")
    try:
        return parse_body(data, content_type="application/json")  # the HTTP API's parser, verdict for verdict
    except BadRequest as exc:
        first = exc.errors[0]
        raise EventValidationError(field=first.field, value=first.value, expected=first.expected) from exc


class ScoreStep(Step[PricingRequest]):
    """The stream scorer as an at-least-once runtime step: requests in, one decision each out.

    A request the scorer cannot price (``record_errors``) is isolated by the runtime and
    dead-lettered; the rest of its batch is priced.
    """

    record_errors = (ValueError, TypeError, ArithmeticError)

    def __init__(self, config: StreamScorerConfig, scorer: Pricer) -> None:
        self.config = config
        self.scorer = scorer
        self.stats = StreamStats()
        self._first: float | None = None

    def parse(self, record: Record[bytes]) -> PricingRequest:
        return parse_request(record.value)

    def process(self, batch: Sequence[Record[PricingRequest]], ctx: BatchContext | None) -> list[Output]:
        started = time.perf_counter()
        if self._first is None:
            self._first = started
        decisions = self.scorer.price_batch([r.value for r in batch], deadline_ms=self.config.deadline_ms)
        # built by the scorer through the validating constructor: no second validation pass
        outs = [Output(self.config.decisions_topic, d.hotel_id.encode(), dumps(d)) for d in decisions]
        self.stats.count(decisions)
        ended = time.perf_counter()
        self.stats.busy_s += ended - started
        self.stats.active_s = ended - self._first
        return outs

    def health(self) -> dict[str, str | None]:
        """The scorer's feature source, probed the way ``serve``'s ``/healthz`` probes it."""
        from serving.health import default_probes  # the HTTP layer owns the probe; imported only when asked

        out: dict[str, str | None] = {}
        for name, probe in default_probes(self.scorer).items():
            try:
                probe()
                out[name] = None
            except Exception as exc:  # noqa: BLE001 - a probe reports any failure; /healthz itself must answer
                out[name] = f"down: {type(exc).__name__}: {exc}"
        return out

    def describe(self) -> dict[str, Any]:
        return {"decisions": self.stats.decisions, "by_tier": dict(self.stats.by_tier),
                "degraded": self.stats.degraded}


def runtime_config(config: StreamScorerConfig, **overrides: object) -> RuntimeConfig:
    """Runtime settings of the stream scorer (at-least-once, group ``group_id``) plus ``overrides``."""
    return service_config({
        "name": "serve-stream", "kafka": config.kafka, "inputs": (config.requests_topic,),
        "group_id": config.group_id, "max_batch": config.batch_size, "poll_timeout_s": config.poll_timeout_s,
        "delivery_timeout_s": config.delivery_timeout_s,
    }, **overrides)


def run(
    config: StreamScorerConfig,
    scorer: Pricer,
    *,
    stop_event: threading.Event | None = None,
    max_idle_s: float | None = None,
    runtime: RuntimeConfig | None = None,
    registry: CollectorRegistry | None = None,
) -> StreamStats:
    """Price ``pricing.requests`` into ``pricing.decisions`` until stopped or idle.

    Args:
        config: stream settings.
        scorer: the routed scorer (one instance, batched calls).
        stop_event: set it to stop after the current batch.
        max_idle_s: return once no record arrived for this long (``None``: only ``stop_event`` stops).
        runtime: runtime settings (ops port, grace, ...); ``None``: :func:`runtime_config` of ``config``.
        registry: Prometheus registry of the runtime's series.

    Raises:
        StreamScorerError: decisions could not be delivered; that batch's offsets are not committed.
    """
    step = ScoreStep(config, scorer)
    rc = runtime or runtime_config(config, max_idle_s=max_idle_s)
    began = time.monotonic()
    try:
        totals = run_service(Runtime(rc, step, registry=registry, stop_event=stop_event))
    except DeliveryFailed as exc:
        msg = f"decisions_topic {config.kafka.topic(config.decisions_topic)!r}: {exc}"
        raise StreamScorerError(msg) from exc
    finally:
        step.stats.elapsed_s = time.monotonic() - began
    step.stats.polled, step.stats.batches, step.stats.dead_lettered = totals.consumed, totals.batches, \
        totals.dead_lettered
    return step.stats
