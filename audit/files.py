"""The audit log's files: its MAC'd head record, its last entry, and the repair of a torn last line.

Lines are split on ``b"\n"`` only (a ``hotel_id`` may hold U+2028 or U+0085, which ``str.splitlines``
would split).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from audit.anchors import mac_hex
from audit.chain import GENESIS_HASH, canonical_json
from audit.errors import AuditLogError

_TAIL_CHUNK = 64 * 1024
"""Bytes read from the end of an existing log to find its last entry on reopen."""



@dataclass(frozen=True, slots=True)
class RepairResult:
    """What :func:`repair` did.

    Attributes:
        dropped_bytes: bytes cut off the end (0: the log was intact).
        last_seq: seq of the last entry kept.
        saved_to: where the dropped bytes were saved (None when nothing was dropped).
    """

    dropped_bytes: int
    last_seq: int
    saved_to: Path | None = None


def head_path(path: str | Path) -> Path:
    """Where the durable head (last fsynced seq and hash) of a log lives."""
    path = Path(path)
    return path.with_name(path.name + ".head")


def head_mac(key: bytes, seq: int, digest: str) -> str:
    """MAC of a head record (seq and hash of the last durable entry)."""
    return mac_hex(key, canonical_json({"head": True, "seq": seq, "hash": digest}))


def write_head(path: Path, seq: int, digest: str, key: bytes) -> None:
    """Replace the head file of the log at ``path`` atomically (write, then rename)."""
    target = head_path(path)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(canonical_json({"seq": seq, "hash": digest, "mac": head_mac(key, seq, digest)}),
                   encoding="utf-8")
    os.replace(tmp, target)


def _tail(path: Path) -> tuple[int, bytes]:
    """(offset of the chunk, last ``_TAIL_CHUNK`` bytes of the file)."""
    with path.open("rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        start = max(0, size - _TAIL_CHUNK)
        handle.seek(start)
        return start, handle.read()


def _parse_entry(raw: bytes) -> dict[str, Any] | None:
    """The entry of one line (``b"\n"`` stripped), or None if it is not one."""
    try:
        entry = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("seq"), int) or "hash" not in entry:
        return None
    return entry


def _torn_tail(path: Path) -> tuple[int, int]:
    """(offset where a torn tail starts, its length); (size, 0) when the log ends with a complete line.

    A torn tail is what follows the last ``b"\n"`` when it is not a complete entry (a write cut short).
    """
    start, tail = _tail(path)
    end = tail.rfind(b"\n") + 1  # 0 when the chunk holds no newline
    rest = tail[end:]
    if not rest or _parse_entry(rest) is not None:
        return start + len(tail), 0
    return start + end, len(rest)


def repair(path: str | Path) -> RepairResult:
    """Cut a torn last line (a crash in the middle of a write) off the log, saving its bytes aside.

    Only bytes after the last newline that do not form an entry are removed, never a complete
    entry; a broken complete line is tampering or corruption, which :func:`audit.verify.verify` reports.

    Example:
        >>> import tempfile, pathlib
        >>> from audit.log import AuditLog
        >>> from audit.verify import verify
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "audit.jsonl"
        >>> with AuditLog(path) as log:
        ...     _ = log.append_entry({"tier": "rules"})
        >>> with path.open("ab") as f:
        ...     _ = f.write(b'{"seq": 2, "ti')
        >>> verify(path).torn_tail
        True
        >>> r = repair(path)
        >>> r.dropped_bytes, r.last_seq, verify(path).ok
        (14, 1, True)
    """
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return RepairResult(0, 0)
    cut, length = _torn_tail(path)
    saved = None
    if length:
        with path.open("r+b") as handle:
            handle.seek(cut)
            torn = handle.read()
            stamp = datetime.now(tz=UTC).strftime("%Y%m%dT%H%M%S%fZ")
            saved = path.with_name(f"{path.name}.torn-{stamp}")
            saved.write_bytes(torn)
            handle.truncate(cut)
            handle.flush()
            os.fsync(handle.fileno())
    return RepairResult(length, last_entry(path)[0], saved)


def last_entry(path: Path) -> tuple[int, str]:
    """Seq and hash of the last entry of an existing log, read from its tail (lines split on b"\n")."""
    if not path.exists() or path.stat().st_size == 0:
        return 0, GENESIS_HASH
    _, tail = _tail(path)
    lines = [line for line in tail.split(b"\n") if line.strip()]
    last = _parse_entry(lines[-1]) if lines else None
    if last is None:
        msg = (f"audit log {str(path)!r}: last line is not an audit entry; expected a valid log "
               "(run `pricestream audit verify`, then `pricestream audit repair` for a torn last line)")
        raise AuditLogError(msg)
    return int(last["seq"]), str(last["hash"])
