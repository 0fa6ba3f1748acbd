"""The monitor service: pricing decisions from Kafka into the coverage, flip and drift monitors and Prometheus.

:class:`DecisionMonitor` is the pure core, fed one :class:`~events.models.PricingDecision` at a
time (``learn_one``):

* **coverage** (:class:`~feedback.monitors.CoverageMonitor`): the feature values each served
  decision used, per hotel; a decision degraded for stale features counts its values as stale;
* **flips** (:class:`~feedback.monitors.FlipMonitor`): the same input (request fields and
  feature values, :func:`~feedback.monitors.input_hash`) priced twice by one model version;
  and, during a rollout, the share of requests whose shadow price (``arm="<arm>-shadow"``)
  differs from the price served for the same request (scope ``rollout``);
* **drift** (:class:`~feedback.monitors.DriftMonitor`, when a reference frame is given): an
  effect-size check of the latest feature rows (and the request's lead time and channel, where the
  reference has them: :func:`request_features`) every ``drift_check_every`` decisions; an alerting
  check rings the :class:`~feedback.monitors.alarms.DriftAlarm` (once per episode), which requests a
  trainer update (``update_requests``) and recalibrates the router (``recalibrator``) and records what
  it did (:attr:`DecisionMonitor.alarms`, the ``pricestream_drift_alarms_total`` counter);
* tier shares, decision latency per tier, and the traffic share of each rollout arm.

:meth:`DecisionMonitor.export` writes the reports to a Prometheus registry (through
:class:`~feedback.monitors.metrics.MonitorMetrics`) and keeps their history, which
:meth:`DecisionMonitor.dashboard_inputs` hands to :func:`feedback.dashboard.write_dashboard`.
:class:`MonitorStream` is the Kafka adapter: it consumes ``pricing.decisions`` as a consumer
group member, commits after each batch, and dead-letters what it cannot parse.

Example:
    >>> from datetime import date, datetime, timezone
    >>> from prometheus_client import CollectorRegistry
    >>> registry = CollectorRegistry()
    >>> mon = DecisionMonitor(MonitorConfig(features=("occupancy",)), registry=registry)
    >>> t = datetime(2026, 12, 1, tzinfo=timezone.utc)
    >>> for hotel, occ in (("h1", 0.5), ("h2", None)):
    ...     mon.learn_one(PricingDecision(hotel_id=hotel, room_type="std", stay_date=date(2026, 12, 24),
    ...                   request_id="00000000-0000-0000-0000-000000000001", price=120.0, tier="light",
    ...                   complexity=0.3, latency_ms=2.0, event_time=t, features={"occupancy": occ}))
    >>> mon.coverage("h1", "occupancy"), mon.coverage("h2", "occupancy")
    (1.0, 0.0)
    >>> mon.export(at=t)
    >>> registry.get_sample_value("pricestream_coverage_worst_hotel_missing_share", {"feature": "occupancy"})
    1.0
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field

from events.catalog import ALL_FEATURES
from events.config import KafkaConfig
from events.consumer import EventConsumer
from events.models import PricingDecision
from feedback.monitors.alarms import AlarmConfig, AlarmRecord, DriftAlarm, UpdateRequests
from feedback.monitors.coverage import CoverageMonitor, CoverageReport
from feedback.monitors.drift import DriftMonitor, DriftReport
from feedback.monitors.errors import MonitorInputError
from feedback.monitors.flips import FlipMonitor, FlipReport, decision_input_hash
from feedback.monitors.metrics import MonitorMetrics
from feedback.monitors.recalibration import ThresholdRecalibrator
from pricing.vectorize import CHANNEL_CODES

STALE_REASON = "stale_features"
"""``degraded_reason`` prefix of a decision whose features were too old (``pricing.degraded.STALE_FEATURES``)."""

SHADOW_SUFFIX = "-shadow"
"""Suffix of the ``arm`` of a decision priced in the background and never shown (``delivery.rollout``)."""


REQUEST_DRIFT_FEATURES = ("lead_time_days", "channel_code")
"""Request inputs the drift check watches too, when the reference frame has them (:func:`request_features`)."""


def request_features(*, stay_date: date, at: datetime, channel: str, nights: int | None = None) -> dict[str, float]:
    """The request's own inputs that the drift check may watch: lead time (days), channel code, nights.

    A shift in who books when, or through which channel, moves no stay feature at first; these do.

    Example:
        >>> request_features(stay_date=date(2026, 9, 8), at=datetime(2026, 9, 1, 23, tzinfo=UTC), channel="ota")
        {'lead_time_days': 7.0, 'channel_code': 2.0}
    """
    out = {"lead_time_days": float(max((stay_date - at.astimezone(UTC).date()).days, 0)),
           "channel_code": CHANNEL_CODES.get(channel, float("nan"))}
    if nights is not None:
        out["nights"] = float(nights)
    return out


class MonitorConfig(BaseModel):
    """Settings of the monitor service.

    Attributes:
        window: coverage sliding window.
        staleness: coverage staleness limit (values of stale-degraded decisions always count as stale).
        features: monitored features.
        drift_check_every: decisions between automatic drift checks (0: only :meth:`DecisionMonitor.check_drift`).
        drift_window: latest feature rows a drift check looks at.
        update_requests: file of trainer update requests that a drift alarm appends to (the trainer
            service reads ``<registry root>/update_requests.jsonl``); ``None``: the alarm requests none.
        alarm: the drift alarm's settings (its cooldown).
        max_pairs: requests kept waiting for their shadow twin (rollout flip rate).
        keep: latencies per tier and reports kept for the dashboard.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    window: timedelta = timedelta(hours=1)
    staleness: timedelta = timedelta(hours=1)
    features: tuple[str, ...] = ALL_FEATURES
    drift_check_every: int = Field(default=5_000, ge=0)
    drift_window: int = Field(default=5_000, ge=30)
    update_requests: Path | None = None
    alarm: AlarmConfig = AlarmConfig()
    max_pairs: int = Field(default=100_000, ge=1)
    keep: int = Field(default=10_000, ge=1)


