"""Rollout state, persisted as JSON with every transition and weight change and its reason.

Writes are atomic: the state goes to a temporary file in the same directory, is
flushed and fsynced, then ``os.replace``-d over the old file, so a reader (or a
restart after a crash) sees either the old state or the new one, never half.

Example:
    >>> import tempfile
    >>> from datetime import datetime, timezone
    >>> t = datetime(2026, 5, 1, tzinfo=timezone.utc)
    >>> store = StateStore(Path(tempfile.mkdtemp()) / "rollout.json")
    >>> s = RolloutState.idle(t).transition(Stage.SHADOW, at=t, reason="start v2", version="v2")
    >>> store.save(s)
    >>> loaded = store.load()
    >>> loaded.stage, loaded.version, loaded.history[-1].reason
    (<Stage.SHADOW: 'shadow'>, 'v2', 'start v2')
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from delivery.stages import Stage
from routing.errors import StateFileError
from routing.state_file import load_state_file, write_atomic


class HistoryEntry(BaseModel):
    """One transition (``kind="stage"``) or weight change (``kind="weight"``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    at: datetime
    kind: Literal["stage", "weight"]
    from_stage: Stage
    to_stage: Stage
    candidate_weight: float = Field(ge=0.0, le=1.0)
    reason: str


class RolloutState(BaseModel):
    """Where the rollout of ``version`` stands; immutable, each change returns a new state."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: str | None = None
    incumbent_version: str | None = None
    stage: Stage = Stage.IDLE
    candidate_weight: float = Field(default=0.0, ge=0.0, le=1.0)
    updated_at: datetime
    history: tuple[HistoryEntry, ...] = ()

    @classmethod
    def idle(cls, at: datetime) -> RolloutState:
        """No rollout yet."""
        return cls(updated_at=at)

    def transition(
        self,
        stage: Stage,
        *,
        at: datetime,
        reason: str,
        weight: float | None = None,
        version: str | None = None,
        incumbent_version: str | None = None,
    ) -> RolloutState:
        """A copy moved to ``stage`` (optionally with a new weight or versions), with history."""
        w = self.candidate_weight if weight is None else weight
        entry = HistoryEntry(
            at=at, kind="stage", from_stage=self.stage, to_stage=stage, candidate_weight=w, reason=reason
        )
        update: dict[str, object] = {"stage": stage, "candidate_weight": w, "updated_at": at}
        if version is not None:
            update["version"] = version
        if incumbent_version is not None:
            update["incumbent_version"] = incumbent_version
        update["history"] = (*self.history, entry)
        return self.model_copy(update=update)

    def reweight(self, weight: float, *, at: datetime, reason: str) -> RolloutState:
        """A copy with a new candidate weight, with history."""
        entry = HistoryEntry(
            at=at, kind="weight", from_stage=self.stage, to_stage=self.stage, candidate_weight=weight, reason=reason
        )
        return self.model_copy(update={"candidate_weight": weight, "updated_at": at, "history": (*self.history, entry)})




class StateStore:
    """Load and atomically save a :class:`RolloutState` at ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def load(self) -> RolloutState | None:
        """The saved state, or ``None`` when there is no file yet.

        Raises:
            StateFileError: the file exists but cannot be read or parsed.
        """
        return load_state_file(self.path, RolloutState, what="rollout state")

    def save(self, state: RolloutState) -> None:
        """Write ``state`` atomically (temp file in the same directory, fsync, ``os.replace``).

        Raises:
            StateFileError: the directory is not writable.
        """
        try:
            write_atomic(self.path, state.model_dump_json(indent=2).encode("utf-8"))
        except OSError as exc:
            msg = f"rollout state {str(self.path)!r} cannot be written: {exc}"
            raise StateFileError(msg) from exc
