"""The monitor service's live dashboard: ``pricestream services run monitor`` serves it on its ops port while it
consumes, and a real browser (headless Chromium) renders it with every panel drawn and nothing logged as an error."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from events.admin import create_topics
from events.config import KafkaConfig
from events.models import PricingDecision
from events.producer import Producer
from tests.integration import _browser
from tests.integration._http_serve import free_port

pytestmark = pytest.mark.integration

EXE = str(Path(sys.executable).with_name("pricestream"))
T0 = datetime(2026, 3, 1, tzinfo=UTC)
DECISIONS = 400
WITHIN_S = 180.0  # a bound for "it rendered", not a performance figure


def _decision(i: int) -> PricingDecision:
    return PricingDecision(
        hotel_id=f"h{i % 3}", room_type="std", stay_date=date(2026, 6, 20), event_time=T0 + timedelta(minutes=i),
        request_id=uuid.uuid4(), price=100.0 + i % 11, tier=("rules", "light", "heavy")[i % 3],
        complexity=0.1 * (i % 10), latency_ms=1.0 + i % 5, expected_booking_prob=0.3,
        features={"occupancy": 0.5, "searches_7d": float(i % 40)},
    )


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback
        return bytes(response.read())


def test_the_monitor_serves_its_dashboard_live_and_a_browser_draws_it(kafka_config: KafkaConfig,
                                                                       tmp_path: Path) -> None:
    create_topics(kafka_config)
    port = free_port()
    env = {**os.environ, "PRICESTREAM_KAFKA_BOOTSTRAP": kafka_config.bootstrap_servers,
           "PRICESTREAM_TOPIC_PREFIX": kafka_config.topic_prefix, "PRICESTREAM_STATE_DIR": str(tmp_path / "state"),
           "PRICESTREAM_REPORTS_DIR": str(tmp_path / "reports")}
    with (tmp_path / "monitor.err").open("wb") as err:
        proc = subprocess.Popen([EXE, "services", "run", "monitor", "--ops-port", str(port), "--max-idle", "120"],  # noqa: S603
                                env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        waiting = _poll(f"http://127.0.0.1:{port}/dashboard", proc, lambda page: b"<html" in page)
        assert b"no decisions yet" in waiting and b'http-equiv="refresh"' in waiting
        with Producer(kafka_config, topic="pricing.decisions") as producer:
            for i in range(DECISIONS):
                producer.send(_decision(i))
            producer.flush()
        page = _poll(f"http://127.0.0.1:{port}/dashboard", proc, lambda page: b"<img" in page)
        assert b"no decisions yet" not in page and b'http-equiv="refresh"' in page
        rendered = _browser.render_url(f"http://127.0.0.1:{port}/dashboard")
        assert rendered.dom.count("<img") >= 4 and "data:image/png;base64," in rendered.dom
        assert not [line for line in rendered.console if "error" in line.lower()], rendered.console
        metrics = _get(f"http://127.0.0.1:{port}/metrics").decode()
        assert f'pricestream_stream_records_total{{service="monitor",topic="pricing.decisions"}} {DECISIONS}.0' \
            in metrics
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert proc.returncode == 0, (tmp_path / "monitor.err").read_text()[-3000:]


def _poll(url: str, proc: subprocess.Popen[bytes], done: Callable[[bytes], bool]) -> bytes:
    deadline = time.monotonic() + WITHIN_S
    last = b""
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the monitor service exited"
        try:
            last = _get(url)
        except OSError:
            last = b""
        if done(last):
            return last
        time.sleep(1.0)
    msg = f"{url} never showed what was expected; last: {last[:300]!r}"
    raise AssertionError(msg)