class DecisionMonitor:
    """Coverage, flips, drift, tier shares, latency and arm shares of a decision stream.

    Args:
        config: monitor settings.
        registry: Prometheus registry to export to (never the global one).
        reference: drift reference frame (a training snapshot's features); no drift checks when ``None``.
        drift_options: extra keyword arguments for :class:`~feedback.monitors.DriftMonitor`.
        recalibrator: learns the served decisions' complexity scores and, on a drift alert, publishes
            recalibrated router thresholds (:mod:`feedback.monitors.recalibration`); none when ``None``.
    """

    def __init__(
        self,
        config: MonitorConfig,
        *,
        registry: CollectorRegistry,
        reference: pd.DataFrame | None = None,
        drift_options: Mapping[str, Any] | None = None,
        recalibrator: ThresholdRecalibrator | None = None,
    ) -> None:
        self.config = config
        self.recalibrator = recalibrator
        self.metrics = MonitorMetrics(registry)
        self._coverage = CoverageMonitor(config.window, config.staleness, features=config.features)
        self._flips = FlipMonitor()
        self._drift: DriftMonitor | None = None
        if reference is not None:
            names = [f for f in (*config.features, *REQUEST_DRIFT_FEATURES) if f in reference.columns]
            self._drift = DriftMonitor(reference, features=names, window_capacity=config.drift_window,
                                       **dict(drift_options or {}))
        self._pairs: OrderedDict[str, tuple[bool, float]] = OrderedDict()
        self._pair_counts: dict[str, list[int]] = {}
        self._tiers: Counter[str] = Counter()
        self._arms: Counter[str] = Counter()
        self._latency: dict[str, deque[float]] = {}
        self._flip_history: deque[FlipReport] = deque(maxlen=config.keep)
        self._tier_history: deque[tuple[datetime, dict[str, float]]] = deque(maxlen=config.keep)
        self._arm_history: deque[tuple[datetime, dict[str, float]]] = deque(maxlen=config.keep)
        self._lock = threading.Lock()
        self._since_check = 0
        self._recalibrated = ""
        self.alarm = DriftAlarm(config.alarm, actions=self._actions())
        self.n_decisions = 0
        self.n_shadow = 0
        self.latest: datetime | None = None

    # -- learning -----------------------------------------------------------------------------
    def learn_one(self, decision: PricingDecision) -> None:
        """Feed one decision (served or shadow) to every monitor."""
        with self._lock:
            self.n_decisions += 1
            self.latest = decision.event_time if self.latest is None else max(self.latest, decision.event_time)
            self._pair(decision)
            if decision.arm.endswith(SHADOW_SUFFIX):
                self.n_shadow += 1
                return
            stale = (decision.degraded_reason or "").startswith(STALE_REASON)
            features = decision.features
            self._coverage.update(decision.hotel_id, features, feature_time=None if stale else decision.event_time,
                                  now=decision.event_time)
            self._flips.update(decision_input_hash(decision), decision.model_version, decision.price)
            self._tiers[decision.tier] += 1
            self._arms[decision.arm] += 1
            self._latency.setdefault(decision.tier, deque(maxlen=self.config.keep)).append(decision.latency_ms)
            self.metrics.latency.labels(decision.tier).observe(decision.latency_ms / 1000.0)
            if self.recalibrator is not None:
                self.recalibrator.learn_one(decision.complexity)
            if self._drift is not None:
                request = request_features(stay_date=decision.stay_date, at=decision.event_time,
                                           channel=decision.channel)
                self._drift.update({**request, **features})
                self._since_check += 1
        if self.config.drift_check_every and self._since_check >= self.config.drift_check_every:
            self.check_drift()

    def learn_many(self, decisions: list[Any]) -> None:
        """Feed a batch (records that are not decisions are skipped: the topic holds decisions only)."""
        for record in decisions:
            if isinstance(record, PricingDecision):
                self.learn_one(record)

    def _pair(self, decision: PricingDecision) -> None:
        """Rollout flip rate: the served price and the shadow price of one request, once both are seen."""
        key = str(decision.request_id)
        shadow = decision.arm.endswith(SHADOW_SUFFIX)
        other = self._pairs.pop(key, None)
        if other is None or other[0] == shadow:
            self._pairs[key] = (shadow, decision.price)
            while len(self._pairs) > self.config.max_pairs:
                self._pairs.popitem(last=False)
            return
        version = (decision.model_version if shadow else None) or "candidate"
        counts = self._pair_counts.setdefault(version, [0, 0])
        counts[0] += 1
        counts[1] += abs(other[1] - decision.price) > 1e-6 * max(abs(decision.price), 1.0)

    # -- reports ------------------------------------------------------------------------------------
    def coverage_report(self) -> CoverageReport:
        """Null/stale shares per hotel and feature over the window."""
        with self._lock:
            return self._coverage.report()

    def coverage(self, hotel_id: str, feature: str) -> float:
        """Share of ``hotel_id``'s decisions in the window that had a fresh, non-null ``feature``."""
        return 1.0 - self.coverage_report().share(hotel_id, feature)

    def flip_report(self, *, at: datetime | None = None) -> FlipReport:
        """Same-version flips so far."""
        with self._lock:
            return self._flips.report(at=at)

    def rollout_flip_report(self, *, at: datetime | None = None) -> FlipReport:
        """Served vs shadow price of the same request, per candidate version."""
        with self._lock:
            by_version = {v: (n, f) for v, (n, f) in self._pair_counts.items()}
        n, flipped = sum(v[0] for v in by_version.values()), sum(v[1] for v in by_version.values())
        return FlipReport(n_inputs=n, n_flipped=flipped, by_version=by_version, at=at)

    def check_drift(self, *, at: datetime | None = None) -> DriftReport | None:
        """Run a drift check on the latest rows now and export it (``None`` without a reference)."""
        if self._drift is None:
            return None
        with self._lock:
            self._since_check = 0
            report = self._drift.check(at=at or self.latest or datetime.now(tz=UTC))
        self.metrics.export_drift(report)
        if self.recalibrator is not None:
            state = self.recalibrator.on_report(report)
            self._recalibrated = "not due (cooldown) or too few scores" if state is None else \
                f"router thresholds published ({state.reason})"
        record = self.alarm.on_report(report)
        if record is not None:
            self.metrics.export_alarm(record)
        return report

    @property
    def alarms(self) -> tuple[AlarmRecord, ...]:
        """Every drift alarm so far, with what it did (oldest first)."""
        return self.alarm.history

    def _actions(self) -> dict[str, Callable[[DriftReport], str]]:
        """The drift alarm's actions: a trainer update request and the router's recalibration, as configured."""
        actions: dict[str, Callable[[DriftReport], str]] = {}
        if self.config.update_requests is not None:
            actions["trainer update"] = UpdateRequests(self.config.update_requests).request
        if self.recalibrator is not None:
            actions["router recalibration"] = lambda _report: self._recalibrated
        return actions

    def shares(self) -> tuple[dict[str, float], dict[str, float]]:
        """(share of served decisions per tier, share per rollout arm) so far."""
        with self._lock:
            return _normalise(self._tiers), _normalise(self._arms)

    def export(self, *, at: datetime | None = None) -> None:
        """Write coverage, flips, tier and arm shares to Prometheus and append them to the history."""
        when = at or self.latest or datetime.now(tz=UTC)
        coverage, flips, rollout = self.coverage_report(), self.flip_report(at=when), self.rollout_flip_report(at=when)
        tiers, arms = self.shares()
        self.metrics.export_coverage(coverage)
        self.metrics.export_flips(flips)
        if rollout.n_inputs:
            self.metrics.export_flips(rollout, scope="rollout")
        self.metrics.export_tier_shares(tiers)
        self.metrics.export_rollout_weights(arms)
        with self._lock:
            self._flip_history.append(flips)
            self._tier_history.append((when, tiers))
            self._arm_history.append((when, arms))

    def dashboard_inputs(self) -> dict[str, Any]:
        """Keyword arguments for :func:`feedback.dashboard.write_dashboard` (call :meth:`export` first)."""
        coverage = self.coverage_report()
        with self._lock:
            flips = list(self._flip_history) or [self._flips.report(at=self.latest)]
            return {
                "coverage": coverage,
                "drift_history": list(self._drift.history) if self._drift is not None else [],
                "flips": flips,
                "tier_shares": list(self._tier_history) or _normalise(self._tiers),
                "latencies_ms": {tier: list(values) for tier, values in self._latency.items()},
                "rollout_weights_history": list(self._arm_history),
            }

    def write_dashboard(self, path: str | Path, **options: Any) -> Path:
        """Export, then render the HTML dashboard to ``path``."""
        from feedback.dashboard import write_dashboard  # deferred: matplotlib loads only for the page

        self.export()
        return write_dashboard(path, **self.dashboard_inputs(), **options)


