"""Shadow scoring: run the candidate beside the incumbent, log its answer, never serve it.

The incumbent answers inline. The candidate is submitted to a small thread pool after
the incumbent has answered, so the caller pays only the submission (microseconds),
never the candidate's latency. Its answer goes to ``on_result`` as a
:class:`ShadowRecord`; an answer slower than ``latency_budget_ms`` is still logged,
marked ``late`` (a candidate that cannot meet the serving budget should not be
promoted, and the p99 latency gate sees it). When ``max_pending`` candidate calls are
already queued the new one is dropped and counted, so a slow candidate can never
build an unbounded queue.

The candidate runs in this process, so it competes for the GIL: the serving path pays
no candidate latency at the median, but its tail grows while a candidate computes
(``bench/delivery_overhead.py`` measures it). Shadow a heavy candidate in a separate
process when the tail matters.

Example:
    >>> seen = []
    >>> with ShadowRunner(lambda x: x * 10, on_result=seen.append) as shadow:
    ...     shadow.run(4, lambda x: x + 1)
    5
    >>> seen[0].incumbent, seen[0].candidate, seen[0].error
    (5, 40, None)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import Generic, TypeVar

from routing.errors import RolloutStateError, RoutingInputError

Req = TypeVar("Req")
Res = TypeVar("Res")


@dataclass(frozen=True)
class ShadowRecord(Generic[Req, Res]):
    """What the candidate said for one request, next to what was served."""

    request: Req
    incumbent: Res
    candidate: Res | None
    error: str | None
    latency_ms: float
    queued_ms: float
    late: bool


class ShadowRunner(Generic[Req, Res]):
    """Run ``candidate`` in the background for every request served by an incumbent.

    Args:
        candidate: the candidate's scoring function.
        on_result: called from a worker thread with each :class:`ShadowRecord`.
        latency_budget_ms: candidate answers slower than this are marked ``late``.
        max_workers: threads running the candidate.
        max_pending: most candidate calls queued or running; more are dropped.
    """

    def __init__(
        self,
        candidate: Callable[[Req], Res],
        *,
        on_result: Callable[[ShadowRecord[Req, Res]], None],
        latency_budget_ms: float = 25.0,
        max_workers: int = 2,
        max_pending: int = 256,
    ) -> None:
        if latency_budget_ms <= 0:
            raise RoutingInputError(field="latency_budget_ms", value=latency_budget_ms, expected="a number > 0")
        self._candidate = candidate
        self._on_result = on_result
        self.latency_budget_ms = latency_budget_ms
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="shadow")
        self._slots = threading.BoundedSemaphore(max_pending)
        self._count_lock = threading.Lock()
        self.submitted = 0
        self.dropped = 0
        self.failed = 0
        self.callback_errors = 0

    def run(self, request: Req, incumbent: Callable[[Req], Res]) -> Res:
        """Serve ``incumbent(request)``; shadow the candidate in the background."""
        result = incumbent(request)
        self.submit(request, result)
        return result

    def submit(self, request: Req, incumbent_result: Res) -> bool:
        """Queue the candidate for ``request``; ``False`` (counted in ``dropped``) when full."""
        if not self._slots.acquire(blocking=False):
            with self._count_lock:
                self.dropped += 1
            return False
        try:
            self._pool.submit(self._shadow, request, incumbent_result, time.perf_counter())
        except RuntimeError as exc:  # the pool was shut down
            self._slots.release()
            msg = "shadow runner is closed; create a new one to shadow again"
            raise RolloutStateError(msg) from exc
        with self._count_lock:
            self.submitted += 1
        return True

    def _shadow(self, request: Req, incumbent_result: Res, queued_at: float) -> None:
        started = time.perf_counter()
        answer: Res | None = None
        error: str | None = None
        try:
            answer = self._candidate(request)
        except Exception as exc:  # the candidate is untrusted code: any failure is logged, never raised
            error = f"{type(exc).__name__}: {exc}"
            with self._count_lock:
                self.failed += 1
        finally:
            self._slots.release()
        latency_ms = (time.perf_counter() - started) * 1000.0
        record = ShadowRecord(
            request=request,
            incumbent=incumbent_result,
            candidate=answer,
            error=error,
            latency_ms=latency_ms,
            queued_ms=(started - queued_at) * 1000.0,
            late=latency_ms > self.latency_budget_ms,
        )
        try:
            self._on_result(record)
        except Exception:  # a failing logger must not kill the worker thread
            with self._count_lock:
                self.callback_errors += 1

    def close(self, *, wait: bool = True) -> None:
        """Stop accepting work; with ``wait``, let queued candidate calls finish."""
        self._pool.shutdown(wait=wait, cancel_futures=not wait)

    def __enter__(self) -> ShadowRunner[Req, Res]:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close(wait=True)
