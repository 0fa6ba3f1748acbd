"""HTTP API security on a real ``pricestream serve``: API keys, rotation without restart, rate limits, ops port.

Keys are made and revoked with the ``pricestream keys`` command, as an operator would; the
server is never restarted between the steps.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from infra.config import StackConfig
from tests.integration._http_serve import PRICESTREAM, free_port, serve
from tests.integration.serve_helpers import STAY_DATE

pytestmark = pytest.mark.integration

BODY = {"hotel_id": "h1", "room_type": "std", "stay_date": STAY_DATE, "nights": 2}
PER_MINUTE = 30
"""The rate limit of these tests: per minute, so a burst's refusals do not depend on how fast the host is."""
REVOCATION_S = 1.0
"""The promise under test: a revoked key is refused within one second (the server re-reads the file)."""


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("security-http")


def _keys(state_dir: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRICESTREAM_")}
    env["PRICESTREAM_STATE_DIR"] = str(state_dir)
    done = subprocess.run([PRICESTREAM, "keys", *args], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="module")
def ops_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def base_url(stack: StackConfig, state_dir: Path, ops_port: int) -> Iterator[str]:
    _keys(state_dir, "add", "bootstrap")  # the keys file exists before the server starts
    with serve(stack, state_dir, PRICESTREAM_HTTP_SECURITY="on", PRICESTREAM_HTTP_RATE_LIMIT=f"{PER_MINUTE}/minute",
               PRICESTREAM_HTTP_OPS_PORT=str(ops_port)) as url:
        yield url


def _price(base_url: str, key: str | None) -> httpx.Response:
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    return httpx.post(f"{base_url}/v1/price", json=BODY, headers=headers, timeout=30.0)


def test_no_key_and_a_wrong_key_get_401_naming_the_header(base_url: str) -> None:
    missing = _price(base_url, None)
    assert missing.status_code == 401 and missing.headers["www-authenticate"].startswith("Bearer")
    assert missing.json()["errors"][0]["field"] == "Authorization"
    forged = _price(base_url, "psk_000000000000.not-a-real-secret")
    assert forged.status_code == 401 and "not-a-real-secret" not in forged.text


def test_a_key_added_while_serving_works_and_is_refused_after_revocation(base_url: str, state_dir: Path) -> None:
    key = _keys(state_dir, "add", "checkout")
    time.sleep(REVOCATION_S)  # the server notices the new file within RECHECK_S
    served = _price(base_url, key)
    assert served.status_code == 200 and served.json()["price"] > 0
    listed = _keys(state_dir, "list")
    assert "checkout" in listed and key.split(".", 1)[1] not in listed  # the list never shows a secret
    stored = (state_dir / "secrets" / "api-keys.json").read_text()
    assert key not in stored and key.split(".", 1)[1] not in stored  # hashed at rest
    _keys(state_dir, "revoke", key.split(".", 1)[0].removeprefix("psk_"))
    time.sleep(REVOCATION_S)
    revoked = _price(base_url, key)
    assert revoked.status_code == 401 and "revoked" in revoked.json()["errors"][0]["value"]


def test_a_burst_above_the_limit_gets_429_and_a_client_under_it_none(base_url: str, state_dir: Path) -> None:
    burst_key, calm_key = _keys(state_dir, "add", "burst"), _keys(state_dir, "add", "calm")
    time.sleep(REVOCATION_S)
    burst = [_price(base_url, burst_key) for _ in range(PER_MINUTE + 10)]
    statuses = [r.status_code for r in burst]
    assert statuses[:PER_MINUTE] == [200] * PER_MINUTE  # the limit counts this client alone
    assert statuses[PER_MINUTE:] == [429] * 10
    retry = int(burst[-1].headers["retry-after"])
    assert 1 <= retry <= 60
    calm = [_price(base_url, calm_key).status_code for _ in range(PER_MINUTE // 2)]
    assert calm == [200] * (PER_MINUTE // 2)


def test_healthz_and_metrics_live_on_the_ops_port(base_url: str, ops_port: int) -> None:
    ops = f"http://127.0.0.1:{ops_port}"
    deadline = time.monotonic() + 30.0  # the ops server starts beside the pricing one
    while True:
        try:
            health = httpx.get(f"{ops}/healthz", timeout=10.0)
            break
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert health.status_code == 200 and health.json()["status"] in ("ok", "rules_only")
    metrics = httpx.get(f"{ops}/metrics", timeout=10.0).text
    assert 'pricestream_http_refused_total{reason="unauthenticated"}' in metrics
    assert httpx.get(f"{base_url}/healthz", timeout=10.0).status_code == 404
    assert httpx.post(f"{ops}/v1/price", json=BODY, timeout=10.0).status_code == 404
