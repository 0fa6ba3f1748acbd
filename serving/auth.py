"""API keys (hashed at rest, rotated without restart) and per-client rate limits for the HTTP API.

A key is ``psk_<id>.<secret>``: ``id`` is public (it names the key in ``pricestream keys list``
and in logs), ``secret`` is 256 random bits. The keys file holds only ``sha256(key)``: a
stolen file does not give a usable key, and since keys are random rather than chosen, a plain
hash (no slow KDF) is enough. A server re-reads the file when it changes (checked at most
every :data:`RECHECK_S`), so an added key works, and a revoked one gets 401, within a second.

Rate limits are per client (the key's id; the peer address when auth is off), with a moving
window from the ``limits`` library; a refused request gets 429 and ``Retry-After``.

Example:
    >>> import tempfile, pathlib
    >>> store = KeyStore(pathlib.Path(tempfile.mkdtemp()) / "keys.json")
    >>> key = store.add("checkout")
    >>> ring = KeyRing(store.path)
    >>> ring.client(key), ring.client(key + "x"), ring.client(None)
    ('checkout', None, None)
    >>> store.revoke(key_id(key)) and ring.reload() and ring.client(key) is None
    True
    >>> auth_required("auto", "127.0.0.1"), auth_required("auto", "0.0.0.0")
    (False, True)
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import math
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from limits import RateLimitItem, parse_many
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter
from prometheus_client import CollectorRegistry, Counter
from starlette.types import ASGIApp, Receive, Scope, Send

from pricing.errors import PricingError
from pricing.metrics import registry_counter

RECHECK_S = 0.2
"""How often a server looks at the keys file's identity (stat): well inside the 1 s revocation promise."""

PREFIX = "psk_"

_CLIENT = re.compile(r"[A-Za-z0-9._-]{1,64}")

SecurityMode = Literal["auto", "on", "off"]
"""``auto``: keys and rate limits on unless the API binds loopback only."""


class AuthError(PricingError, ValueError):
    """A keys file or a security setting cannot be used (names the field, value and expectation)."""


def auth_required(mode: SecurityMode, host: str) -> bool:
    """Whether the API must check keys: always for ``on``, beyond loopback for ``auto``.

    Raises:
        AuthError: ``off`` with a bind beyond loopback (a reachable API without keys).
    """
    loopback = _is_loopback(host)
    if mode == "off" and not loopback:
        msg = (f"http_security: got 'off' with http_host {host!r}, expected 'on' or 'auto' for a bind beyond "
               "loopback (an API reachable from other hosts must check keys)")
        raise AuthError(msg)
    return mode == "on" or (mode == "auto" and not loopback)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def digest(key: str) -> str:
    """What the keys file stores of a key."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def key_id(key: str) -> str:
    """The public id of a key (``psk_<id>.<secret>``); empty when it is not shaped like one."""
    if not key.startswith(PREFIX) or "." not in key:
        return ""
    return key[len(PREFIX):].split(".", 1)[0]


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """One key of the keys file (never the key itself).

    Attributes:
        id: public id. client: who holds it (the rate-limit identity). sha256: hash of the key.
        created: ISO-8601. revoked: ISO-8601 of revocation, None while valid.
    """

    id: str
    client: str
    sha256: str
    created: str
    revoked: str | None = None


class KeyStore:
    """The keys file: add, revoke, list (``pricestream keys ...``). Writes are atomic, mode 0600."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def records(self) -> list[KeyRecord]:
        """Every key ever added (revoked ones too), oldest first; none when the file is absent."""
        return load_records(self.path)

    def add(self, client: str) -> str:
        """Create a key for ``client`` and return it (the only time it is visible)."""
        if not _CLIENT.fullmatch(client):
            msg = f"client: got {client!r}, expected 1-64 ASCII letters, digits, '-', '_' or '.'"
            raise AuthError(msg)
        new_id = secrets.token_hex(6)
        key = f"{PREFIX}{new_id}.{secrets.token_urlsafe(32)}"
        now = datetime.now(tz=UTC).isoformat(timespec="seconds")
        self._write([*self.records(), KeyRecord(new_id, client, digest(key), now)])
        return key

    def revoke(self, ident: str) -> bool:
        """Revoke the key with id ``ident`` (or every key of the client ``ident``); True if one was revoked."""
        now = datetime.now(tz=UTC).isoformat(timespec="seconds")
        records, hit = [], False
        for record in self.records():
            if record.revoked is None and ident in (record.id, record.client):
                record, hit = KeyRecord(record.id, record.client, record.sha256, record.created, now), True
            records.append(record)
        if hit:
            self._write(records)
        return hit

    def _write(self, records: list[KeyRecord]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"keys": [_as_dict(r) for r in records]}, handle, indent=1)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)


def _as_dict(record: KeyRecord) -> dict[str, Any]:
    return {"id": record.id, "client": record.client, "sha256": record.sha256, "created": record.created,
            "revoked": record.revoked}


def load_records(path: Path) -> list[KeyRecord]:
    """The records of a keys file.

    Raises:
        AuthError: the file is not ``{"keys": [{id, client, sha256, created, revoked}]}``.
    """
    if not path.exists():
        return []
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return [KeyRecord(str(r["id"]), str(r["client"]), str(r["sha256"]), str(r["created"]),
                          None if r.get("revoked") is None else str(r["revoked"])) for r in raw["keys"]]
    except (ValueError, KeyError, TypeError) as exc:
        msg = f"keys file {str(path)!r}: unreadable ({type(exc).__name__}); expected {{\"keys\": [...]}} as written " \
              "by `pricestream keys add`"
        raise AuthError(msg) from exc


