"""The wrapper every stream service shares: its runtime settings from its config, and one run to the end.

A service module keeps what is its own (its config, its :class:`~events.runtime.step.Step`, its
counters) and asks this module for the rest:

* :func:`service_config`: the service's runtime fields plus the caller's ``overrides`` (the
  ``services run`` flags, a test's ``max_idle_s``), validated as one :class:`RuntimeConfig`;
* :func:`run_service`: drive the step until stopped or idle and return the runtime's
  :class:`~events.runtime.driver.RunStats`, with the step's own counters in ``step``.

Example:
    >>> rc = service_config({"name": "x", "inputs": ("a",), "group_id": "g", "max_batch": 50}, max_batch=7)
    >>> rc.name, rc.max_batch, rc.mode
    ('x', 7, 'at_least_once')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from events.runtime.config import RuntimeConfig
from events.runtime.driver import RunStats, Runtime

T = TypeVar("T")


def service_config(fields: Mapping[str, object], /, **overrides: object) -> RuntimeConfig:
    """``fields`` (the service's runtime settings) with ``overrides`` on top, validated.

    Raises:
        pydantic.ValidationError: a field is unknown or out of range (names the field).
    """
    return RuntimeConfig.model_validate({**fields, **overrides})


def run_service(runtime: Runtime[T]) -> RunStats:
    """Run ``runtime`` to the end (stop or idle) and return its totals with ``step`` = the step's counters.

    The counters are read even when the run raises, so a caller's ``finally`` sees them.
    """
    try:
        runtime.run()
    finally:
        runtime.stats.step = dict(runtime.step.counters())
    return runtime.stats
