"""The serving router's thresholds as a small state file: one process writes, servers follow it.

Recalibration (``feedback.monitors.recalibration``, run by the monitor service on a drift
alert) computes new cut-offs from recent complexity scores and saves them here; a running
server polls the file (``pricestream.app``) and swaps its routers' thresholds in place, so
the next decisions route with them, with no restart. Writes are atomic (temp file, fsync,
``os.replace``), so a reader sees the old state or the new one.

Example:
    >>> import tempfile
    >>> from datetime import datetime, timezone
    >>> store = ThresholdStore(Path(tempfile.mkdtemp()) / "thresholds.json")
    >>> store.load() is None
    True
    >>> t = datetime(2026, 12, 1, tzinfo=timezone.utc)
    >>> saved = store.publish(Thresholds(rules_below=0.1, heavy_above=0.5), at=t, reason="drift: occupancy")
    >>> loaded = store.load()
    >>> loaded.thresholds.heavy_above, loaded.generation, loaded.reason
    (0.5, 1, 'drift: occupancy')
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from routing.calibration import Thresholds
from routing.errors import StateFileError
from routing.state_file import load_state_file, write_atomic


class ThresholdState(BaseModel):
    """Thresholds in force for the serving routers, with when and why they were set."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    thresholds: Thresholds
    at: datetime
    reason: str
    generation: int = Field(ge=1)


class ThresholdStore:
    """Load and atomically save a :class:`ThresholdState` at ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def load(self) -> ThresholdState | None:
        """The saved state, or ``None`` when there is no file yet.

        Raises:
            StateFileError: the file exists but cannot be read or parsed.
        """
        return load_state_file(self.path, ThresholdState, what="router thresholds")

    def publish(self, thresholds: Thresholds, *, at: datetime, reason: str) -> ThresholdState:
        """Save ``thresholds`` as the next generation and return the saved state.

        Raises:
            StateFileError: the directory is not writable, or the current file is unreadable.
        """
        current = self.load()
        state = ThresholdState(thresholds=thresholds, at=at, reason=reason,
                               generation=1 if current is None else current.generation + 1)
        try:
            write_atomic(self.path, state.model_dump_json(indent=2).encode("utf-8"))
        except OSError as exc:
            msg = f"router thresholds {str(self.path)!r} cannot be written: {exc}"
            raise StateFileError(msg) from exc
        return state
