"""A slow client cannot hold a request body open forever: a real uvicorn server, a raw socket."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn

from pricing.feature_source import MemoryFeatureSource
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from routing.router import TieredRouter
from serving.http import ServiceConfig, create_app

TIMEOUT_S = 0.5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server() -> Iterator[int]:
    scorer = Scorer(ScorerConfig(), rules=RuleSet.from_yaml("min_price: 50\nmax_price: 500\n"),
                    feature_source=MemoryFeatureSource(), light=None, heavy=None, router=TieredRouter())
    app = create_app(scorer, ServiceConfig(body_timeout_s=TIMEOUT_S, freeze_gc=False))
    port = _free_port()
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    while not srv.started:
        time.sleep(0.02)
    yield port
    srv.should_exit = True
    thread.join(10)


def _answer(sock: socket.socket) -> bytes:
    sock.settimeout(30)
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    return out


def test_a_body_that_stops_halfway_gets_a_408_naming_the_body_and_the_connection_is_closed(server: int) -> None:
    with socket.create_connection(("127.0.0.1", server)) as sock:
        sock.sendall(b"POST /v1/price HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 200\r\n\r\n{\"hotel_id\": ")
        answer = _answer(sock)  # the server closes: recv returns b"" instead of waiting for our 200 bytes
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b'"field":"<body>"' in body.replace(b" ", b"") and b"within 0.5 s" in body


def test_a_whole_body_sent_in_time_is_priced(server: int) -> None:
    body = b'{"hotel_id": "h1", "room_type": "std", "stay_date": "2030-12-24"}'
    with socket.create_connection(("127.0.0.1", server)) as sock:
        sock.sendall(b"POST /v1/price HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
                     + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert b'"tier":"rules"' in answer.replace(b" ", b"")
