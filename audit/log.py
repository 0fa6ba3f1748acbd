"""MAC-chained, append-only, externally anchored audit trail of pricing decisions.

Each decision becomes one JSON line in canonical form. Every entry carries ``prev_hash`` (the
MAC of the entry before it, 64 zeros for the first) and ``hash`` =
``HMAC-SHA256(key, prev_hash + canonical(entry without hash))`` with the key from settings
(``PRICESTREAM_AUDIT_KEY``; see :mod:`audit.anchors`). Changing, removing or
reordering a line breaks the chain at that line, and :func:`verify` names it; an editor
who recomputes the chain without the key is caught at the first entry changed. A small
``<path>.head`` file (MAC'd), rewritten at every fsync, records the last durable seq and
hash, and at most every ``anchor_interval_s`` that head is also appended to an anchor file
kept apart from the log (MAC'd and chained), so that cutting entries off the end is caught
even when the ``.head`` file is deleted too. Entries appended after the last anchor can
still be cut unseen: that window is the anchor interval.

Durability: entries are buffered and written with one ``write`` + ``fsync`` when
``flush_every`` of them are waiting, at least every ``fsync_interval_s`` by a
background flusher (also while idle), and at :meth:`AuditLog.close`. A crash loses
at most that interval. A crash in the middle of a write leaves a torn last line
(bytes after the last ``\n`` that are no entry): :func:`repair` moves those bytes to
a ``<path>.torn-<time>`` file and truncates the log to its last intact entry, and an
:class:`AuditLog` does that at open (``repair=True``). Lines are split on ``b"\n"``
only (a ``hotel_id`` may hold U+2028 or U+0085, which ``str.splitlines`` would split).

Example:
    >>> import tempfile, pathlib
    >>> from audit.verify import verify
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "audit.jsonl"
    >>> with AuditLog(path) as log:
    ...     _ = log.append_entry({"tier": "rules", "decision": {"price": 120.0}})
    ...     _ = log.append_entry({"tier": "light", "decision": {"price": 131.5}})
    >>> verify(path).ok
    True
    >>> lines = path.read_text().splitlines()
    >>> _ = path.write_text("\\n".join([lines[1], lines[0]]) + "\\n")
    >>> result = verify(path)
    >>> (result.ok, result.first_bad_position)
    (False, 1)
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from pydantic import SecretStr

from audit.anchors import AnchorFile, anchors_path, mac_hex, resolve_key
from audit.errors import AuditLogError
from events.models import PricingDecision, PricingRequest

AuditKey = str | bytes | SecretStr | None
"""An audit MAC key: a secret from settings, raw bytes, or None for the development key."""

GENESIS_HASH = "0" * 64
"""``prev_hash`` of the first entry of a log."""

_TAIL_CHUNK = 64 * 1024
"""Bytes read from the end of an existing log to find its last entry on reopen."""


def canonical_json(obj: object) -> str:
    """Canonical JSON: sorted keys, no spaces, non-finite floats spelled as strings.

    Example:
        >>> canonical_json({"b": 1, "a": [float("nan"), 2.5]})
        '{"a":["NaN",2.5],"b":1}'
    """
    try:  # nearly every body is plain JSON already: one C-level dump, no walk
        return _CANONICAL.encode(obj)
    except (ValueError, TypeError):  # a non-finite float (or a mapping json cannot take): spelled out, then dumped
        return _CANONICAL.encode(_finite(obj))


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""The one encoder of the canonical form: the writer's and the verifier's text must be the same bytes."""


