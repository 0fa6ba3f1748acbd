"""TLS on a secure stack's Kafka listener (SASL_SSL) and on ``serve``'s HTTP port, with certificates from settings.

A real Kafka broker started by ``infra.kafka`` with ``kafka_tls_cert``/``kafka_tls_key`` (a
self-signed certificate for 127.0.0.1 made here with ``cryptography``). A client that trusts the
certificate logs in and produces; one without the CA, or speaking SASL_PLAINTEXT, is refused.
A real ``pricestream serve`` with ``PRICESTREAM_HTTP_TLS_CERT``/``_KEY`` prices over HTTPS for a client
with the CA; plain HTTP on that port and a client without the CA get no answer. A secure stack's
redis-server with ``redis_tls_cert`` answers only TLS clients that trust its CA (its ACLs unchanged).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import secrets
import signal
import ssl
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import redis
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pydantic import SecretStr

from infra import kafka, kafka_security, redis_server
from infra.config import StackConfig
from tests.integration._http_serve import PRICESTREAM, START_WAIT_S, free_port
from tests.integration.serve_helpers import STAY_DATE

pytestmark = pytest.mark.integration

ATTEMPTS = 3


def _self_signed(directory: Path, host: str) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = dt.datetime.now(tz=dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "broker.pem", directory / "broker.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    return cert_path, key_path


@pytest.fixture(scope="module")
def tls(stack_config: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackConfig]:
    state = tmp_path_factory.mktemp("tls-kafka")
    cert, key = _self_signed(state, stack_config.host)
    config = stack_config.model_copy(update={
        "state_dir": state, "kafka_port": free_port(), "kafka_controller_port": free_port(), "kafka_heap": "384m",
        "secure": True, "kafka_tls_cert": cert, "kafka_tls_key": key,
        "kafka_passwords": {p: SecretStr(secrets.token_urlsafe(16)) for p in kafka_security.PRINCIPALS}})
    kafka.start(config)
    admin = AdminClient(kafka_security.client_config(config, "admin"))
    for future in admin.create_topics([NewTopic("behaviour.events", 1, 1)]).values():
        future.result(timeout=60)
    yield config
    kafka.stop(config)


def _connects(conf: dict[str, Any]) -> bool:
    admin = AdminClient(conf | {"log_level": 0, "socket.connection.setup.timeout.ms": 2000})
    try:
        return bool(admin.list_topics(timeout=3.0).brokers)
    except KafkaException:
        return False


def test_the_listener_speaks_sasl_ssl_and_a_client_with_the_ca_produces(tls: StackConfig) -> None:
    props = (tls.state_dir / "kafka" / "server.properties").read_text()
    assert f"listeners=SASL_SSL://{tls.host}:{tls.kafka_port}" in props
    assert (tls.state_dir / "kafka" / "tls" / "broker.p12").stat().st_mode & 0o077 == 0
    conf = kafka_security.client_config(tls, "producer")
    assert (conf["security.protocol"], conf["ssl.ca.location"]) == ("SASL_SSL", str(tls.kafka_tls_cert))
    errors: list[Any] = []
    producer = Producer(conf | {"log_level": 0, "message.timeout.ms": 20_000})
    producer.produce("behaviour.events", b"{}", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(30)
    assert errors == [None]


def test_clients_without_the_ca_or_without_tls_are_refused(tls: StackConfig) -> None:
    with_ca = kafka_security.client_config(tls, "scorer")
    no_ca = {k: v for k, v in with_ca.items() if k != "ssl.ca.location"}  # the system CA store does not know it
    plain = with_ca | {"security.protocol": "SASL_PLAINTEXT"}
    assert _connects(with_ca)
    assert [_connects(no_ca) for _ in range(ATTEMPTS)] == [False] * ATTEMPTS
    assert [_connects(plain) for _ in range(ATTEMPTS)] == [False] * ATTEMPTS


@pytest.fixture(scope="module")
def https_serve(stack: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A real ``pricestream serve`` with ``PRICESTREAM_HTTP_TLS_CERT``/``_KEY``: its base URL and the CA."""
    state = tmp_path_factory.mktemp("tls-http")
    cert, key = _self_signed(state, "127.0.0.1")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRICESTREAM_")} | {
        "PRICESTREAM_STATE_DIR": str(state), "PRICESTREAM_KAFKA_BOOTSTRAP": stack.kafka_bootstrap,
        "PRICESTREAM_REDIS_URL": stack.redis_url, "PRICESTREAM_TOPIC_PREFIX": f"t{uuid.uuid4().hex[:10]}-",
        "PRICESTREAM_HTTP_PORT": str(port), "PRICESTREAM_BOOTSTRAP_ROWS": "200", "PRICESTREAM_AUDIT": "false",
        "PRICESTREAM_HTTP_TLS_CERT": str(cert), "PRICESTREAM_HTTP_TLS_KEY": str(key)}
    log = state / "serve.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen([PRICESTREAM, "serve"], env=env, stdout=sink, stderr=subprocess.STDOUT)
        base = f"https://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + START_WAIT_S
            while not _answers(f"{base}/openapi.json", cert):
                assert proc.poll() is None, log.read_text(errors="replace")[-2000:]
                assert time.monotonic() < deadline, log.read_text(errors="replace")[-2000:]
                time.sleep(0.3)
            yield base, cert
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    assert "serving on https://127.0.0.1" in log.read_text(errors="replace")


