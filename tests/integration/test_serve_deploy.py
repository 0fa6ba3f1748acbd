"""``pricestream serve`` as a deployed process: every returned decision is on Kafka and in the audit log.

Real Kafka and Redis (the session stack); the server is its own OS process started by the CLI.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from infra.config import StackConfig
from tests.integration.serve_helpers import (
    Server,
    read_topic,
    request_body,
    run_cli,
    seed_models,
    stack_env,
    start_serve,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def served(stack: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("serve")
    env = stack_env(stack, root / "state")
    seed_models(env)
    server = start_serve(env, root / "serve.log")
    yield server
    if server.proc.poll() is None:
        server.terminate()


def test_500_http_decisions_reach_kafka_and_the_audit_log_exactly_once(served: Server) -> None:
    bodies = [request_body(i) for i in range(500)]
    with httpx.Client(base_url=served.url, timeout=30.0) as client:
        answers = [client.post("/v1/price", json=body) for body in bodies]
    assert [a.status_code for a in answers] == [200] * 500
    assert {a.json()["request_id"] for a in answers} == {b["request_id"] for b in bodies}
    decisions = read_topic(served.env, "pricing.decisions", expect=500)
    assert Counter(d["request_id"] for d in decisions) == Counter(b["request_id"] for b in bodies)
    assert {(d["arm"], d["propensity"]) for d in decisions} == {("incumbent", 1.0)}
    served.proc.poll()
    verify = run_cli(served.env, "audit", "verify")
    # the server is still running: the idle flusher, not a shutdown, put the entries on disk
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "500 entries, hash chain intact" in verify.stdout


def test_a_drift_recalibration_moves_the_running_servers_tiers(served: Server) -> None:
    from datetime import UTC, datetime

    from feedback.monitors.drift import DriftReport, FeatureDrift
    from feedback.monitors.recalibration import RecalibrationConfig, ThresholdRecalibrator
    from pricestream.settings import Settings
    from routing.calibration import TierShares
    from routing.threshold_state import ThresholdStore

    store = ThresholdStore(Settings(state_dir=Path(served.env["PRICESTREAM_STATE_DIR"])).router_thresholds())
    alert = FeatureDrift("occupancy", 500, 0.9, 1e-9, 1e-9, 1.0, 1.0, True)

    def recalibrate(shares: TierShares, hour: int) -> list[str]:
        recal = ThresholdRecalibrator(RecalibrationConfig(enabled=True, shares=shares, min_samples=100), store=store)
        for i in range(500):
            recal.learn_one(i / 500)
        assert recal.on_report(DriftReport(datetime(2026, 12, 1, hour, tzinfo=UTC), 500, (alert,))) is not None
        threading.Event().wait(0.6)  # > the server's follow interval (0.2 s)
        with httpx.Client(base_url=served.url, timeout=30.0) as client:
            return [client.post("/v1/price", json=request_body(i)).json()["tier"] for i in range(40)]

    assert set(recalibrate(TierShares(rules=1.0, light=0.0, heavy=0.0), 1)) == {"rules"}
    assert set(recalibrate(TierShares(rules=0.0, light=0.0, heavy=1.0), 2)) == {"heavy"}
    health = httpx.get(f"{served.url}/healthz").json()
    assert health["thresholds"]["heavy_above"] == store.load().thresholds.heavy_above  # type: ignore[union-attr]


def _seed_log_with_line_separators(env: dict[str, str]) -> None:
    """An audit log from before the contract refused U+2028 / U+0085 in ids (or from another writer)."""
    from pricing.audit import AuditLog

    path = Path(env["PRICESTREAM_STATE_DIR"]) / "data" / "audit" / "decisions.jsonl"
    with AuditLog(path) as log:
        for hotel in ("h\u2028x", "h\u0085y"):
            log.append_entry({"tier": "rules", "decision": {"hotel_id": hotel, "price": 100.0}})


def test_sigterm_mid_traffic_and_restart_lose_and_duplicate_nothing(
    stack: StackConfig, tmp_path: Path
) -> None:
    env = stack_env(stack, tmp_path / "state")
    seed_models(env)
    _seed_log_with_line_separators(env)
    log = tmp_path / "serve.log"
    server = start_serve(env, log)  # starts on a log whose values hold U+2028 and U+0085
    returned: list[str] = []
    sent = threading.Event()
    bodies = [request_body(i) for i in range(400)]

    def client() -> None:
        with httpx.Client(timeout=30.0) as http:
            for i, body in enumerate(bodies):
                while True:  # a request refused while the server restarts is sent again
                    try:
                        answer = http.post(f"{url[0]}/v1/price", json=body)
                    except httpx.TransportError:
                        sent.wait(0.2)
                        continue
                    assert answer.status_code == 200, answer.text
                    returned.append(answer.json()["request_id"])
                    break
                if i == 150:
                    sent.set()

    url = [server.url]
    worker = threading.Thread(target=client)
    worker.start()
    sent.wait(300)
    rc = server.terminate()
    server = start_serve(env, log)
    url[0] = server.url
    worker.join(600)
    assert rc == 0, log.read_text()[-2000:]
    assert len(returned) == 400 and set(returned) == {b["request_id"] for b in bodies}
    decisions = read_topic(env, "pricing.decisions", expect=400)
    assert Counter(d["request_id"] for d in decisions) == Counter(returned)  # 0 lost, 0 duplicated
    assert server.terminate() == 0
    verify = run_cli(env, "audit", "verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "402 entries, hash chain intact" in verify.stdout  # the 2 seeded + one per decision returned

    from pricestream.commands.monitoring import audit_frame

    path = Path(env["PRICESTREAM_STATE_DIR"]) / "data" / "audit" / "decisions.jsonl"
    entries = [json.loads(line) for line in path.read_bytes().split(b"\n") if line]
    assert Counter(e["decision"].get("request_id") for e in entries[2:]) == Counter(returned)
    audited = audit_frame(path)
    assert len(audited) == 402  # the reader agrees with verify
    assert list(audited["hotel_id"].iloc[:2]) == ["h\u2028x", "h\u0085y"]