def _finite(obj: object) -> object:
    if isinstance(obj, float) and not math.isfinite(obj):
        return "NaN" if math.isnan(obj) else ("Infinity" if obj > 0 else "-Infinity")
    if isinstance(obj, Mapping):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def sha256_hex(text: str) -> str:
    """Hex sha256 of a UTF-8 string."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chain_hash(prev_hash: str, body: Mapping[str, Any], key: AuditKey = None) -> str:
    """MAC of an entry: ``HMAC-SHA256(key, prev_hash + canonical(body))`` (``body`` excludes ``hash``).

    Example:
        >>> chain_hash(GENESIS_HASH, {"seq": 1}, "k") == chain_hash(GENESIS_HASH, {"seq": 1}, "other")
        False
    """
    return mac_hex(resolve_key(key), prev_hash + canonical_json(body))


def input_digest(request: PricingRequest, features: Mapping[str, float | None]) -> str:
    """sha256 of the canonical decision input (the request and the features it saw)."""
    return sha256_hex(canonical_json({"request": request.model_dump(mode="json"), "features": dict(features)}))


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


class AuditLog:
    """Thread-safe, buffered, append-only JSON-lines audit log.

    Args:
        path: the log file (created with its parent directory; reopened logs continue the chain).
        flush_every: write the buffer once it holds this many entries.
        fsync_interval_s: buffered entries reach the disk (written and fsynced) at most this long after
            they were appended, also while idle (a background thread); 0 fsyncs every append.
        clock: returns the entry timestamp (aware datetime); defaults to UTC now.
        repair_torn: at open, cut a torn last line (crash mid-write) off the log (see :func:`repair`); when
            ``False`` such a log raises :class:`~pricing.errors.AuditLogError`.
        key: the MAC key (``settings.audit_key``); None: the development key, with a warning.
        anchors: the anchor file (default ``<path>.anchors``; keep it on other storage than the log).
        anchor_interval_s: the durable head is anchored at most this often (at a fsync) and at close;
            0 anchors at every fsync.
        on_anchor: also called with every anchor record (e.g. :class:`audit.kafka_anchors.TopicAnchorPublisher`);
            its ``close()``, if it has one, is called when the log closes (after the last anchor).

    Raises:
        AuditLogError: ``append`` after ``close``, a disk error, or (at open) a last line that is no entry.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        flush_every: int = 64,
        fsync_interval_s: float = 1.0,
        clock: Callable[[], datetime] | None = None,
        repair_torn: bool = True,
        key: AuditKey = None,
        anchors: str | Path | None = None,
        anchor_interval_s: float = 1.0,
        on_anchor: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        if flush_every < 1:
            msg = f"flush_every: got {flush_every!r}, expected an integer >= 1"
            raise ValueError(msg)
        if fsync_interval_s < 0 or not math.isfinite(fsync_interval_s):
            msg = f"fsync_interval_s: got {fsync_interval_s!r}, expected a finite number >= 0"
            raise ValueError(msg)
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._flush_every = flush_every
        self._fsync_interval = fsync_interval_s
        self._clock = clock or (lambda: datetime.now(tz=UTC))
        self._lock = threading.Lock()
        self._buffer: list[str] = []
        self._key = resolve_key(key)
        self._anchors = AnchorFile(anchors or anchors_path(self.path), self._key)
        self._anchor_interval = anchor_interval_s
        self._last_anchor = float("-inf")
        self._on_anchor = on_anchor
        self.repaired = repair(self.path) if repair_torn else None
        self._seq, self._last_hash = _last_entry(self.path)
        self._file = self.path.open("a", encoding="utf-8", newline="\n")
        self._last_sync = time.monotonic()
        self._unsynced = False
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        if fsync_interval_s > 0:
            self._flusher = threading.Thread(target=self._flush_loop, name="audit-flusher", daemon=True)
            self._flusher.start()

    @property
    def seq(self) -> int:
        """Seq of the last appended entry (0 for an empty log)."""
        return self._seq

    @property
    def last_hash(self) -> str:
        """Hash of the last appended entry (the genesis hash for an empty log)."""
        return self._last_hash

    def append_entry(self, fields: Mapping[str, Any]) -> str:
        """Append one entry made of ``fields`` plus seq, timestamp and the chain; return its hash."""
        with self._lock:
            if self._file.closed:
                msg = f"audit log {str(self.path)!r}: got an append after close, expected an open log"
                raise AuditLogError(msg)
            body = dict(fields)  # canonical_json spells non-finite floats out, in the MAC and in the line alike
            body["seq"] = self._seq + 1
            body["timestamp"] = self._clock().astimezone(UTC).isoformat(timespec="microseconds")
            body["prev_hash"] = self._last_hash
            digest = chain_hash(self._last_hash, body, self._key)
            body["hash"] = digest
            self._buffer.append(canonical_json(body))
            self._seq += 1
            self._last_hash = digest
            if len(self._buffer) >= self._flush_every or time.monotonic() - self._last_sync >= self._fsync_interval:
                self._flush_locked(sync=True)
            return digest

    @property
    def pending(self) -> int:
        """Entries appended but not yet written to the file."""
        return len(self._buffer)

    def append(
        self,
        *,
        request: PricingRequest,
        features: Mapping[str, float | None],
        decision: PricingDecision,
        models: Sequence[tuple[str, str | None]] = (),
        candidates: Sequence[tuple[float, float]] = (),
        feature_versions: Mapping[str, Any] | None = None,
    ) -> str:
        """Audit one pricing decision; return the entry hash.

        Args:
            request: the pricing request.
            features: the features the decision used (hashed with the request).
            decision: the decision returned to the caller.
            models: (name, version) of every model consulted, in order.
            candidates: (candidate price, booking probability) pairs the optimiser compared; each is
                recorded as ``[price, booking_prob, expected_revenue]``.
            feature_versions: feature version labels (defaults to the decision's feature_version).
        """
        return self.append_entry(
            {
                "input_sha256": input_digest(request, features),
                "models": [{"name": name, "version": version} for name, version in models],
                "feature_versions": dict(feature_versions or {"features": decision.feature_version}),
                "snapshot_id": decision.snapshot_id,
                "tier": decision.tier,
                "rule_ids": list(decision.rule_ids),
                "candidates": [[float(p), float(b), float(p) * float(b)] for p, b in candidates],
                "latency_ms": decision.latency_ms,
                "decision": decision.model_dump(mode="json", exclude={"features"}),
            }
        )

    def flush(self, *, sync: bool = True) -> None:
        """Write buffered entries (and fsync them when ``sync``)."""
        with self._lock:
            if not self._file.closed:
                self._flush_locked(sync=sync)

    def close(self) -> None:
        """Flush, fsync and close the log (idempotent); stops the background flusher."""
        self._stop.set()
        if self._flusher is not None and self._flusher is not threading.current_thread():
            self._flusher.join()
        with self._lock:
            if self._file.closed:
                return
            self._flush_locked(sync=True, anchor=True)
            self._file.close()
        closer = getattr(self._on_anchor, "close", None)
        if callable(closer):
            closer()  # e.g. a topic publisher waits for its anchors in flight

    def _flush_loop(self) -> None:
        """Background: nothing appended stays off the disk longer than ``fsync_interval_s``."""
        while not self._stop.wait(self._fsync_interval):
            with self._lock:
                if self._file.closed:
                    return
                if self._buffer or self._unsynced:
                    try:
                        self._flush_locked(sync=True)
                    except AuditLogError:
                        continue  # the next append reports it to the caller; keep trying

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _flush_locked(self, *, sync: bool, anchor: bool = False) -> None:
        try:
            if self._buffer:
                self._file.write("\n".join(self._buffer) + "\n")
                self._buffer.clear()
                self._unsynced = True
            self._file.flush()
            if sync:
                os.fsync(self._file.fileno())
                _write_head(self.path, self._seq, self._last_hash, self._key)
                self._last_sync = time.monotonic()
                self._unsynced = False
                if anchor or self._last_sync - self._last_anchor >= self._anchor_interval:
                    self._anchor_locked()
        except OSError as exc:
            msg = f"audit log {str(self.path)!r}: cannot write ({exc}); expected a writable disk"
            raise AuditLogError(msg) from exc


    def _anchor_locked(self) -> None:
        """Append the durable head to the anchor file (when it moved since the last anchor)."""
        if self._seq <= self._anchors.last_seq:
            return
        stamp = datetime.now(tz=UTC).isoformat(timespec="microseconds")
        record = self._anchors.anchor(self._seq, self._last_hash, at=stamp)
        self._last_anchor = time.monotonic()
        if self._on_anchor is not None:
            self._on_anchor(record)


def head_path(path: str | Path) -> Path:
    """Where the durable head (last fsynced seq and hash) of a log lives."""
    path = Path(path)
    return path.with_name(path.name + ".head")


def head_mac(key: bytes, seq: int, digest: str) -> str:
    return mac_hex(key, canonical_json({"head": True, "seq": seq, "hash": digest}))


def _write_head(path: Path, seq: int, digest: str, key: bytes) -> None:
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
    return RepairResult(length, _last_entry(path)[0], saved)


def _last_entry(path: Path) -> tuple[int, str]:
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