def _answers(url: str, ca: Path) -> bool:
    try:
        return httpx.get(url, verify=ssl.create_default_context(cafile=str(ca)), timeout=2.0).status_code == 200
    except httpx.TransportError:
        return False


def test_serve_speaks_https_to_a_client_with_the_ca_and_refuses_plain_http(https_serve: tuple[str, Path]) -> None:
    base, ca = https_serve
    trusted = ssl.create_default_context(cafile=str(ca))
    body = {"hotel_id": "h1", "room_type": "std", "stay_date": STAY_DATE, "nights": 2}
    priced = httpx.post(f"{base}/v1/price", json=body, verify=trusted, timeout=30.0)
    assert priced.status_code == 200, priced.text
    assert priced.json()["price"] > 0
    plain = base.replace("https://", "http://")
    refused = 0
    for _ in range(ATTEMPTS):  # a plain-text request on the TLS port gets no HTTP answer
        try:
            httpx.get(f"{plain}/openapi.json", timeout=5.0)
        except httpx.TransportError:
            refused += 1
    assert refused == ATTEMPTS
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):  # the system CAs do not know it
        httpx.get(f"{base}/openapi.json", timeout=5.0)


@pytest.fixture(scope="module")
def tls_redis(stack_config: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackConfig]:
    """A secure stack's redis-server (ACL users) started by ``infra.redis_server`` with ``redis_tls_cert``/``_key``."""
    state = tmp_path_factory.mktemp("tls-redis")
    cert, key = _self_signed(state, stack_config.host)
    config = stack_config.model_copy(update={
        "state_dir": state, "redis_port": free_port(), "secure": True, "redis_tls_cert": cert, "redis_tls_key": key,
        "redis_passwords": {r: SecretStr(secrets.token_urlsafe(16)) for r in redis_server.ROLES}})
    redis_server.start(config)
    yield config
    redis_server.stop(config)


def _redis_answers(url: str) -> bool:
    client = redis.Redis.from_url(url, socket_connect_timeout=2.0, socket_timeout=2.0)
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False
    finally:
        client.close()


def test_redis_speaks_tls_only_to_clients_with_the_ca(tls_redis: StackConfig) -> None:
    scorer = redis_server.role_url(tls_redis, "scorer")
    assert scorer.startswith("rediss://scorer:") and f"ssl_ca_certs={quote(str(tls_redis.redis_tls_cert), safe='')}" \
        in scorer
    client = redis.Redis.from_url(scorer, socket_timeout=5.0)
    assert client.hget(f"k:{tls_redis.feature_project}", "f") is None  # logged in over TLS, the ACL still applies
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.set(f"k:{tls_redis.feature_project}", "x")
    client.close()
    plain = scorer.replace("rediss://", "redis://", 1).split("?", 1)[0]
    no_ca = scorer.split("?", 1)[0]  # TLS, but the system CA store does not know the certificate
    assert [_redis_answers(plain) for _ in range(ATTEMPTS)] == [False] * ATTEMPTS
    assert [_redis_answers(no_ca) for _ in range(ATTEMPTS)] == [False] * ATTEMPTS
    assert _redis_answers(redis_server.role_url(tls_redis, "admin"))
