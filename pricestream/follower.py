"""The serving path's follower: keeps a running path in step with what other processes write.

Every ``follow_interval_s`` it looks at the model registry (a hot reload of the incumbent's models, and a
cold-start scorer's per-hotel refits), the rollout state file (``pricestream rollout ...`` in another
process) and the router's threshold file; with the Kafka control plane, models and rollout come from
the control topic instead of the files. A failure is kept and retried at the next look: a dead follower
would freeze serving on a stale state.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from delivery import StateStore
from delivery.rollout import RolloutScorer
from feedback.registry import ModelRegistry
from pricing.scorer import Scorer
from routing.threshold_state import ThresholdStore

if TYPE_CHECKING:
    from delivery.control_kafka import ControlFollower

log = logging.getLogger(__name__)


class _Watched:
    """A file whose (mtime, size, inode) changed since the last look."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: tuple[int, int, int] | None = None

    def changed(self) -> bool:
        try:
            st = self.path.stat()
            mark: tuple[int, int, int] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except FileNotFoundError:
            mark = None
        if mark == self._seen:
            return False
        self._seen = mark
        return True


@dataclass
class Follower:
    """Keeps a running path in step with the files other processes write (see the module docstring)."""

    rollout: RolloutScorer
    registry: ModelRegistry
    delivery_state: StateStore
    thresholds: ThresholdStore
    load_candidate: Callable[[str], Scorer]
    interval_s: float
    load_pricer: Callable[[Path], Any] | None = None
    """bundle dir -> pricer for a hot reload (the path's exploration setting); ``load_pricer`` when None."""
    errors: list[str] = field(default_factory=list)
    control: ControlFollower | None = None
    """With the Kafka control plane, models and rollout come from it (``pricestream.control``), not the files."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        self._rollout_file = _Watched(self.delivery_state.path)
        self._threshold_file = _Watched(self.thresholds.path)

    def step(self) -> None:
        """One look at the three sources; a failure is kept in ``errors`` and retried next time."""
        for name, action in (("registry", self._models), ("rollout", self._rollout),
                             ("thresholds", self._thresholds)):
            try:
                action()
            except Exception as exc:  # noqa: BLE001 - a dead follower would freeze serving on a stale state
                message = f"{name}: {exc}"
                if not self.errors or self.errors[-1] != message:
                    log.warning("serving path cannot follow %s", message)
                    self.errors.append(message)
                    del self.errors[:-20]

    def _models(self) -> None:
        incumbent = self.rollout.arms.incumbent
        if self.control is None:
            incumbent.reload_from(self.registry, loader=self.load_pricer)
        reload_hotels = getattr(incumbent, "reload_hotels", None)  # a StagedScorer: the per-hotel refits
        if reload_hotels is not None:
            reload_hotels()

    def _rollout(self) -> None:
        if self.control is None and self._rollout_file.changed():
            state = self.delivery_state.load()
            if state is not None:
                self.rollout.follow(state, load=self.load_candidate)

    def _thresholds(self) -> None:
        if self._threshold_file.changed():
            state = self.thresholds.load()
            if state is not None:
                for scorer in (self.rollout.arms.incumbent, self.rollout.arms.candidate):
                    if scorer is not None:
                        scorer.router.thresholds = state.thresholds

    def start(self) -> None:
        self.step()
        self._thread = threading.Thread(target=self._loop, name="pricestream-follower", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.step()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.control is not None:
            self.control.stop()
