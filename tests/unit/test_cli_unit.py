"""The CLI on pure commands (no services): errors as one red line, registry, snapshots, audit."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from audit.log import AuditLog
from features.snapshots import freeze
from feedback.registry import ModelRegistry
from pricestream.cli import app

runner = CliRunner()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"PRICESTREAM_STATE_DIR": str(tmp_path / "state"), "PRICESTREAM_REPORTS_DIR": str(tmp_path / "reports")}


def _audit_log(path: Path, n: int = 3) -> Path:
    with AuditLog(path) as log:
        for i in range(n):
            log.append_entry({"tier": "light", "latency_ms": 1.0 + i, "decision": {"price": 100.0 + i}})
    return path


def test_audit_verify_intact_log_counts_entries(tmp_path: Path, env: dict[str, str]) -> None:
    log = _audit_log(tmp_path / "audit.jsonl")
    result = runner.invoke(app, ["audit", "verify", str(log)], env=env)
    assert result.exit_code == 0
    assert "3 entries, hash chain intact" in result.output


def test_audit_verify_tampered_log_names_the_line(tmp_path: Path, env: dict[str, str]) -> None:
    log = _audit_log(tmp_path / "audit.jsonl")
    lines = log.read_text().splitlines()
    lines[1] = lines[1].replace('"price":101.0', '"price":1.0')
    log.write_text("\n".join(lines) + "\n")
    result = runner.invoke(app, ["audit", "verify", str(log)], env=env)
    assert result.exit_code == 1
    assert "chain broken at line 2" in result.output
    assert "entry changed" in result.output
    assert "Traceback" not in result.output


def test_audit_verify_default_path_comes_from_the_environment(tmp_path: Path, env: dict[str, str]) -> None:
    log = _audit_log(tmp_path / "elsewhere.jsonl", n=2)
    result = runner.invoke(app, ["audit", "verify"], env={**env, "PRICESTREAM_AUDIT_LOG": str(log)})
    assert result.exit_code == 0
    assert "2 entries" in result.output


def _bundle(root: Path, name: str) -> Path:
    bundle = root / name
    bundle.mkdir(parents=True)
    (bundle / "model.onnx").write_bytes(name.encode())
    return bundle


def test_models_list_promote_rollback(tmp_path: Path, env: dict[str, str]) -> None:
    registry = ModelRegistry(tmp_path / "state" / "data" / "registry")
    v1 = registry.register(_bundle(tmp_path, "b1"), tier="light")
    v2 = registry.register(_bundle(tmp_path, "b2"), tier="light")
    for version in (v1, v2):
        assert runner.invoke(app, ["models", "promote", version], env=env).exit_code == 0
    assert registry.current("light").version == v2
    listed = runner.invoke(app, ["models", "list"], env=env)
    assert f"*{v2}" in listed.output and "generation 2" in listed.output
    rolled = runner.invoke(app, ["models", "rollback", "light"], env=env)
    assert rolled.exit_code == 0
    assert f"rolled back to {v1} (generation 3)" in rolled.output
    assert registry.current("light").version == v1


def test_models_promote_unknown_version_is_one_red_line(env: dict[str, str]) -> None:
    result = runner.invoke(app, ["models", "promote", "light-nope"], env=env)
    assert result.exit_code == 1
    assert result.output.startswith("error:")
    assert "light-nope" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_models_rollback_refuses_an_unknown_tier(env: dict[str, str]) -> None:
    result = runner.invoke(app, ["models", "rollback", "medium"], env=env)
    assert result.exit_code == 1
    assert "tier: got 'medium'" in result.output


def test_snapshot_list_shows_frozen_snapshots(tmp_path: Path, env: dict[str, str]) -> None:
    frame = pd.DataFrame({
        "hotel_id": ["h1", "h2"], "room_type": ["std", "std"], "stay_date": ["2026-12-24", "2026-12-25"],
        "event_timestamp": pd.to_datetime(["2026-12-01T00:00Z", "2026-12-01T01:00Z"], utc=True),
        "occupancy": [0.5, 0.7],
    })
    manifest = freeze(frame, root=tmp_path / "state" / "data" / "snapshots",
                      as_of=datetime(2026, 12, 2, tzinfo=UTC), definitions_hash="d" * 64)
    listed = runner.invoke(app, ["snapshot", "list"], env=env)
    assert listed.exit_code == 0
    row = next(line for line in listed.output.splitlines() if manifest.id in line)
    assert "2026-12-02T00:00:00+00:00" in row and "│ 2 " in row
    shown = runner.invoke(app, ["snapshot", "show", manifest.id], env=env)
    assert shown.exit_code == 0 and "occupancy" in shown.output


def test_snapshot_list_on_an_empty_root(env: dict[str, str]) -> None:
    result = runner.invoke(app, ["snapshot", "list"], env=env)
    assert result.exit_code == 0
    assert "no snapshots under" in result.output


@pytest.mark.parametrize("value", ["2026-11-30T12:00", "yesterday"])
def test_bad_iso_timestamp_is_a_clear_error(value: str, env: dict[str, str]) -> None:
    result = runner.invoke(app, ["snapshot", "create", "--as-of", value], env=env)
    assert result.exit_code == 1
    assert f"--as-of: got {value!r}, expected an ISO-8601 time with a timezone" in result.output
    assert "Traceback" not in result.output


def test_query_refuses_an_unknown_output_format(tmp_path: Path, env: dict[str, str]) -> None:
    result = runner.invoke(app, ["query", "SELECT 1", "--out", str(tmp_path / "x.xlsx")], env=env)
    assert result.exit_code == 1
    assert "expected a path ending in .csv or .parquet" in result.output


def test_rollout_advance_without_a_rollout_names_the_mismatch(env: dict[str, str]) -> None:
    result = runner.invoke(app, ["rollout", "advance", "light-abc"], env=env)
    assert result.exit_code == 1
    assert "got 'light-abc', but the rollout in 'idle' is of None" in result.output


def test_rollout_start_advance_abort_with_an_evidence_file(tmp_path: Path, env: dict[str, str]) -> None:
    registry = ModelRegistry(tmp_path / "state" / "data" / "registry")
    v1 = registry.register(_bundle(tmp_path, "b1"), tier="light")
    v2 = registry.register(_bundle(tmp_path, "b2"), tier="light")
    registry.promote(v1)
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"incumbent_prices": [100.0] * 50, "candidate_prices": [100.0] * 50,
                                "candidate_latency_ms": [3.0] * 50}))
    started = runner.invoke(app, ["rollout", "start", v2], env=env)
    assert started.exit_code == 0 and f"against {v1}" in started.output
    advanced = runner.invoke(app, ["rollout", "advance", v2, "--evidence", str(good)], env=env)
    assert advanced.exit_code == 0, advanced.output
    assert "shadow -> canary (candidate weight 0.05)" in advanced.output
    aborted = runner.invoke(app, ["rollout", "abort", v2, "--reason", "enough"], env=env)
    assert aborted.exit_code == 0 and f"incumbent {v1} serves" in aborted.output
    status = runner.invoke(app, ["rollout", "status"], env=env)
    assert "canary -> aborted" in status.output and "enough" in status.output
    assert registry.current("light").version == v1


def test_rollout_advance_failing_gate_exits_1_naming_it(tmp_path: Path, env: dict[str, str]) -> None:
    registry = ModelRegistry(tmp_path / "state" / "data" / "registry")
    registry.promote(registry.register(_bundle(tmp_path, "b1"), tier="light"))
    v2 = registry.register(_bundle(tmp_path, "b2"), tier="light")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"incumbent_prices": [100.0] * 50, "candidate_prices": [100.0] * 30 + [150.0] * 20,
                               "candidate_latency_ms": [3.0] * 50}))
    runner.invoke(app, ["rollout", "start", v2], env=env)
    result = runner.invoke(app, ["rollout", "advance", v2, "--evidence", str(bad)], env=env)
    assert result.exit_code == 1
    assert "gate 'flip_rate' failed: observed 0.4 > limit 0.1" in result.output
    assert f"rollout of {v2} aborted in shadow" in result.output
