"""``pricestream autoscale`` on a real Prometheus exposition: rate and lag read, decisions printed with reasons."""

from __future__ import annotations

import socket
import threading

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server
from typer.testing import CliRunner

from pricestream.cli import app


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_command_reads_rate_and_lag_and_explains_each_decision() -> None:
    registry = CollectorRegistry()
    decisions = Counter("pricestream_decisions_total", "decisions", ["tier"], registry=registry)
    lag = Gauge("pricestream_stream_consumer_lag", "lag", ["service", "topic"], registry=registry)
    lag.labels(service="serve-stream", topic="pricing.requests").set(30_000.0)  # 500 req/s to drain in 60 s
    port = _port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    stop = threading.Event()

    def traffic() -> None:  # ~2,000 decisions per second
        while not stop.wait(0.01):
            decisions.labels(tier="light").inc(20)

    pump = threading.Thread(target=traffic, daemon=True)
    pump.start()
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        result = CliRunner().invoke(app, ["autoscale", "--target", f"light={url}", "--target", f"heavy={url}",
                                          "--steps", "3", "--interval", "0.3", "--replicas", "light=2"])
    finally:
        stop.set()
        pump.join()
        server.shutdown()
        thread.join()
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any(line.startswith("light: first sample") for line in lines)
    light = [line for line in lines if line.startswith("light: out")]
    assert light, result.output  # ~2,500 req/s of load (rate + lag to drain) is far beyond 2 replicas of 100
    assert "needs" in light[0] and "-> 16" in light[0]  # capped at the light tier's ceiling
    assert all("hold at 2: a fixed tier" in line for line in lines if line.startswith("heavy: hold"))


def test_bad_targets_are_refused_naming_the_option() -> None:
    result = CliRunner().invoke(app, ["autoscale", "--target", "nowhere", "--steps", "1"])
    assert result.exit_code != 0 and "--target: got 'nowhere', expected TIER=VALUE" in result.output
    result = CliRunner().invoke(app, ["autoscale", "--target", "gpu=http://x/metrics", "--steps", "1"])
    assert result.exit_code != 0 and "tiers ['gpu'] unknown" in result.output
    result = CliRunner().invoke(app, ["autoscale", "--target", f"light=http://127.0.0.1:{_port()}/metrics",
                                      "--steps", "1", "--interval", "0.1"])
    assert result.exit_code == 0 and "light: hold, metrics" in result.output and "no answer" in result.output
