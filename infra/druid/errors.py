"""Errors raised by the Druid part of :mod:`infra` (children of :class:`infra.errors.InfraError`).

Exception tree (under ``InfraError``)::

    InfraError
    ├── ResolveError       Maven could not assemble Druid (infra.errors)
    ├── StartError         a Druid process did not become ready; carries its log tail (infra.errors)
    └── SupervisorError    the overlord refused or lost a Kafka supervisor spec
"""

from __future__ import annotations

from infra.errors import InfraError


class SupervisorError(InfraError):
    """The overlord refused a supervisor spec, or a supervisor call failed."""
