"""Tamper evidence of the MAC-chained, anchored audit log against an editor of its files.

Each attack is applied to a fresh copy of one written log; verification must name the entry
where the log stops being trustworthy (100% of the cases, not a rate).
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from audit.anchors import anchor_record, anchors_path, mac_hex
from audit.log import AuditLog, canonical_json, head_path, sha256_hex
from audit.verify import verify

KEY = "test-audit-key-0123456789"
ENTRIES = 60
FLUSH_EVERY = 5
"""Small batches so that the log has one anchor per 5 entries (anchor interval 0: every fsync)."""


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("audit") / "audit.jsonl"
    with AuditLog(path, key=KEY, flush_every=FLUSH_EVERY, fsync_interval_s=3600.0, anchor_interval_s=0) as log:
        for i in range(ENTRIES):
            log.append_entry({"tier": "light", "decision": {"hotel_id": f"h{i % 4}", "price": 100.0 + i}})
    return path


def _copy(src: Path, dst_dir: Path) -> Path:
    dst_dir.mkdir(parents=True, exist_ok=True)
    for source in (src, head_path(src), anchors_path(src)):
        shutil.copyfile(source, dst_dir / source.name)
    return dst_dir / src.name


def test_the_written_log_verifies_with_its_key_only(written: Path) -> None:
    assert verify(written, key=KEY).ok and verify(written, key=KEY).entries == ENTRIES
    anchors = anchors_path(written).read_text().splitlines()
    assert len(anchors) == ENTRIES // FLUSH_EVERY
    wrong = verify(written, key="another-key")
    assert (wrong.ok, wrong.first_bad_position) == (False, 1) and "MAC" in wrong.reason


def test_1000_random_single_byte_edits_are_each_caught_at_their_entry(written: Path, tmp_path: Path) -> None:
    data = written.read_bytes()
    rng = random.Random(15)
    copy = _copy(written, tmp_path / "edit")
    misses = []
    for _ in range(1000):
        offset = rng.randrange(len(data))
        new = rng.choice([b for b in range(256) if b != data[offset]])
        copy.write_bytes(data[:offset] + bytes([new]) + data[offset + 1:])
        expected = data.count(b"\n", 0, offset) + 1
        result = verify(copy, key=KEY)
        if result.ok or result.first_bad_position != expected:
            misses.append((offset, new, expected, result.first_bad_position, result.reason))
    assert misses == []


def _forge(lines: list[str], index: int, forge_key: str | None) -> list[str]:
    """Change entry ``index`` (0-based) and recompute every MAC after it without the real key."""
    entries = [json.loads(line) for line in lines]
    entries[index]["decision"]["price"] = 1.0
    prev = entries[index - 1]["hash"] if index else "0" * 64
    for entry in entries[index:]:
        entry["prev_hash"] = prev
        body = {k: v for k, v in entry.items() if k != "hash"}
        text = prev + canonical_json(body)
        entry["hash"] = sha256_hex(text) if forge_key is None else mac_hex(forge_key.encode(), text)
        prev = entry["hash"]
    return [canonical_json(entry) for entry in entries]


def _forge_head_and_anchors(path: Path, lines: list[str], forge_key: str) -> None:
    last = json.loads(lines[-1])
    key = forge_key.encode()
    head = {"seq": last["seq"], "hash": last["hash"]}
    head_path(path).write_text(canonical_json(head | {"mac": mac_hex(key, canonical_json(head | {"head": True}))}))
    by_seq = {json.loads(line)["seq"]: json.loads(line)["hash"] for line in lines}
    prev, out = "0" * 64, []
    for n, seq in enumerate(range(FLUSH_EVERY, len(lines) + 1, FLUSH_EVERY), start=1):
        record = anchor_record(n, seq=seq, digest=by_seq[seq], prev_mac=prev, key=key, at="2026-12-01T00:00:00+00:00")
        out.append(json.dumps(record, sort_keys=True, separators=(",", ":")))
        prev = record["mac"]
    anchors_path(path).write_text("\n".join(out) + "\n")


def test_100_edits_with_the_chain_recomputed_without_the_key_are_caught(written: Path, tmp_path: Path) -> None:
    lines = written.read_text(encoding="utf-8").splitlines()
    rng = random.Random(1509)
    misses = []
    for attempt in range(100):
        copy = _copy(written, tmp_path / f"forge{attempt}")
        index = rng.randrange(len(lines))
        forge_key = None if attempt % 2 == 0 else f"guess-{attempt}"  # plain sha256, or a guessed key
        forged = _forge(lines, index, forge_key)
        copy.write_text("\n".join(forged) + "\n", encoding="utf-8")
        _forge_head_and_anchors(copy, forged, forge_key or "")
        result = verify(copy, key=KEY)
        if result.ok or result.first_bad_position != index + 1 or "MAC" not in result.reason:
            misses.append((index, result.first_bad_position, result.reason))
    assert misses == []


def test_a_truncation_with_the_head_deleted_is_caught_by_the_anchors(written: Path, tmp_path: Path) -> None:
    copy = _copy(written, tmp_path / "cut")
    lines = copy.read_text(encoding="utf-8").splitlines()
    copy.write_text("\n".join(lines[:43]) + "\n", encoding="utf-8")
    with_head = verify(copy, key=KEY)
    assert (with_head.ok, with_head.first_bad_position) == (False, 44)
    head_path(copy).unlink()
    result = verify(copy, key=KEY)
    assert (result.ok, result.first_bad_position, result.entries) == (False, 44, 43)
    assert f"anchors seq {ENTRIES}" in result.reason and "removed from the end" in result.reason


def test_a_deleted_anchor_is_caught_at_the_first_entry_it_anchored(written: Path, tmp_path: Path) -> None:
    copy = _copy(written, tmp_path / "anchor")
    anchors = anchors_path(copy).read_text().splitlines()
    del anchors[3]  # the anchor of seq 20; anchors 1-3 cover seq 1..15
    anchors_path(copy).write_text("\n".join(anchors) + "\n")
    result = verify(copy, key=KEY)
    assert (result.ok, result.first_bad_position) == (False, 16)
    assert "anchor line 4" in result.reason and "removed or reordered" in result.reason


def test_a_deleted_anchor_file_is_caught(written: Path, tmp_path: Path) -> None:
    copy = _copy(written, tmp_path / "noanchor")
    anchors_path(copy).unlink()
    head_path(copy).unlink()
    result = verify(copy, key=KEY)
    assert (result.ok, result.first_bad_position) == (False, 1)
    assert "anchor file deleted" in result.reason


def test_a_forged_head_is_caught(written: Path, tmp_path: Path) -> None:
    copy = _copy(written, tmp_path / "head")
    head = json.loads(head_path(copy).read_text())
    head_path(copy).write_text(canonical_json(head | {"seq": 10}))
    result = verify(copy, key=KEY)
    assert not result.ok and "MAC does not match" in result.reason


def test_cli_verify_uses_the_key_from_settings(written: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from pricestream.cli import app

    env = {"PRICESTREAM_STATE_DIR": str(tmp_path / "state"), "PRICESTREAM_AUDIT_KEY": KEY}
    ok = CliRunner().invoke(app, ["audit", "verify", str(written)], env=env)
    assert ok.exit_code == 0 and f"{ENTRIES} entries" in ok.output
    wrong = CliRunner().invoke(app, ["audit", "verify", str(written)], env=env | {"PRICESTREAM_AUDIT_KEY": "nope"})
    assert wrong.exit_code == 1 and "chain broken at line 1" in wrong.output and "nope" not in wrong.output
