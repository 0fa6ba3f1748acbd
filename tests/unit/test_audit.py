"""Audit trail: the hash chain holds, and tampering is caught at the right position."""

from __future__ import annotations

import json
import threading
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from audit.errors import AuditLogError
from audit.log import GENESIS_HASH, AuditLog, canonical_json, chain_hash, head_path, input_digest
from audit.verify import verify
from events.models import PricingDecision, PricingRequest

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def _request(i: int) -> PricingRequest:
    return PricingRequest(hotel_id=f"h{i % 3}", room_type="std", stay_date=date(2026, 12, 24), event_time=T0)


def _decision(request: PricingRequest, price: float) -> PricingDecision:
    return PricingDecision(
        hotel_id=request.hotel_id,
        room_type=request.room_type,
        stay_date=request.stay_date,
        request_id=request.request_id,
        price=price,
        tier="light",
        model_name="light-gbm",
        model_version="3",
        feature_version=7,
        snapshot_id="snap-1",
        rule_ids=("floor-all",),
        complexity=0.3,
        latency_ms=1.5,
    )


def _write(path: Path, n: int, **kwargs: float | int) -> None:
    with AuditLog(path, clock=lambda: T0, **kwargs) as log:  # type: ignore[arg-type]
        for i in range(n):
            request = _request(i)
            log.append(
                request=request,
                features={"occupancy": 0.5 + i / 100, "rooms_left": float("nan")},
                decision=_decision(request, 100.0 + i),
                models=[("light-gbm", "3")],
                candidates=[(100.0 + i, 0.5), (120.0 + i, 0.25)],
            )


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _rewrite(path: Path, lines: list[str]) -> None:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_entries_carry_the_chain_and_every_field(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path, 3)
    entries = [json.loads(line) for line in _lines(path)]
    assert [e["seq"] for e in entries] == [1, 2, 3]
    assert entries[0]["prev_hash"] == GENESIS_HASH
    assert entries[1]["prev_hash"] == entries[0]["hash"]
    body = {k: v for k, v in entries[2].items() if k != "hash"}
    assert entries[2]["hash"] == chain_hash(entries[1]["hash"], body)
    first = entries[0]
    assert first["timestamp"] == "2026-11-30T09:00:00.000000+00:00"
    assert first["models"] == [{"name": "light-gbm", "version": "3"}]
    assert first["feature_versions"] == {"features": 7}
    assert (first["snapshot_id"], first["tier"], first["rule_ids"]) == ("snap-1", "light", ["floor-all"])
    assert first["candidates"] == [[100.0, 0.5, 50.0], [120.0, 0.25, 30.0]]
    assert first["decision"]["price"] == 100.0
    assert len(first["input_sha256"]) == 64
    assert verify(path).ok and verify(path).entries == 3


def test_input_digest_is_canonical_and_sensitive() -> None:
    request = _request(0)
    assert input_digest(request, {"a": 1.0, "b": None}) == input_digest(request, {"b": None, "a": 1.0})
    assert input_digest(request, {"a": 1.0}) != input_digest(request, {"a": 1.0000001})
    assert canonical_json({"z": [1, {"y": 2, "x": float("inf")}]}) == '{"z":[1,{"x":"Infinity","y":2}]}'


def test_changed_entry_is_named(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path, 5)
    lines = _lines(path)
    entry = json.loads(lines[2])
    entry["decision"]["price"] = 1.0
    lines[2] = canonical_json(entry)
    _rewrite(path, lines)
    result = verify(path)
    assert (result.ok, result.first_bad_position) == (False, 3)
    assert "changed" in result.reason


def test_deleted_entry_is_named(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path, 5)
    lines = _lines(path)
    del lines[1]
    _rewrite(path, lines)
    result = verify(path)
    assert (result.ok, result.first_bad_position) == (False, 2)
    assert "removed" in result.reason


def test_reordered_entries_are_named(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path, 5)
    lines = _lines(path)
    lines[3], lines[4] = lines[4], lines[3]
    _rewrite(path, lines)
    result = verify(path)
    assert (result.ok, result.first_bad_position) == (False, 4)


def test_truncated_tail_is_caught_by_the_head(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path, 5)
    _rewrite(path, _lines(path)[:3])
    result = verify(path)
    assert (result.ok, result.first_bad_position) == (False, 4)
    assert "head records seq 5" in result.reason


