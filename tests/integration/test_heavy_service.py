"""The heavy tier as its own service: a ``pricestream serve`` with ``heavy_tier=remote`` and a ``heavy serve``.

Both are real OS processes. With the heavy service up, requests routed heavy are priced by it;
frozen (SIGSTOP: it accepts connections and never answers) and then stopped (SIGTERM), the
scorer keeps the light model's price, flagged degraded with the reason, and every answer is a
200. The router's thresholds send every request to the heavy tier.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from infra.config import StackConfig
from pricestream.settings import Settings
from routing.calibration import Thresholds
from routing.threshold_state import ThresholdStore
from tests.integration.serve_helpers import PRICESTREAM, Server, request_body, seed_models, stack_env, start_serve
from tests.integration.test_control_plane import _port

pytestmark = pytest.mark.integration

HEAVY_DEADLINE_MS = 2000.0
"""The scorer's wait for a heavy quote: no loaded host's real quote takes that long, a frozen service always does."""
READY_WAIT_S = 120.0


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_WAIT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-2000:]
        try:
            if httpx.get(f"{url}/healthz", timeout=2.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    raise AssertionError(log.read_text()[-2000:])


@pytest.fixture(scope="module")
def tiers(stack: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("heavy")
    heavy_port = _port()
    env = stack_env(stack, root / "state", PRICESTREAM_HEAVY_TIER="remote", PRICESTREAM_HEAVY_PORT=str(heavy_port),
                    PRICESTREAM_HEAVY_DEADLINE_MS=str(HEAVY_DEADLINE_MS), PRICESTREAM_HTTP_PORT=str(_port()),
                    PRICESTREAM_DEADLINE_MS="8000")
    seed_models(env)
    ThresholdStore(Settings(state_dir=Path(env["PRICESTREAM_STATE_DIR"])).router_thresholds()).publish(
        Thresholds(rules_below=0.0, heavy_above=0.0), at=datetime.now(tz=UTC), reason="every request heavy")
    log = root / "heavy.log"
    heavy = subprocess.Popen([PRICESTREAM, "heavy", "serve"], env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{heavy_port}"
    try:
        _wait_ready(url, heavy, log)
        server = start_serve(env, root / "serve.log")
        yield {"heavy": heavy, "heavy_url": url, "server": server}
    finally:
        for proc in (heavy, *([server.proc] if "server" in locals() else [])):
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
                proc.wait(60)


def _answers(server: Server, n: int) -> list[dict]:
    with httpx.Client(timeout=30.0) as client:
        out = []
        for i in range(n):
            r = client.post(f"{server.url}/v1/price", json=request_body(i))
            assert r.status_code == 200, r.text  # never a 5xx, whatever the heavy service does
            out.append(r.json())
        return out


def test_the_remote_heavy_tier_prices_and_a_frozen_or_stopped_one_falls_back_to_light_flagged(
    tiers: dict[str, Any],
) -> None:
    heavy, server = tiers["heavy"], tiers["server"]
    version = httpx.get(f"{tiers['heavy_url']}/healthz", timeout=10.0).json()["version"]
    up = _answers(server, 6)
    assert {(d["tier"], d["model_version"], d["degraded"]) for d in up} == {("heavy", version, False)}
    bad = httpx.post(f"{tiers['heavy_url']}/v1/quote", json={"request": {}, "features": {}, "floor": -1, "ceiling": 9})
    assert bad.status_code == 422
    fields = {e["field"] for e in bad.json()["errors"]}
    assert "floor" in fields and any(f.startswith("request") for f in fields)

    heavy.send_signal(signal.SIGSTOP)  # accepts connections (the kernel does), never answers: a slow service
    try:
        frozen = _answers(server, 3)
    finally:
        heavy.send_signal(signal.SIGCONT)
    assert {(d["tier"], d["degraded"]) for d in frozen} == {("light", True)}
    assert all(f"missed its {HEAVY_DEADLINE_MS:g} ms deadline" in d["degraded_reason"] for d in frozen)
    light = httpx.get(f"{server.url}/healthz", timeout=10.0).json()["light"]["version"]
    assert {d["model_version"] for d in frozen} == {light}  # the light model's own price stands

    heavy.terminate()
    heavy.wait(60)
    stopped = _answers(server, 3)
    assert {(d["tier"], d["degraded"]) for d in stopped} == {("light", True)}
    assert all("unreachable" in d["degraded_reason"] for d in stopped)
    health = httpx.get(f"{server.url}/healthz", timeout=10.0)
    assert health.status_code == 200  # the light tier serves: the replica stays in rotation
