"""Errors raised by the local stack.

Exception tree::

    InfraError
    ├── PrerequisiteMissing   java, mvn or redis-server is not installed (says what to install)
    ├── ResolveError          Maven could not resolve the jars
    └── StartError            a service did not become ready (carries its log tail)
"""

from __future__ import annotations


class InfraError(Exception):
    """Root of every error raised by :mod:`infra`."""


class PrerequisiteMissing(InfraError):
    """A required program is not on PATH."""


class ResolveError(InfraError):
    """``mvn dependency:copy-dependencies`` failed."""


class StartError(InfraError):
    """A service did not become ready in time."""
