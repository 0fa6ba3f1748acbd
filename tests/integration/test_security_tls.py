"""TLS on a secure stack's Kafka listener: SASL_SSL with a certificate from settings.

A real Kafka broker started by ``infra.kafka`` with ``kafka_tls_cert``/``kafka_tls_key`` (a
self-signed certificate for 127.0.0.1 made here with ``cryptography``). A client that trusts the
certificate logs in and produces; one without the CA, or speaking SASL_PLAINTEXT, is refused.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pydantic import SecretStr

from infra import kafka, kafka_security
from infra.config import StackConfig
from tests.integration._http_serve import free_port

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
