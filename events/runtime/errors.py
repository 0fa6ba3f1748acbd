"""The stream runtime's errors (part of :class:`events.errors.EventsError`'s tree)::

    EventsError
    └── StreamRuntimeError     Kafka refused a read, a produce or a commit; a topic is missing
        └── DeliveryFailed     a batch's outputs were not acknowledged: its offsets stay uncommitted
"""

from __future__ import annotations

from events.errors import EventsError


class StreamRuntimeError(EventsError):
    """The runtime could not read, produce or commit."""


class DeliveryFailed(StreamRuntimeError):
    """Outputs of a batch were not acknowledged by the broker; the batch's offsets were not committed."""
