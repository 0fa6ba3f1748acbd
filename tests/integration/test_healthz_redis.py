"""``/healthz`` of a real ``pricestream serve`` tells the truth about Redis, and no answer or log leaks a password.

Each test runs its own redis-server on its own port (never the session stack's), which it
stops and restarts.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from infra.config import StackConfig
from tests.integration._http_serve import RedisServer, free_port, serve, serve_log, strict_json

pytestmark = pytest.mark.integration

RECOVERY_WAIT_S = 60.0
"""Bound on waiting for /healthz to see Redis back (a reconnect); a bound on waiting, not an assertion."""

BODY = {"hotel_id": "h1", "room_type": "std", "stay_date": "2026-12-24", "nights": 2,
        "event_time": "2026-12-01T09:00:00Z"}


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(free_port(), tmp_path)
    server.start()
    yield server
    server.stop()


def _health(base: str) -> tuple[int, dict[str, object]]:
    response = httpx.get(f"{base}/healthz", timeout=30.0)
    return response.status_code, strict_json(response.content)


def test_healthz_is_503_naming_redis_while_it_is_down_and_200_after(
    stack: StackConfig, redis_server: RedisServer, tmp_path: Path
) -> None:
    url = f"redis://127.0.0.1:{redis_server.port}/0"
    with serve(stack, tmp_path, PRICESTREAM_REDIS_URL=url) as base:
        status, body = _health(base)
        assert (status, body["status"], body.get("reason")) == (200, "ok", None)

        redis_server.stop()
        status, body = _health(base)
        assert (status, body["status"]) == (503, "degraded")
        reason = str(body["reason"])
        assert reason.startswith("redis: ") and f"127.0.0.1:{redis_server.port}" in reason
        decision = httpx.post(f"{base}/v1/price", json=BODY, timeout=30.0).json()  # still priced, by the rules
        assert (decision["tier"], decision["degraded"]) == ("rules", True)
        assert decision["degraded_reason"].startswith("feature_store_unavailable")

        redis_server.start()
        deadline = time.monotonic() + RECOVERY_WAIT_S
        while (status := _health(base)[0]) != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        status, body = _health(base)
        assert (status, body["status"], body.get("reason")) == (200, "ok", None)


def test_a_password_in_the_redis_url_never_reaches_answers_or_logs(stack: StackConfig, tmp_path: Path) -> None:
    secret = "s3cret-in-url-7f1c"
    server = RedisServer(free_port(), tmp_path, password="another-password")  # so the URL's credentials fail
    server.start()
    try:
        url = f"redis://app:{secret}@127.0.0.1:{server.port}/0"
        with serve(stack, tmp_path, PRICESTREAM_REDIS_URL=url) as base:
            status, body = _health(base)
            reason = str(body["reason"])
            assert (status, body["status"]) == (503, "degraded")
            assert reason.startswith("redis: ") and secret not in reason
            assert f"redis://app:***@127.0.0.1:{server.port}/0" in reason  # the address stays, the password goes
            decision = httpx.post(f"{base}/v1/price", json=BODY, timeout=30.0)
            assert decision.status_code == 200
            assert decision.json()["degraded"] is True
            assert secret not in decision.text
            assert secret not in httpx.get(f"{base}/metrics", timeout=30.0).text
        assert secret not in serve_log(tmp_path)
    finally:
        server.stop()
