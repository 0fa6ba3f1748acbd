"""What an operator sees of a runtime process: Prometheus metrics, ``/healthz`` and ``/metrics``.

``GET /healthz`` answers ``200 {"status": "ok", ...}`` when every dependency is up and
``503 {"status": "degraded", "down": ["redis"], ...}`` naming each one that is not (Kafka, and the
step's own: Redis for the online writer, the output directory for the offline writer, ...).
``GET /metrics`` is the Prometheus text format of the process's registry. A service may add pages of its
own (the monitor's live dashboard at ``/dashboard``): each a path and a function that returns the HTML.

Example:
    >>> import json, urllib.request
    >>> from prometheus_client import CollectorRegistry
    >>> server = OpsServer("127.0.0.1", 0, registry=CollectorRegistry(), checks=lambda: {"redis": "down: refused"})
    >>> try:
    ...     urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz")
    ... except urllib.error.HTTPError as exc:
    ...     code, body = exc.code, json.loads(exc.read())
    >>> body["status"], body["down"], code
    ('degraded', ['redis'], 503)
    >>> server.close()
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

Checks = Callable[[], dict[str, str | None]]
Page = Callable[[], bytes]


class RuntimeMetrics:
    """The runtime's Prometheus series (label ``service``; ``topic`` is logical)."""

    def __init__(self, registry: CollectorRegistry, service: str) -> None:
        self.service = service
        self.records = Counter("pricestream_stream_records", "Input records consumed", ["service", "topic"],
                               registry=registry)
        self.dead_letters = Counter("pricestream_stream_dead_letters", "Input records sent to the DLQ",
                                    ["service", "topic"], registry=registry)
        self.outputs = Counter("pricestream_stream_outputs", "Records produced", ["service", "topic"],
                               registry=registry)
        self.commits = Counter("pricestream_stream_commits", "Offset commits (or transactions)", ["service"],
                               registry=registry)
        self.lag = Gauge("pricestream_stream_consumer_lag", "Records left to read", ["service", "topic"],
                         registry=registry)
        self.batch_seconds = Histogram("pricestream_stream_batch_seconds", "Wall time of one batch", ["service"],
                                       registry=registry)
        self.up = Gauge("pricestream_stream_healthy", "1 when every dependency answered the last health check",
                        ["service"], registry=registry)


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's signature
        """No access log on stderr (the service logs JSON lines)."""


class OpsServer:
    """``/healthz`` and ``/metrics`` on ``host:port`` in a daemon thread (port 0: any free port)."""

    def __init__(self, host: str, port: int, *, registry: CollectorRegistry, checks: Checks,
                 info: Callable[[], dict[str, Any]] | None = None, pages: Mapping[str, Page] | None = None) -> None:
        self._metrics = make_wsgi_app(registry)
        self._pages = dict(pages or {})
        self._checks = checks
        self._info = info or dict
        self._server = make_server(host, port, self._app, ThreadingWSGIServer, handler_class=_Quiet)
        self.port = int(self._server.server_port)
        self._thread = threading.Thread(target=self._server.serve_forever, name="ops-http", daemon=True)
        self._thread.start()

    def health(self) -> tuple[bool, dict[str, Any]]:
        deps = self._checks()
        down = sorted(name for name, problem in deps.items() if problem is not None)
        body = {"status": "degraded" if down else "ok", "down": down,
                "dependencies": {k: v or "ok" for k, v in sorted(deps.items())}, **self._info()}
        return not down, body

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            metrics: Iterable[bytes] = self._metrics(environ, start_response)  # prometheus_client is untyped here
            return metrics
        if path in ("/healthz", "/health"):
            ok, body = self.health()
            data = json.dumps(body, default=str).encode()
            start_response("200 OK" if ok else "503 Service Unavailable",
                           [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
            return [data]
        if path in self._pages:
            page = self._pages[path]()
            start_response("200 OK", [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(page))),
                                      ("Cache-Control", "no-store")])
            return [page]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [f"not found: try {', '.join(['/healthz', '/metrics', *self._pages])}\n".encode()]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
