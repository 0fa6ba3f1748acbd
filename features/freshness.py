"""Online freshness: how long a feature update took from Kafka append to Redis.

The online writer observes ``now - publish_time`` for every row it applies, into a Prometheus
histogram (for dashboards) and a bounded window of recent lags (for exact p50/p99 in
``pricestream features status``, which runs in another process and reads the published file).

Example:
    >>> from prometheus_client import CollectorRegistry
    >>> tracker = FreshnessTracker(CollectorRegistry())
    >>> for lag in (0.1, 0.2, 0.3, 5.0):
    ...     tracker.observe(lag)
    >>> s = tracker.summary()
    >>> s.count, round(s.p50_s, 2), s.max_s
    (4, 0.25, 5.0)
"""

from __future__ import annotations

import json
import math
import os
import time
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Histogram

# Seconds; the pipeline target is "seconds from event to Redis", so resolution is finest there.
BUCKETS: tuple[float, ...] = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
SINK_LAG_EDGES_MS: tuple[int, ...] = (5, 10, 20, 50, 100, 200, 300, 500, 750, 1000, 1500, 2000, 3000, 5000, 10_000,
                                      30_000, 60_000, 300_000)
"""Upper edges (ms) of the feature job's Redis sink lag buckets (``RedisFeatureSink.java``); the last bucket is open."""
WINDOW = 10_000  # recent lags kept for exact percentiles: a few minutes of traffic at typical rates


@dataclass(frozen=True)
class FreshnessSummary:
    """Lag percentiles over the recent window, plus totals since start."""

    count: int
    p50_s: float | None
    p99_s: float | None
    max_s: float | None
    written: int = 0
    skipped_stale: int = 0
    updated_at: float | None = None


class FreshnessTracker:
    """Histogram plus a recent window of ``now - publish_time`` lags.

    Args:
        registry: Prometheus registry to register the metrics in (None: a private one).
        window: how many recent lags the percentiles cover.
    """

    def __init__(self, registry: CollectorRegistry | None = None, *, window: int = WINDOW) -> None:
        reg = registry if registry is not None else CollectorRegistry()
        self.histogram = Histogram(
            "pricestream_features_online_freshness_seconds",
            "Kafka append to Redis write, per applied feature row",
            buckets=BUCKETS,
            registry=reg,
        )
        self.rows = Counter(
            "pricestream_features_online_rows", "feature rows seen by the online writer", ["outcome"], registry=reg
        )
        self._recent: deque[float] = deque(maxlen=window)
        self._count = 0
        self._written = 0
        self._skipped = 0

    def observe(self, lag_s: float) -> None:
        """Record one applied row's lag (negative lags from clock skew count as 0)."""
        lag = max(lag_s, 0.0)
        self.histogram.observe(lag)
        self._recent.append(lag)
        self._count += 1

    def count_rows(self, *, written: int, skipped_stale: int) -> None:
        self._written += written
        self._skipped += skipped_stale
        self.rows.labels("written").inc(written)
        self.rows.labels("skipped_stale").inc(skipped_stale)

    def summary(self) -> FreshnessSummary:
        if not self._recent:
            return FreshnessSummary(self._count, None, None, None, self._written, self._skipped, time.time())
        lags = np.fromiter(self._recent, dtype=float)
        p50, p99 = np.percentile(lags, [50, 99])
        return FreshnessSummary(
            self._count, float(p50), float(p99), float(lags.max()), self._written, self._skipped, time.time()
        )


def publish(summary: FreshnessSummary, path: Path) -> None:
    """Write the summary atomically (rename) for ``pricestream features status``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(summary)))
    tmp.replace(path)


def read_status(path: Path) -> FreshnessSummary | None:
    """The last published summary, or None when the writer never ran.

    Example:
        >>> read_status(Path("/nonexistent/status.json")) is None
        True
    """
    try:
        return FreshnessSummary(**json.loads(path.read_text()))
    except FileNotFoundError:
        return None


def sink_status_key(project: str) -> str:
    """The hash where each subtask of the feature job's Redis sink publishes its totals (ends with the project)."""
    return f"pricestream:freshness:{project}"


def bucket_quantile(counts: list[int], q: float) -> float | None:
    """The upper edge (s) of the sink lag bucket holding quantile ``q`` of ``counts``; inf past the last edge.

    Example:
        >>> bucket_quantile([0, 0, 5, 5] + [0] * 15, 0.5)
        0.02
    """
    total = sum(counts)
    if total == 0:
        return None
    seen = 0
    for i, c in enumerate(counts):
        seen += c
        if seen >= q * total:
            return SINK_LAG_EDGES_MS[i] / 1000 if i < len(SINK_LAG_EDGES_MS) else math.inf
    return math.inf


def read_sink_status(fields: dict[bytes, bytes]) -> FreshnessSummary | None:
    """The feature job's Redis sink totals (its subtasks' fields of :func:`sink_status_key`) as one summary.

    The percentiles are bucket upper edges over every row since the job started (not a recent window).

    Example:
        >>> s = read_sink_status({b"subtask-0": b"10,2,1700000000000;" + b",".join([b"0", b"10"] + [b"0"] * 17)})
        >>> (s.written, s.skipped_stale, s.p99_s)
        (10, 2, 0.01)
    """
    if not fields:
        return None
    written = stale = 0
    updated = 0.0
    counts = [0] * (len(SINK_LAG_EDGES_MS) + 1)
    for raw in fields.values():
        totals, _, buckets = raw.decode().partition(";")
        w, st, at = (int(x) for x in totals.split(","))
        written, stale, updated = written + w, stale + st, max(updated, at / 1000)
        for i, c in enumerate(int(x) for x in buckets.split(",")):
            counts[i] += c
    return FreshnessSummary(count=sum(counts), p50_s=bucket_quantile(counts, 0.5),
                            p99_s=bucket_quantile(counts, 0.99), max_s=None, written=written,
                            skipped_stale=stale, updated_at=updated)
