"""One stream runtime for every consumer-group service: steps plug in, the runtime does the Kafka part.

* :mod:`events.runtime.step`: :class:`Step` (parse, process, durable, checkpoint, health), :class:`Record`,
  :class:`Output`;
* :mod:`events.runtime.config`: :class:`RuntimeConfig` (group, mode, batch, grace, ops port);
* :mod:`events.runtime.driver`: :class:`Runtime`, the loop (DLQ policy, commit after durable, stop);
* :mod:`events.runtime.service`: what every service repeats: its :class:`RuntimeConfig`, one run to the end;
* :mod:`events.runtime.source` / :mod:`events.runtime.sink`: the consumer and the two delivery modes;
* :mod:`events.runtime.ops`: ``/healthz``, ``/metrics`` and the Prometheus series;
* :mod:`events.runtime.checkpoints`: operator state that moves with the committed offsets.
"""

from __future__ import annotations

from events.runtime.checkpoints import Checkpoints
from events.runtime.config import RuntimeConfig
from events.runtime.driver import BatchResult, RunStats, Runtime
from events.runtime.errors import DeliveryFailed, StreamRuntimeError
from events.runtime.service import run_service, service_config
from events.runtime.sink import DLQ_HEADERS, dlq_headers
from events.runtime.step import BatchContext, Offsets, Output, Record, Step, offset_key, split_key

__all__ = [
    "DLQ_HEADERS", "BatchContext", "BatchResult", "Checkpoints", "DeliveryFailed", "Offsets", "Output", "Record",
    "RunStats", "Runtime", "RuntimeConfig", "Step", "StreamRuntimeError", "dlq_headers", "offset_key", "run_service",
    "service_config", "split_key",
]