def test_rehashed_forgery_after_a_deletion_is_still_caught(tmp_path: Path) -> None:
    """Deleting an entry and renumbering the rest breaks prev_hash even if seq looks right."""
    path = tmp_path / "audit.jsonl"
    _write(path, 4)
    lines = _lines(path)
    del lines[1]
    for i, line in enumerate(lines[1:], start=2):
        entry = json.loads(line)
        entry["seq"] = i
        lines[i - 1] = canonical_json(entry)
    _rewrite(path, lines)
    assert verify(path).first_bad_position == 2


def test_reopen_continues_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path, 2)
    _write(path, 2)
    assert [json.loads(line)["seq"] for line in _lines(path)] == [1, 2, 3, 4]
    assert verify(path).ok


def test_buffered_writes_reach_disk_on_flush_and_threads_keep_order(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, flush_every=1000, fsync_interval_s=3600.0)
    threads = [
        threading.Thread(target=lambda k=k: [log.append_entry({"worker": k, "i": i}) for i in range(50)])
        for k in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert path.read_text() == ""  # still buffered: neither 1000 entries nor an hour
    log.flush()
    assert len(_lines(path)) == 200
    assert json.loads(head_path(path).read_text())["seq"] == 200
    log.close()
    assert verify(path).ok


def test_bad_arguments_and_missing_log(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="flush_every"):
        AuditLog(tmp_path / "a.jsonl", flush_every=0)
    result = verify(tmp_path / "missing.jsonl")
    assert not result.ok and "no audit log" in result.reason
    log = AuditLog(tmp_path / "b.jsonl")
    log.close()
    with pytest.raises(ValueError, match="after close"):
        log.append_entry({"x": 1})


def test_an_idle_log_reaches_the_disk_without_flush_or_close(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, flush_every=1000, fsync_interval_s=0.05)
    for i in range(3):
        log.append_entry({"i": i})
    durable = 0
    for _ in range(200):  # the background flusher, not this test, writes them; poll until the head says so
        head = head_path(path)
        durable = json.loads(head.read_text())["seq"] if head.exists() else 0
        if durable == 3:
            break
        threading.Event().wait(0.05)
    assert durable == 3 and log.pending == 0
    assert len(_lines(path)) == 3
    log.close()


@pytest.mark.parametrize("torn", [b'{"seq": 3, "tier": "li', b"\x00\x00\x00\x00"])
def test_a_torn_last_line_is_reported_then_repaired_at_the_next_open(tmp_path: Path, torn: bytes) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path, 2)
    with path.open("ab") as handle:
        handle.write(torn)
    result = verify(path)
    assert (result.ok, result.torn_tail, result.first_bad_position, result.entries, result.last_seq) == (
        False, True, 3, 2, 2)
    with AuditLog(path, clock=lambda: T0) as log:
        assert log.repaired is not None and log.repaired.dropped_bytes == len(torn)
        assert log.repaired.saved_to is not None and log.repaired.saved_to.read_bytes() == torn
        log.append_entry({"tier": "rules"})
    assert [json.loads(line)["seq"] for line in _lines(path)] == [1, 2, 3]
    assert verify(path).ok


def test_a_complete_broken_last_line_is_not_repaired_away(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path, 2)
    with path.open("ab") as handle:
        handle.write(b"not an entry\n")
    assert verify(path).torn_tail is False
    with pytest.raises(AuditLogError, match="last line is not an audit entry"):
        AuditLog(path)


@pytest.mark.parametrize("separator", ["\u2028", "\u0085", "\u2029", "\x1c"])
def test_unicode_line_separators_in_a_value_keep_one_entry_per_line(tmp_path: Path, separator: str) -> None:
    path = tmp_path / "audit.jsonl"
    with AuditLog(path, clock=lambda: T0) as log:
        log.append_entry({"decision": {"hotel_id": f"h{separator}1"}})
    with AuditLog(path, clock=lambda: T0) as log:  # reopening reads the tail: it must find entry 1
        assert log.seq == 1
        log.append_entry({"decision": {"hotel_id": "h2"}})
    result = verify(path)
    assert (result.ok, result.entries, result.last_seq) == (True, 2, 2)


def test_append_after_close_is_an_audit_log_error(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "a.jsonl")
    log.close()
    with pytest.raises(AuditLogError):
        log.append_entry({"x": 1})


def test_appends_from_many_threads_while_the_disk_works_keep_one_intact_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, fsync_interval_s=0.001, flush_every=7)

    def write(worker: int) -> None:
        for i in range(300):
            log.append_entry({"worker": worker, "i": i})

    threads = [threading.Thread(target=write, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log.close()
    result = verify(path)
    assert result.ok, result.reason
    assert result.entries == 2400 == log.seq