def _normalise(counts: Counter[str]) -> dict[str, float]:
    total = sum(counts.values())
    return {key: value / total for key, value in sorted(counts.items())} if total else {}


class MonitorStream:
    """Consume ``pricing.decisions`` into a :class:`DecisionMonitor` (commit per batch, DLQ the unparseable).

    Args:
        kafka: Kafka settings (the topic prefix applies).
        monitor: the monitor to feed.
        group_id: consumer group.
        topic: logical topic of the decisions.
        export_every: decisions between two Prometheus exports.
    """

    def __init__(
        self,
        kafka: KafkaConfig,
        monitor: DecisionMonitor,
        *,
        group_id: str = "pricestream-monitors",
        topic: str = "pricing.decisions",
        export_every: int = 1_000,
    ) -> None:
        if export_every < 1:
            raise MonitorInputError(field="export_every", value=export_every, expected="an int >= 1")
        self.monitor = monitor
        self.export_every = export_every
        self._consumer = EventConsumer(kafka, topic=topic, group_id=group_id)
        self._since_export = 0

    def poll_once(self, *, max_records: int = 500, timeout_s: float = 1.0) -> int:
        """One batch: feed, export when due, commit. Returns the records polled (0 when idle)."""
        n = self._consumer.process(self.monitor.learn_many, max_records=max_records, timeout_s=timeout_s)
        self._since_export += n
        if self._since_export >= self.export_every:
            self.monitor.export()
            self._since_export = 0
        return n

    def run(self, *, stop: threading.Event | None = None, until: int | None = None,
            idle_timeout_s: float | None = None) -> int:
        """Consume until ``stop`` is set, ``until`` decisions were seen, or the topic idles; returns records.

        The monitors are exported once more on the way out.
        """
        total, idle = 0, 0.0
        while not (stop is not None and stop.is_set()):
            n = self.poll_once(timeout_s=0.5)
            total += n
            idle = idle + 0.5 if n == 0 else 0.0
            if until is not None and self.monitor.n_decisions >= until:
                break
            if idle_timeout_s is not None and idle >= idle_timeout_s:
                break
        self.monitor.export()
        return total

    def close(self) -> None:
        """Close the consumer (its DLQ producer flushes)."""
        self._consumer.close()

    def __enter__(self) -> MonitorStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
