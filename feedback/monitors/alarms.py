"""A drift alarm that acts: one alarm per episode, a trainer update request, the router's recalibration.

A drift check (:class:`~feedback.monitors.DriftMonitor`) that alerts is evidence that the live inputs moved
beyond noise; on its own it is a gauge nobody reads. :class:`DriftAlarm` turns alerting checks into alarms
and alarms into actions:

* **one episode, one alarm**: checks keep alerting while a shift lasts; the alarm rings on the first alerting
  check and again only after ``cooldown`` (report times, so a replay behaves like live traffic);
* **actions**: each named callable runs on every alarm and returns what it did, in words; the alarm keeps an
  :class:`AlarmRecord` (when, which features, what each action did) that the monitor reports and exports;
* an action that fails does not stop the others: its record says ``failed: <error>``.

The trainer update request crosses processes through a file: :class:`UpdateRequests` appends one JSON line
per alarm (time, features); the trainer service reads the lines it has not handled and runs its guarded
update on the labels it holds (``feedback.services.trainer_service``), so a shift moves the models without
waiting for ``train_every`` labels. The router's recalibration is
:class:`~feedback.monitors.recalibration.ThresholdRecalibrator` (new thresholds for the tier shares).

Example:
    >>> from datetime import UTC, datetime, timedelta
    >>> from feedback.monitors.drift import DriftReport, FeatureDrift
    >>> t = datetime(2026, 9, 1, tzinfo=UTC)
    >>> def report(at):
    ...     return DriftReport(at, 600, (FeatureDrift("comp_rate_min_24h", 600, 0.9, 0.8, 0.25, True),))
    >>> done = []
    >>> alarm = DriftAlarm(AlarmConfig(cooldown=timedelta(hours=6)),
    ...                    actions={"noted": lambda r: done.append(r.at) or "noted once"})
    >>> [alarm.on_report(report(t + timedelta(hours=h))) is not None for h in (0, 1, 7)]
    [True, False, True]
    >>> alarm.history[0].features, alarm.history[0].actions
    (('comp_rate_min_24h',), ('noted: noted once',))
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from feedback.monitors.drift import DriftReport
from feedback.monitors.errors import MonitorInputError

UPDATE_REQUESTS = "update_requests.jsonl"
"""The requests file's name in the model registry's root, where the trainer service looks."""

Action = Callable[[DriftReport], str]
"""Runs on an alarm; returns what it did, in words."""


class AlarmConfig(BaseModel):
    """Settings of the drift alarm.

    Attributes:
        cooldown: report time after an alarm during which further alerting checks are the same episode.
            Six hours: a shift keeps alerting for days, and the trainer needs labels of the new regime
            (hours of them) before a second update can differ from the first.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    cooldown: timedelta = timedelta(hours=6)


@dataclass(frozen=True)
class AlarmRecord:
    """One alarm: when, the features that alerted, and what each action did (``"<name>: <result>"``)."""

    at: datetime
    features: tuple[str, ...]
    actions: tuple[str, ...]

    def describe(self) -> str:
        """One line a person reads."""
        return f"drift alarm at {self.at.isoformat()} on {', '.join(self.features)}: {'; '.join(self.actions)}"


class DriftAlarm:
    """Alerting drift checks in, alarms with their actions out (see the module docstring).

    Args:
        config: the alarm's settings.
        actions: ``name -> action``, run in order on every alarm.
    """

    def __init__(self, config: AlarmConfig | None = None, *, actions: Mapping[str, Action] | None = None) -> None:
        self.config = config or AlarmConfig()
        if self.config.cooldown < timedelta(0):
            raise MonitorInputError(field="cooldown", value=self.config.cooldown, expected="a non-negative timedelta")
        self.actions: dict[str, Action] = dict(actions or {})
        self._history: list[AlarmRecord] = []
        self._last: datetime | None = None

    @property
    def history(self) -> tuple[AlarmRecord, ...]:
        """Every alarm so far, oldest first."""
        return tuple(self._history)

    def on_report(self, report: DriftReport) -> AlarmRecord | None:
        """Ring and act if the report alerted and the cooldown has passed; the record, else ``None``."""
        if not report.alert:
            return None
        if self._last is not None and report.at - self._last < self.config.cooldown:
            return None
        self._last = report.at
        done = tuple(f"{name}: {self._run(action, report)}" for name, action in self.actions.items())
        record = AlarmRecord(report.at, report.alerted_features, done or ("no action configured",))
        self._history.append(record)
        return record

    @staticmethod
    def _run(action: Action, report: DriftReport) -> str:
        try:
            return action(report)
        except (OSError, ValueError, RuntimeError) as exc:  # one failing action must not silence the others
            return f"failed: {type(exc).__name__}: {exc}"


class UpdateRequests:
    """Trainer update requests as JSON lines in one file: the monitor appends, the trainer reads.

    Example:
        >>> import tempfile
        >>> from datetime import UTC, datetime
        >>> from feedback.monitors.drift import DriftReport, FeatureDrift
        >>> path = Path(tempfile.mkdtemp()) / "update_requests.jsonl"
        >>> q = UpdateRequests(path)
        >>> rep = DriftReport(datetime(2026, 9, 1, tzinfo=UTC), 600, (FeatureDrift("x", 600, 0.9, 0.8, 0.25, True),))
        >>> q.request(rep)
        'request 1 written to update_requests.jsonl'
        >>> [r["features"] for r in q.read()], [r["features"] for r in q.read(after=1)]
        ([['x']], [])
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def request(self, report: DriftReport) -> str:
        """Append a request for the alarm of ``report``; what was done, in words."""
        line = {"at": report.at.isoformat(), "features": list(report.alerted_features), "reason": "drift alarm"}
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(line) + "\n")
            n = len(self.read())
        return f"request {n} written to {self.path.name}"

    def read(self, *, after: int = 0) -> list[dict[str, Any]]:
        """Requests after the first ``after`` (a torn last line, still being written, is left for later)."""
        if not self.path.exists():
            return []
        out: list[dict[str, Any]] = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                break
        return out[after:]
