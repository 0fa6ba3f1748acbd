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

import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from audit.anchors import AnchorFile, anchors_path, resolve_key
from audit.chain import GENESIS_HASH as GENESIS_HASH
from audit.chain import AuditKey as AuditKey
from audit.chain import canonical_json as canonical_json
from audit.chain import chain_hash as chain_hash
from audit.chain import input_digest as input_digest
from audit.chain import sha256_hex as sha256_hex
from audit.errors import AuditLogError
from audit.files import RepairResult as RepairResult
from audit.files import head_mac as head_mac
from audit.files import head_path as head_path
from audit.files import last_entry, write_head
from audit.files import repair as repair
from events.models import PricingDecision, PricingRequest


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
        self._seq, self._last_hash = last_entry(self.path)
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
                write_head(self.path, self._seq, self._last_hash, self._key)
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
