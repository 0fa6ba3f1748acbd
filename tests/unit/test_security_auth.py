"""API keys and rate limits, pure (no server): hashing at rest, rotation, a broken keys file, the bind rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pricestream.settings import Settings
from serving.auth import AuthError, KeyRing, KeyStore, RateLimiter, auth_required, digest, key_id


def test_keys_are_stored_as_hashes_and_listed_without_secrets(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    key = store.add("checkout")
    raw = (tmp_path / "keys.json").read_text()
    assert key not in raw and digest(key) in raw
    assert (tmp_path / "keys.json").stat().st_mode & 0o077 == 0
    [record] = store.records()
    assert (record.id, record.client, record.revoked) == (key_id(key), "checkout", None)


def test_a_ring_follows_adds_and_revocations(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    first = store.add("a")
    ring = KeyRing(store.path, recheck_s=0.0)  # look at the file on every call
    second = store.add("b")
    assert (ring.client(first), ring.client(second)) == ("a", "b")
    assert store.revoke("a")
    assert ring.client(first) is None and ring.client(second) == "b"
    assert not store.revoke("a")  # nothing valid left under that name


def test_a_broken_keys_file_keeps_the_last_good_view(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    key = store.add("a")
    ring = KeyRing(store.path, recheck_s=0.0)
    store.path.write_text("{not json")
    assert ring.client(key) == "a" and "unreadable" in ring.error
    store.path.write_text(json.dumps({"keys": []}))
    assert ring.client(key) is None and ring.error == ""


def test_forged_keys_with_a_known_id_are_refused(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    key = store.add("a")
    ring = KeyRing(store.path)
    assert ring.client(f"psk_{key_id(key)}.guessed-secret") is None
    assert ring.client("not-a-key") is None


@pytest.mark.parametrize("client", ["", "a b", "x;y", "ünï"])
def test_a_bad_client_name_names_the_field(tmp_path: Path, client: str) -> None:
    with pytest.raises(AuthError, match="client: got"):
        KeyStore(tmp_path / "keys.json").add(client)


def test_security_is_on_beyond_loopback_and_cannot_be_switched_off_there() -> None:
    assert [auth_required("auto", h) for h in ("127.0.0.1", "::1", "localhost", "0.0.0.0", "10.1.2.3")] == [
        False, False, False, True, True]
    assert auth_required("on", "127.0.0.1")
    with pytest.raises(AuthError, match="http_security: got 'off' with http_host '0.0.0.0'"):
        auth_required("off", "0.0.0.0")
    service = Settings(http_host="0.0.0.0").http_service()
    assert service.keys_file is not None and service.rate_limit is not None
    assert Settings().http_service().keys_file is None  # the loopback dev default


def test_rate_limits_are_per_client_and_say_when_to_retry() -> None:
    limiter = RateLimiter("3/minute")
    assert [limiter.retry_after("a") for _ in range(3)] == [None, None, None]
    wait = limiter.retry_after("a")
    assert wait is not None and 1 <= wait <= 60
    assert limiter.retry_after("b") is None
    with pytest.raises(AuthError, match="http_rate_limit: got 'lots'"):
        RateLimiter("lots")


def test_https_needs_both_the_certificate_and_its_key(tmp_path: Path) -> None:
    from pydantic import ValidationError

    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    service = Settings(http_tls_cert=cert, http_tls_key=key).http_service()
    assert (service.scheme, service.tls_cert, service.tls_key) == ("https", cert, key)
    assert Settings().http_service().scheme == "http"
    with pytest.raises(ValidationError, match=r"tls_key: got None, expected the private key of tls_cert .*c\.pem"):
        Settings(http_tls_cert=cert).http_service()
    with pytest.raises(ValidationError, match=r"tls_cert: got None, expected the certificate of tls_key .*k\.pem"):
        Settings(http_tls_key=key).http_service()
