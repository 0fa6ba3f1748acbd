"""Keys and external anchors of the audit log's MAC chain (Crosby & Wallach style commitments).

An audit entry's ``hash`` is ``HMAC-SHA256(key, prev_hash + canonical(entry))``: an editor who
changes an entry and recomputes the chain without the key produces MACs that do not verify.
The key comes from settings (``PRICESTREAM_AUDIT_KEY``, a ``SecretStr``); without one a
documented development key is used and a warning is logged once (never the key itself).

Cutting entries off the end and deleting the ``.head`` file would still go unseen if the only
record of the head lived next to the log. So at most every ``anchor_interval_s`` the log
appends its durable head to an **anchor file** kept apart from it (``PRICESTREAM_AUDIT_ANCHORS``,
default ``<log>.anchors``). Each anchor line is itself MAC'd and chained to the anchor before it,
so an anchor cannot be forged, and a deleted anchor line breaks the anchor chain.

Example:
    >>> key = resolve_key("k")
    >>> a = anchor_record(1, seq=10, digest="ab" * 32, prev_mac=GENESIS_ANCHOR, key=key, at="2026-12-01T00:00:00+00:00")
    >>> check_anchor(a, 1, GENESIS_ANCHOR, key)
    ''
    >>> check_anchor(dict(a, seq=11), 1, GENESIS_ANCHOR, key)
    'anchor MAC does not match its content (anchor changed or forged without the key)'
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr

DEV_AUDIT_KEY = "pricestream-dev-audit-key-not-secret"
"""Key used when none is configured (local development only): anyone can recompute a chain with it."""

GENESIS_ANCHOR = "0" * 64
"""``prev`` of the first anchor of an anchor file."""

_log = logging.getLogger(__name__)
_warned: list[bool] = []


def resolve_key(key: str | bytes | SecretStr | None) -> bytes:
    """The MAC key as bytes; the development key (with one warning per process) when None or empty.

    Example:
        >>> resolve_key(SecretStr("s3cret"))
        b's3cret'
    """
    if isinstance(key, SecretStr):
        key = key.get_secret_value()
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not key:
        if not _warned:
            _warned.append(True)
            _log.warning("audit log: PRICESTREAM_AUDIT_KEY is not set; using the development key, "
                         "which does not protect the chain against an editor")
        return DEV_AUDIT_KEY.encode("utf-8")
    return key


def mac_hex(key: bytes, text: str) -> str:
    """Hex HMAC-SHA256 of a UTF-8 string under ``key``."""
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def _canonical(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def anchor_record(n: int, *, seq: int, digest: str, prev_mac: str, key: bytes, at: str) -> dict[str, Any]:
    """The ``n``-th anchor (1-based): the log's durable ``seq`` and its entry ``digest``, MAC'd and chained."""
    body = {"n": n, "seq": seq, "hash": digest, "prev": prev_mac, "at": at}
    return body | {"mac": mac_hex(key, _canonical(body))}


def check_anchor(record: object, n: object, prev_mac: object, key: bytes) -> str:
    """Why anchor ``record`` at line ``n`` is bad ("" when it holds)."""
    if not isinstance(record, dict) or not {"n", "seq", "hash", "prev", "at", "mac"} <= set(record):
        return "anchor line is not an anchor record (expected n, seq, hash, prev, at, mac)"
    if record["n"] != n:
        return f"anchor number {record['n']!r} at anchor line {n}, expected {n} (anchor removed or reordered)"
    if record["prev"] != prev_mac:
        return "anchor prev does not match the previous anchor's MAC (anchor removed or reordered)"
    body = {k: v for k, v in record.items() if k != "mac"}
    if not hmac.compare_digest(mac_hex(key, _canonical(body)), str(record["mac"])):
        return "anchor MAC does not match its content (anchor changed or forged without the key)"
    return ""


@dataclass(frozen=True, slots=True)
class Anchors:
    """The anchors read back from an anchor file.

    Attributes:
        by_seq: anchored log seq -> entry hash recorded then.
        last_seq: highest anchored seq (0 if none).
        count: anchors read.
        last_mac: MAC of the last anchor (the chain continues from it).
        error: why the anchor file is bad ("" when intact).
        error_after_seq: the last seq anchored before the bad anchor (entries after it lost their anchor).
    """

    by_seq: dict[int, str]
    last_seq: int
    count: int
    last_mac: str
    error: str = ""
    error_after_seq: int = 0


def read_anchors(path: Path, key: bytes) -> Anchors:
    """Read and check an anchor file (an absent file reads as no anchors)."""
    if not path.exists():
        return Anchors({}, 0, 0, GENESIS_ANCHOR)
    with path.open("rb") as handle:
        return check_anchors(handle, key, where=str(path))


def check_anchors(lines: Iterable[bytes], key: bytes, *, where: str, chained: bool = True) -> Anchors:
    """Check a sequence of anchor records (JSON lines, oldest first) read from ``where`` (a file, a topic).

    ``chained=False`` checks each record's MAC but not that it follows the one before: a topic may
    lack the anchors of a time it was not reachable or not configured, and Kafka's ACLs, not the
    chain, keep records from being removed there.

    Example:
        >>> key = resolve_key("k")
        >>> a = anchor_record(1, seq=3, digest="ab" * 32, prev_mac=GENESIS_ANCHOR, key=key, at="t")
        >>> check_anchors([json.dumps(a).encode()], key, where="topic audit.heads").last_seq
        3
        >>> check_anchors([b"{}"], key, where="topic audit.heads").error[:36]
        'topic audit.heads: anchor line 1: an'
    """
    by_seq: dict[int, str] = {}
    prev, last_seq, n = GENESIS_ANCHOR, 0, 0
    for n, raw in enumerate(lines, start=1):
        try:
            record = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            record = None
        if not chained and isinstance(record, dict):
            reason = check_anchor(record, record.get("n"), record.get("prev"), key)
        else:
            reason = check_anchor(record, n, prev, key)
        if reason:
            return Anchors(by_seq, last_seq, n - 1, prev, f"{where}: anchor line {n}: {reason}", last_seq)
        by_seq[int(record["seq"])] = str(record["hash"])
        last_seq, prev = max(last_seq, int(record["seq"])), str(record["mac"])
    return Anchors(by_seq, last_seq, n, prev)


class AnchorFile:
    """Append-only writer of a log's anchors (fsynced at each anchor).

    Args:
        path: the anchor file (parent created).
        key: the MAC key (bytes, see :func:`resolve_key`).
    """

    def __init__(self, path: str | Path, key: bytes) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._key = key
        state = read_anchors(self.path, key)
        self._n, self._prev, self.last_seq = state.count, state.last_mac, state.last_seq

    def anchor(self, seq: int, digest: str, *, at: str) -> dict[str, Any]:
        """Append the head (``seq``, ``digest``) as the next anchor and fsync it; return the record."""
        self._n += 1
        record = anchor_record(self._n, seq=seq, digest=digest, prev_mac=self._prev, key=self._key, at=at)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(_canonical(record) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self._prev, self.last_seq = str(record["mac"]), seq
        return record


def anchors_path(log_path: str | Path) -> Path:
    """Default anchor file of a log: ``<log>.anchors``."""
    log_path = Path(log_path)
    return log_path.with_name(log_path.name + ".anchors")
