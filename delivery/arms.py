"""Incumbent and candidate models side by side; switching and rolling back is one reference swap.

Both models stay loaded (the old one is the hot standby). The pair and the name of the
active arm live in one immutable tuple that ``switch`` and ``rollback`` replace in a
single assignment, so a concurrent ``current()`` sees the old pair or the new one and
in-flight calls keep the object they already hold.

Example:
    >>> arms = ArmSet("model-v1", candidate="model-v2")
    >>> arms.current(), arms.switch().current(), arms.rollback().current()
    ('model-v1', 'model-v2', 'model-v1')
"""

from __future__ import annotations

import threading
from typing import Generic, NamedTuple, TypeVar

from delivery.canary import Arm
from routing.errors import RolloutStateError

T = TypeVar("T")


class _Slots(NamedTuple, Generic[T]):
    incumbent: T
    candidate: T | None
    active: Arm


class ArmSet(Generic[T]):
    """Holds the incumbent and candidate objects (models, pricers) and which one serves."""

    def __init__(self, incumbent: T, *, candidate: T | None = None) -> None:
        self._slots: _Slots[T] = _Slots(incumbent, candidate, "incumbent")
        self._lock = threading.Lock()  # serialises writers; readers never take it

    @property
    def active_arm(self) -> Arm:
        """Name of the arm that :meth:`current` returns."""
        return self._slots.active

    @property
    def incumbent(self) -> T:
        """The incumbent object."""
        return self._slots.incumbent

    @property
    def candidate(self) -> T | None:
        """The candidate object, if one is loaded."""
        return self._slots.candidate

    def current(self) -> T:
        """The serving object (one attribute read: safe without a lock)."""
        slots = self._slots
        if slots.active == "candidate" and slots.candidate is not None:
            return slots.candidate
        return slots.incumbent

    def get(self, arm: Arm) -> T:
        """The object of ``arm`` (``RolloutStateError`` if the candidate is not loaded)."""
        slots = self._slots
        if arm == "incumbent":
            return slots.incumbent
        if slots.candidate is None:
            msg = "arm 'candidate' requested but no candidate is loaded"
            raise RolloutStateError(msg)
        return slots.candidate

    def load_candidate(self, candidate: T) -> ArmSet[T]:
        """Load (or replace) the candidate without making it serve."""
        with self._lock:
            self._slots = _Slots(self._slots.incumbent, candidate, "incumbent")
        return self

    def switch(self) -> ArmSet[T]:
        """Make the candidate serve; the incumbent stays loaded as hot standby."""
        with self._lock:
            if self._slots.candidate is None:
                msg = "switch() needs a candidate; call load_candidate() first"
                raise RolloutStateError(msg)
            self._slots = self._slots._replace(active="candidate")
        return self

    def rollback(self) -> ArmSet[T]:
        """Make the incumbent serve again (the candidate stays loaded)."""
        with self._lock:
            self._slots = self._slots._replace(active="incumbent")
        return self
