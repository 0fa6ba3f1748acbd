"""Errors of the Flink jobs' Python side.

Exception tree::

    PipelineError
    └── RestoreMismatch   a checkpoint or savepoint of another job (other source topic) was asked to restore
"""

from __future__ import annotations


class PipelineError(Exception):
    """Root of the errors raised by :mod:`pipelines`."""


class RestoreMismatch(PipelineError, ValueError):
    """The state to restore was written by a job reading other topics: restoring it would serve wrong values."""
