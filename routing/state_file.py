"""Pydantic state files read and written the same way by the router thresholds and the rollout.

A missing file reads as ``None``; an unreadable or invalid one raises :class:`StateFileError`
naming the file; a write is atomic (temp file in the same folder, fsync, ``os.replace``).

Example:
    >>> import tempfile
    >>> from pydantic import BaseModel
    >>> class S(BaseModel):
    ...     n: int
    >>> p = Path(tempfile.mkdtemp()) / "s.json"
    >>> load_state_file(p, S, what="demo state") is None
    True
    >>> write_atomic(p, S(n=3).model_dump_json().encode())
    >>> load_state_file(p, S, what="demo state").n
    3
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from routing.errors import StateFileError

M = TypeVar("M", bound=BaseModel)


def load_state_file(path: Path, model: type[M], *, what: str) -> M | None:
    """A pydantic state saved at ``path`` (``None`` when there is no file yet): the rollout and the router
    thresholds files are read the same way.

    Raises:
        StateFileError: the file exists but cannot be read or parsed.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        msg = f"{what} {str(path)!r} cannot be read: {exc}"
        raise StateFileError(msg) from exc
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        msg = f"{what} {str(path)!r} is not a valid {model.__name__}: {exc.errors()[0]['msg']}"
        raise StateFileError(msg) from exc


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: a temp file in the same directory, fsync, ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
