"""Verification of the decision log: the hash chain, each entry's MAC, the head file and the anchors.

:func:`verify` walks the log once and names the first bad entry and the last intact one; it reads
what :class:`~audit.log.AuditLog` writes and never changes it (``audit repair`` does, :func:`audit.files.repair`).
"""

from __future__ import annotations

import hmac
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audit.anchors import Anchors, anchors_path, read_anchors, resolve_key
from audit.chain import GENESIS_HASH, AuditKey, canonical_json, chain_hash
from audit.files import head_mac, head_path


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """Outcome of :func:`verify`.

    Attributes:
        ok: the whole chain holds.
        first_bad_position: 1-based line number of the first broken entry (None when ok).
        reason: what is wrong there (empty when ok).
        entries: number of intact entries read (before the first broken one).
        last_seq, last_hash, last_timestamp: the last intact entry (seq 0 and the genesis hash if none).
        torn_tail: the only problem is a half-written last line (a crash mid-write; :func:`repair` fixes it).
    """

    ok: bool
    first_bad_position: int | None = None
    reason: str = ""
    entries: int = 0
    last_seq: int = 0
    last_hash: str = GENESIS_HASH
    last_timestamp: str | None = None
    torn_tail: bool = False


def _check_entry(position: int, line: bytes, expected_prev: str, key: bytes) -> tuple[dict[str, Any] | None, str]:
    """Parse one line and check it against the chain; return (entry, reason-if-bad)."""
    try:
        entry = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None, "line is not valid JSON"
    if not isinstance(entry, dict) or "hash" not in entry or "seq" not in entry:
        return None, "line is not an audit entry (no seq/hash)"
    if entry["seq"] != position:
        return None, f"seq {entry['seq']!r} at line {position}, expected {position} (entry removed or reordered)"
    if entry.get("prev_hash") != expected_prev:
        return None, "prev_hash does not match the previous entry's hash (entry removed or reordered)"
    body = {k: v for k, v in entry.items() if k != "hash"}
    if not hmac.compare_digest(chain_hash(expected_prev, body, key), str(entry["hash"])):
        return None, "MAC does not match the entry content (entry changed, or chain recomputed without the key)"
    if canonical_json(entry).encode("utf-8") != line:
        return None, "line is not in canonical form (bytes changed without changing the values)"
    return entry, ""


def verify(path: str | Path, *, key: AuditKey = None, anchors: str | Path | None = None,
           remote: tuple[str, Anchors] | None = None) -> VerifyResult:
    """Walk the MAC chain of a log, then its head and anchors, and report the first broken entry.

    Detects a changed entry (MAC mismatch, also when the chain was recomputed without the key),
    a removed or reordered entry (seq or prev_hash mismatch), entries cut off the end (the
    ``.head`` file, and the anchor file even when ``.head`` is deleted), a forged head, and a
    deleted, changed or forged anchor.

    Args:
        path: the log.
        key: the MAC key the log was written with (None: the development key).
        anchors: its anchor file (default ``<path>.anchors``).
        remote: ``(where, anchors)`` read from a second place, e.g. the ``audit.heads`` topic
            (:func:`audit.kafka_anchors.read_topic_anchors`): checked like the file, so a log cut
            short with both its ``.head`` and its anchor file deleted is still caught.

    Example:
        >>> verify("/nonexistent/audit.jsonl").reason
        "no audit log at '/nonexistent/audit.jsonl'"
    """
    path = Path(path)
    if not path.exists():
        return VerifyResult(False, None, f"no audit log at {str(path)!r}")
    mac_key = resolve_key(key)
    head, head_error = _read_head(path, mac_key)  # a bad head is reported after the entries it cannot vouch for
    anchor_file = Path(anchors) if anchors is not None else anchors_path(path)
    anchored = read_anchors(anchor_file, mac_key)
    sources = [(str(anchor_file), anchored), *([remote] if remote is not None else [])]
    broken, (position, prev, stamp) = _walk(path, mac_key, head, sources)
    if broken is not None:
        return broken
    reason, bad = _end_problem(position, head, head_error, sources)
    if not reason and position and not anchored.count:
        reason, bad = (f"no anchor in {anchor_file} for a log of {position} entries: anchor file deleted "
                       "(or the log was copied without it)"), 1
    return VerifyResult(not reason, bad, reason, position, position, prev, stamp)


_Tail = tuple[int, str, str | None]  # (position, hash, timestamp) of the last intact entry


def _walk(path: Path, key: bytes, head: tuple[int, str] | None,
          sources: list[tuple[str, Anchors]]) -> tuple[VerifyResult | None, _Tail]:
    """Check every entry against the chain, the head and the anchors: the first broken one, or None."""
    prev, position, stamp = GENESIS_HASH, 0, None
    with path.open("rb") as handle:  # binary: lines end at b"\n" only
        for position, raw in enumerate(handle, start=1):
            entry, reason = _check_entry(position, raw.removesuffix(b"\n"), prev, key)
            if entry is None:
                torn = not raw.endswith(b"\n")
                if torn:
                    reason = (f"torn last line ({len(raw)} bytes, no newline): a write cut short by a crash; "
                              "`pricestream audit repair` cuts it off")
                return (VerifyResult(False, position, reason, position - 1, position - 1, prev, stamp, torn),
                        (position, prev, stamp))
            prev, stamp = str(entry["hash"]), entry.get("timestamp")
            if head is not None and position == head[0] and prev != head[1]:
                return (VerifyResult(False, position, "entry hash differs from the head record", position,
                                     position, prev, stamp), (position, prev, stamp))
            for where, source in sources:
                if source.by_seq.get(position, prev) != prev:
                    return (VerifyResult(False, position, f"entry hash differs from its anchor in {where}",
                                         position, position, prev, stamp), (position, prev, stamp))
    return None, (position, prev, stamp)


def _end_problem(position: int, head: tuple[int, str] | None, head_error: str,
                 sources: list[tuple[str, Anchors]]) -> tuple[str, int | None]:
    """What the head and the anchors say is wrong once every entry checked out: (reason, first bad seq)."""
    if head is not None and head[0] > position:
        return (f"log ends at seq {position} but the head records seq {head[0]}: entries removed from the end",
                position + 1)
    for where, source in sources:
        if source.last_seq > position:
            return (f"log ends at seq {position} but {where} anchors seq {source.last_seq}: "
                    "entries removed from the end"), position + 1
    if head_error:
        return head_error, None
    for _, source in sources:
        if source.error:
            bad = source.error_after_seq + 1
            return f"{source.error}; entries from seq {bad} lost their anchor", bad
    return "", None


def _read_head(path: Path, key: bytes) -> tuple[tuple[int, str] | None, str]:
    """(seq, hash) of the head file, or None with why it cannot be used ("" when it is absent)."""
    head = head_path(path)
    if not head.exists():
        return None, ""
    try:
        recorded = json.loads(head.read_text(encoding="utf-8"))
        seq, digest, mac = int(recorded["seq"]), str(recorded["hash"]), str(recorded["mac"])
    except (KeyError, TypeError, ValueError):
        return None, f"head file {str(head)!r} is unreadable; expected {{seq, hash, mac}}"
    if not hmac.compare_digest(head_mac(key, seq, digest), mac):
        return None, f"head file {str(head)!r}: MAC does not match (head forged or changed)"
    return (seq, digest), ""
