"""Monitor service: ``pricing.decisions`` into :class:`~feedback.monitors.stream.DecisionMonitor`, on the runtime.

:class:`MonitorStep` feeds each decision to the monitor's ``learn_many`` and exports the reports
to the process's Prometheus registry every ``export_every`` decisions (and on every forced
commit: stop, idle, rebalance), so ``/metrics`` of ``pricestream services run monitor`` carries
the coverage, flip, drift, tier and arm series next to the runtime's own. A record that is not a
:class:`~events.models.PricingDecision` goes to ``pricing.decisions.dlq``.

Example:
    >>> from prometheus_client import CollectorRegistry
    >>> from events.runtime import Record
    >>> from feedback.monitors.stream import DecisionMonitor, MonitorConfig
    >>> step = MonitorStep(DecisionMonitor(MonitorConfig(), registry=CollectorRegistry()))
    >>> step.parse(Record("pricing.decisions", 0, 0, None, b'[1]'))  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ...
    events.errors.EventValidationError: field '<record>': not a JSON object
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from events.errors import EventValidationError
from events.models import PricingDecision
from events.runtime import BatchContext, Output, Record, Step
from feedback.monitors.stream import DecisionMonitor
from feedback.services.kafka_io import parse_record

DECISIONS = "pricing.decisions"


class MonitorServiceConfig(BaseModel):
    """Settings of the monitor service's step."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    group_id: str = "pricestream-monitors"
    export_every: int = Field(default=1_000, ge=1, description="decisions between two Prometheus exports")


class MonitorStep(Step[PricingDecision]):
    """Feed decisions to a :class:`DecisionMonitor`; export its reports to Prometheus."""

    def __init__(self, monitor: DecisionMonitor, *, export_every: int = 1_000) -> None:
        self.monitor = monitor
        self.export_every = export_every
        self._since_export = 0

    def parse(self, record: Record[bytes]) -> PricingDecision:
        event = parse_record(record.value)
        if not isinstance(event, PricingDecision):
            field_name = "event_type"
            raise EventValidationError(field_name, getattr(event, "event_type", None), "'pricing_decision'")
        return event

    def process(self, batch: Sequence[Record[PricingDecision]], ctx: BatchContext | None) -> list[Output]:
        self.monitor.learn_many([r.value for r in batch])
        self._since_export += len(batch)
        if self._since_export >= self.export_every:
            self.monitor.export()
            self._since_export = 0
        return []

    def durable(self, *, force: bool) -> bool:
        if force and self._since_export:
            self.monitor.export()
            self._since_export = 0
        return True

    def describe(self) -> dict[str, Any]:
        tiers, _ = self.monitor.shares()
        alarms = self.monitor.alarms
        return {"decisions": self.monitor.n_decisions, "tiers": {k: round(v, 3) for k, v in tiers.items()},
                "drift_alarms": len(alarms), "last_alarm": alarms[-1].describe() if alarms else None}
