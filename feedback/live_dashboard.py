"""The monitor service's dashboard, live on its ops port (``GET /dashboard``).

``pricestream services run monitor`` renders the monitor's dashboard (coverage, drift, flips, tier
shares, latency, rollout weights: :func:`feedback.dashboard.write_dashboard`) every ``refresh_s``
seconds between batches, in the service's own thread, and its ops server returns the last render; the
page reloads itself every ``refresh_s`` seconds, so an operator keeps it open while traffic flows. Before
the first decision it says it is waiting. Rendering never stops the service: a failure is shown on the
page and logged, and the next batch tries again.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from prometheus_client import CollectorRegistry
    >>> from feedback.monitors.stream import DecisionMonitor, MonitorConfig
    >>> live = LiveDashboard(DecisionMonitor(MonitorConfig(), registry=CollectorRegistry()),
    ...                      Path(tempfile.mkdtemp()) / "live.html", refresh_s=5)
    >>> b"no decisions yet" in live.page() and b'http-equiv="refresh" content="5"' in live.page()
    True
"""

from __future__ import annotations

import html
import logging
import time
from collections.abc import Sequence
from pathlib import Path

from events.models import PricingDecision
from events.runtime import BatchContext, Output, Record
from feedback.monitors.stream import DecisionMonitor
from feedback.services.monitor_service import MonitorStep

log = logging.getLogger(__name__)

REFRESH_S = 30.0
"""Seconds between two renders of the live page (and the browser's reload period)."""


class LiveDashboard:
    """The last render of a monitor's dashboard, as the bytes of an HTML page that reloads itself."""

    def __init__(self, monitor: DecisionMonitor, path: Path, *, refresh_s: float = REFRESH_S) -> None:
        self.monitor, self.path, self.refresh_s = monitor, path, refresh_s
        self._page = self._note("no decisions yet: the page fills in once the monitor has read some")
        self._rendered_at = -float("inf")
        self.renders = 0

    def maybe_render(self, *, force: bool = False) -> None:
        """Render again when ``refresh_s`` has passed since the last render (or ``force``) and there is data."""
        now = time.monotonic()
        if not self.monitor.n_decisions or (not force and now - self._rendered_at < self.refresh_s):
            return
        self._rendered_at = now
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            text = self.monitor.write_dashboard(self.path).read_text(encoding="utf-8")
        except Exception as exc:  # noqa: BLE001 - the page reports it; the service keeps consuming
            log.warning("dashboard render failed", exc_info=exc)
            self._page = self._note(f"the last render failed: {type(exc).__name__}: {exc}")
            return
        self._page = _with_refresh(text, self.refresh_s).encode("utf-8")
        self.renders += 1

    def page(self) -> bytes:
        """What ``GET /dashboard`` returns."""
        return self._page

    def _note(self, message: str) -> bytes:
        body = (f"<!doctype html><html><head><title>pricestream monitor</title></head><body>"
                f"<h1>pricestream monitor</h1><p>{html.escape(message)}</p></body></html>")
        return _with_refresh(body, self.refresh_s).encode("utf-8")


def _with_refresh(page: str, seconds: float) -> str:
    """``page`` with a ``<meta http-equiv="refresh">`` in its head, so the browser reloads it."""
    meta = f'<meta http-equiv="refresh" content="{max(1, round(seconds))}">'
    head = page.find("<head>")
    if head < 0:
        return meta + page
    return page[: head + len("<head>")] + meta + page[head + len("<head>"):]


class LiveMonitorStep(MonitorStep):
    """:class:`MonitorStep` that also keeps a :class:`LiveDashboard` current, between batches."""

    def __init__(self, monitor: DecisionMonitor, live: LiveDashboard, *, export_every: int = 1_000) -> None:
        super().__init__(monitor, export_every=export_every)
        self.live = live

    def process(self, batch: Sequence[Record[PricingDecision]], ctx: BatchContext | None) -> list[Output]:
        out = super().process(batch, ctx)
        self.live.maybe_render()
        return out

    def durable(self, *, force: bool) -> bool:
        done = super().durable(force=force)
        if force:
            self.live.maybe_render()
        return done