class KeyRing:
    """The valid keys of a keys file, re-read when the file changes (a server's view).

    A keys file that becomes unreadable keeps the last good view (and ``error`` says why), so a
    half-edited file never opens the API nor locks every client out.
    """

    def __init__(self, path: str | Path, *, recheck_s: float = RECHECK_S) -> None:
        self.path = Path(path)
        self._recheck = recheck_s
        self._lock = threading.Lock()
        self._by_id: dict[str, KeyRecord] = {}
        self._identity: tuple[int, int, int] | None = None
        self._checked = float("-inf")
        self.error = ""
        self.reload()

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def reload(self) -> bool:
        """Re-read the file now if it changed; True when the view changed."""
        with self._lock:
            self._checked = time.monotonic()
            identity = self._stat()
            if identity == self._identity:
                return False
            try:
                records = load_records(self.path)
            except AuthError as exc:
                self.error = str(exc)
                return False
            self._identity, self.error = identity, ""
            self._by_id = {r.id: r for r in records if r.revoked is None}
            return True

    def client(self, key: str | None) -> str | None:
        """The client holding ``key`` when it is valid and not revoked, else None."""
        if time.monotonic() - self._checked >= self._recheck:
            self.reload()
        if not key:
            return None
        record = self._by_id.get(key_id(key))
        if record is None or not hmac.compare_digest(record.sha256, digest(key)):
            return None
        return record.client


class RateLimiter:
    """Per-client moving-window limits (``"100/second;2000/minute"``, the ``limits`` notation).

    Example:
        >>> limiter = RateLimiter("2/second")
        >>> [limiter.retry_after("a") for _ in range(3)][:2], limiter.retry_after("b")
        ([None, None], None)
        >>> 0 < limiter.retry_after("a") <= 1
        True
    """

    def __init__(self, spec: str) -> None:
        try:
            self.items: list[RateLimitItem] = parse_many(spec)
        except ValueError as exc:
            msg = f"http_rate_limit: got {spec!r}, expected limits like '100/second' or '100/second;2000/minute'"
            raise AuthError(msg) from exc
        self._limiter = MovingWindowRateLimiter(MemoryStorage())

    def retry_after(self, client: str) -> int | None:
        """Count one request of ``client``; None when allowed, else the seconds to wait (>= 1)."""
        for item in self.items:
            if not self._limiter.hit(item, client):
                reset, _ = self._limiter.get_window_stats(item, client)
                return max(1, math.ceil(reset - time.time()))
        return None


def refused_counter(registry: CollectorRegistry) -> Counter:
    """``pricestream_http_refused_total{reason}`` on ``registry`` (created once per registry)."""
    return registry_counter(registry, "pricestream_http_refused_total", "Requests refused before pricing, by reason.",
                            ["reason"])


def _bearer(headers: dict[bytes, bytes]) -> str | None:
    value = headers.get(b"authorization")
    if value is not None:
        scheme, _, token = value.decode("latin-1").partition(" ")
        return token.strip() if scheme.lower() == "bearer" else None
    api_key = headers.get(b"x-api-key")
    return None if api_key is None else api_key.decode("latin-1").strip()


def refusal(status: int, code: str, field: str, value: str, expected: str) -> bytes:
    """A 401/429 body in the API's error shape (``error``, ``message``, ``errors``); never echoes a key."""
    message = f"field {field!r}: got {value!r}, expected {expected}"
    return json.dumps({"error": code, "message": message,
                       "errors": [{"field": field, "value": value, "expected": expected, "message": message}]}
                      ).encode()


class SecurityGate:
    """Pure ASGI middleware in front of ``/v1/``: API keys (401) and per-client rate limits (429).

    Args:
        app: the wrapped app.
        keys: the key ring (None: no key needed; the peer address is the rate-limit identity).
        limiter: the per-client limits (None: unlimited).
        refused: a counter with a ``reason`` label (``unauthenticated``, ``rate_limited``).
    """

    def __init__(self, app: ASGIApp, *, keys: KeyRing | None, limiter: RateLimiter | None, refused: Counter) -> None:
        self.app, self.keys, self.limiter, self.refused = app, keys, limiter, refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        client: str | None = None
        if self.keys is not None:
            token = _bearer(headers)
            client = self.keys.client(token)
            if client is None:
                self.refused.labels(reason="unauthenticated").inc()
                got = "<none>" if not token else f"<unknown or revoked key {key_id(token) or '?'}>"
                body = refusal(401, "unauthorized", "Authorization", got,
                               "a valid API key as 'Authorization: Bearer <key>' or 'X-API-Key: <key>'")
                await _answer(send, 401, body, [(b"www-authenticate", b'Bearer realm="pricestream"')])
                return
        if self.limiter is not None:
            peer = scope.get("client")
            ident = client if client is not None else (peer[0] if peer else "unknown")
            wait = self.limiter.retry_after(ident)
            if wait is not None:
                self.refused.labels(reason="rate_limited").inc()
                limits = ";".join(str(item) for item in self.limiter.items)
                body = refusal(429, "rate_limited", "<client>", ident, f"at most {limits} per client")
                await _answer(send, 429, body, [(b"retry-after", str(wait).encode())])
                return
        await self.app(scope, receive, send)


async def _answer(send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]]) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
