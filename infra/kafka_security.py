"""Kafka security of a secure stack: SASL/SCRAM-SHA-512, ``StandardAuthorizer``, one principal per service.

The broker listener speaks ``SASL_PLAINTEXT`` with SCRAM-SHA-512 (SCRAM credentials are
bootstrapped at ``kafka-storage format --add-scram``, KIP-900, so no credential ever needs
an unauthenticated window). The KRaft controller listener (loopback, broker to its own
controller) uses SASL PLAIN, as SCRAM cannot serve the controller quorum. The authorizer is
``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` with ``super.users=User:admin``
and no ``allow.everyone.if.no.acl.found``: a resource with no ACL is open to the admin only.

Principals and their least-privilege ACLs (:data:`GRANTS`, topic names with the stack's prefix):

* ``producer``: write ``behaviour.events``;
* ``scorer``: read ``features.v1`` and ``pricing.requests``, write ``pricing.decisions`` (and its
  DLQ); never ``training.examples``;
* ``trainer``: read ``training.examples``;
* ``auditor``: read ``audit.heads`` (the audit log's anchors), nothing else;

each with its consumer groups and transactional ids under a prefix named after it.

Example:
    >>> from pydantic import SecretStr
    >>> cfg = StackConfig(secure=True, kafka_passwords={p: SecretStr(p + "-pw") for p in PRINCIPALS})
    >>> conf = client_config(cfg, "scorer")
    >>> conf["security.protocol"], conf["sasl.mechanisms"], conf["sasl.username"]
    ('SASL_PLAINTEXT', 'SCRAM-SHA-512', 'scorer')
    >>> client_config(StackConfig(), "scorer")["bootstrap.servers"]
    '127.0.0.1:9092'
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infra import services
from infra.config import StackConfig
from infra.errors import StartError
from infra.services import Grant

if TYPE_CHECKING:
    from confluent_kafka.admin import AclBinding, AdminClient

PRINCIPALS: tuple[str, ...] = ("admin", *services.grants())
"""SCRAM users of a secure stack (``admin`` is the super user; the others are one per process of the service
table, :mod:`infra.services`, plus ``producer``, ``druid`` and ``auditor``, who reads the audit log's anchors for
``pricestream audit verify``)."""

MECHANISM = "SCRAM-SHA-512"

SHADED_JAAS_PACKAGE = "org.apache.flink.kafka.shaded.org.apache.kafka.common.security"
"""Where ``flink-sql-connector-kafka`` relocates the Kafka client's login modules: a JAAS line that
names the unshaded class fails in the job with ``ClassNotFoundException``."""


GRANTS: dict[str, Grant] = services.grants()
"""Least-privilege ACLs of each principal, from the service table (DESCRIBE comes with read and write). The scorer
never writes ``training.examples``; only the sampler does, and only the trainer reads it."""


def password(config: StackConfig, principal: str) -> str:
    """The SCRAM password of ``principal`` (a secret: never log it).

    Raises:
        StartError: no password is configured for it.
    """
    secret = config.kafka_passwords.get(principal)
    if secret is None or not secret.get_secret_value():
        msg = (f"kafka_passwords[{principal!r}]: got no password, expected one for a secure stack "
               f"(PRICESTREAM_KAFKA_PASSWORDS='{{\"{principal}\": \"...\"}}')")
        raise StartError(msg)
    return secret.get_secret_value()


def client_config(config: StackConfig, principal: str = "admin") -> dict[str, Any]:
    """The librdkafka settings of a client acting as ``principal`` (just the bootstrap when not secure)."""
    conf: dict[str, Any] = {"bootstrap.servers": config.kafka_bootstrap}
    if config.secure:
        conf.update({"security.protocol": protocol(config), "sasl.mechanisms": MECHANISM,
                     "sasl.username": principal, "sasl.password": password(config, principal)})
    if config.kafka_ca is not None:
        conf["ssl.ca.location"] = str(config.kafka_ca)
    return conf


def protocol(config: StackConfig) -> str:
    """The broker listener's security protocol: SASL_SSL with a certificate, else SASL_PLAINTEXT (or PLAINTEXT)."""
    if not config.secure:
        return "PLAINTEXT"
    return "SASL_SSL" if config.kafka_tls else "SASL_PLAINTEXT"


def _jaas(module: str, principal: str, secret: str, *, plain_users: bool = False) -> str:
    extra = f' user_{principal}="{secret}"' if plain_users else ""
    return f'org.apache.kafka.common.security.{module} required username="{principal}" password="{secret}"{extra};'


def listener_properties(config: StackConfig, *, keystore: tuple[Path, str] | None = None) -> list[str]:
    """``server.properties`` lines of the listeners: PLAINTEXT, or SASL/SCRAM (over TLS with ``keystore``).

    ``keystore``: the PKCS12 keystore of the broker's certificate and its password (:func:`write_keystore`).
    """
    host, port, cport = config.host, config.kafka_port, config.kafka_controller_port
    if not config.secure:
        return [
            f"listeners=PLAINTEXT://{host}:{port},CONTROLLER://{host}:{cport}",
            f"advertised.listeners=PLAINTEXT://{host}:{port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        ]
    admin = password(config, "admin")
    name = protocol(config)
    low = name.lower()
    lines = [
        f"listeners={name}://{host}:{port},CONTROLLER://{host}:{cport}",
        f"advertised.listeners={name}://{host}:{port}",
        "controller.listener.names=CONTROLLER",
        f"inter.broker.listener.name={name}",
        f"listener.security.protocol.map={name}:{name},CONTROLLER:SASL_PLAINTEXT",
        f"listener.name.{low}.sasl.enabled.mechanisms={MECHANISM}",
        f"sasl.mechanism.inter.broker.protocol={MECHANISM}",
        "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
        "sasl.mechanism.controller.protocol=PLAIN",
        f"listener.name.{low}.scram-sha-512.sasl.jaas.config=" + _jaas("scram.ScramLoginModule", "admin", admin),
        "listener.name.controller.plain.sasl.jaas.config="
        + _jaas("plain.PlainLoginModule", "admin", admin, plain_users=True),
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:admin",
    ]
    if config.kafka_tls:
        if keystore is None:
            msg = "kafka_tls_cert: a TLS listener needs its keystore (write_keystore), got none"
            raise StartError(msg)
        store, secret = keystore
        lines += [
            f"listener.name.{low}.ssl.keystore.type=PKCS12",
            f"listener.name.{low}.ssl.keystore.location={store}",
            f"listener.name.{low}.ssl.keystore.password={secret}",
            f"listener.name.{low}.ssl.key.password={secret}",
            # the node is its own inter-broker client: it trusts what clients trust
            f"listener.name.{low}.ssl.truststore.type=PEM",
            f"listener.name.{low}.ssl.truststore.location={config.kafka_ca}",
        ]
    return lines


def write_keystore(config: StackConfig, directory: Path) -> tuple[Path, str]:
    """The broker's PKCS12 keystore (``kafka_tls_cert`` + ``kafka_tls_key``) under ``directory``, new password.

    Raises:
        StartError: the certificate or key is missing or not PEM (names the file).
    """
    import secrets

    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    cert_path, key_path = config.kafka_tls_cert, config.kafka_tls_key
    if cert_path is None or key_path is None:
        msg = f"kafka_tls_key: got {key_path}, expected the private key of kafka_tls_cert {cert_path}"
        raise StartError(msg)
    try:
        chain = x509.load_pem_x509_certificates(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        msg = (f"kafka_tls_cert/kafka_tls_key: {cert_path}, {key_path} could not be read ({exc}); "
               "expected a PEM certificate chain and its unencrypted PEM private key")
        raise StartError(msg) from exc
    secret = secrets.token_urlsafe(24)
    blob = pkcs12.serialize_key_and_certificates(
        b"kafka", key, chain[0], chain[1:] or None,  # type: ignore[arg-type]  # a DH key fails at run time
        serialization.BestAvailableEncryption(secret.encode()))
    directory.mkdir(parents=True, exist_ok=True)
    store = directory / "broker.p12"
    fd = os.open(store, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(blob)
    return store, secret


def scram_format_args(config: StackConfig) -> list[str]:
    """``kafka-storage format`` arguments that bootstrap every principal's SCRAM credential (KIP-900)."""
    if not config.secure:
        return []
    args: list[str] = []
    for principal in PRINCIPALS:
        args += ["--add-scram", f"{MECHANISM}=[name={principal},password={password(config, principal)}]"]
    return args


def acl_bindings(config: StackConfig, topic_prefix: str = "") -> list[AclBinding]:
    """The ACLs of :data:`GRANTS` (topics literal with ``topic_prefix``; groups and transactional ids prefixed).

    Group and transactional-id prefixes are granted with and without ``topic_prefix`` (services put the
    topic prefix in front of their group ids; the Flink job's ids do not carry it).
    """
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    def allow(kind: ResourceType, name: str, pattern: ResourcePatternType, principal: str,
              op: AclOperation) -> AclBinding:
        return AclBinding(kind, name, pattern, f"User:{principal}", "*", op, AclPermissionType.ALLOW)

    out: list[AclBinding] = []
    literal, prefixed = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    read, write, describe = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
    for principal, grant in GRANTS.items():
        topic_ops = ([(t, (write, describe)) for t in grant.write] + [(t, (read, describe)) for t in grant.read]
                     + [(t, (describe,)) for t in grant.describe])
        for topic, ops in topic_ops:
            out += [allow(ResourceType.TOPIC, topic_prefix + topic, literal, principal, op) for op in ops]
        for name in sorted({p + g for g in (principal, *grant.groups) for p in {"", topic_prefix}}):
            out += [allow(ResourceType.GROUP, name, prefixed, principal, op) for op in (read, describe)]
        for name in sorted({p + t for t in (principal, *grant.transactional_ids) for p in {"", topic_prefix}}):
            out += [allow(ResourceType.TRANSACTIONAL_ID, name, prefixed, principal, op) for op in (write, describe)]
    return out


def apply_acls(config: StackConfig, topic_prefix: str = "", timeout_s: float = 30.0) -> int:
    """Create the service ACLs as the admin (idempotent); return how many bindings were applied.

    Raises:
        StartError: the broker refused one (names it).
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(client_config(config, "admin") | {"log_level": 0})
    bindings = acl_bindings(config, topic_prefix)
    for binding, future in admin.create_acls(bindings, request_timeout=timeout_s).items():
        try:
            future.result(timeout=timeout_s)
        except KafkaException as exc:
            msg = f"kafka ACL {binding}: refused ({exc}); expected the admin to create it"
            raise StartError(msg) from exc
    _wait_visible(admin, bindings, timeout_s)
    return len(bindings)


def _wait_visible(admin: AdminClient, bindings: list[AclBinding], timeout_s: float) -> None:
    """Until the broker's authorizer lists every binding: it applies ACLs from the metadata log, a moment
    after CreateAcls returns, and a client refused in that moment would see a spurious authorization error."""
    import time

    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    anything: Any = None  # a filter field of None matches every value (the stubs say str)
    every = AclBindingFilter(ResourceType.ANY, anything, ResourcePatternType.ANY, anything, anything,
                             AclOperation.ANY, AclPermissionType.ANY)
    wanted = {_acl_key(b) for b in bindings}
    deadline = time.monotonic() + timeout_s
    while True:
        listed = {_acl_key(b) for b in admin.describe_acls(every, request_timeout=timeout_s).result(timeout_s)}
        if wanted <= listed:
            return
        if time.monotonic() > deadline:
            msg = f"kafka ACLs: {len(wanted - listed)} created but not listed after {timeout_s}s"
            raise StartError(msg)
        time.sleep(0.1)


def _acl_key(b: AclBinding) -> tuple[str, ...]:
    fields = (b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type)
    return tuple(str(getattr(f, "name", f)) if not isinstance(f, str) else f for f in fields)


def java_client_properties(config: StackConfig, principal: str, *, shaded: bool = True) -> dict[str, str]:
    """The Java client settings of ``principal`` (empty when not secure).

    ``shaded``: for the Flink Kafka SQL connector (relocated login module); ``False`` for a plain
    Kafka client such as Druid's Kafka indexing service.

    Example:
        >>> from pydantic import SecretStr
        >>> cfg = StackConfig(secure=True, kafka_passwords={"features": SecretStr("pw")})
        >>> props = java_client_properties(cfg, "features")
        >>> props["security.protocol"], props["sasl.mechanism"], "ScramLoginModule" in props["sasl.jaas.config"]
        ('SASL_PLAINTEXT', 'SCRAM-SHA-512', True)
        >>> java_client_properties(StackConfig(), "features")
        {}
    """
    if not config.secure:
        return {}
    secret = password(config, principal)
    if '"' in secret or "\\" in secret:
        msg = (f"kafka_passwords[{principal!r}]: got a password with a quote or backslash, expected neither "
               "(the Java client's JAAS line cannot hold them)")
        raise StartError(msg)
    props = {"security.protocol": protocol(config), "sasl.mechanism": MECHANISM,
             "sasl.jaas.config": _jaas("scram.ScramLoginModule", principal, secret)
             .replace("org.apache.kafka.common.security", SHADED_JAAS_PACKAGE if shaded else
                      "org.apache.kafka.common.security", 1)}
    if config.kafka_ca is not None:
        props |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(config.kafka_ca)}
    return props


class AccessError(StartError):
    """A principal lacks an operation its service needs (the message names principal, topic and operation)."""


def check_access(conf: dict[str, Any], principal: str, service: str, *, topic_prefix: str = "",
                 timeout_s: float = 30.0) -> None:
    """Ask the broker whether ``principal`` may do what ``service`` needs (:data:`GRANTS`); raise if not.

    The broker's authorizer answers (``DescribeTopics`` with the authorised operations), so a
    service started with the wrong principal stops at once with a message naming what is missing,
    instead of failing on its first fetch or send.

    Raises:
        AccessError: authentication failed, or a topic is not readable or writable as needed.
    """
    from confluent_kafka import KafkaException, TopicCollection
    from confluent_kafka.admin import AclOperation, AdminClient

    grant = GRANTS[service]
    needs = [(t, AclOperation.READ) for t in grant.read] + [(t, AclOperation.WRITE) for t in grant.write]
    names = sorted({topic_prefix + t for t, _ in needs})
    admin = AdminClient(conf | {"log_level": 0})
    expected = (f"expected the principal {service!r} with its ACLs (PRICESTREAM_KAFKA_PRINCIPAL unset, or "
                f"set to {service!r})")
    allowed: dict[str, set[Any]] = {}
    futures = admin.describe_topics(TopicCollection(names), request_timeout=timeout_s,
                                    include_authorized_operations=True)
    for name, future in futures.items():
        try:
            allowed[name] = set(future.result(timeout=timeout_s).authorized_operations or ())
        except KafkaException as exc:
            code = exc.args[0].name() if exc.args and hasattr(exc.args[0], "name") else str(exc)
            msg = f"kafka principal {principal!r} (service {service}): topic {name!r} refused ({code}); {expected}"
            raise AccessError(msg) from exc
    for topic, op in needs:
        ops = allowed[topic_prefix + topic]
        if op not in ops and AclOperation.ALL not in ops:
            msg = (f"kafka principal {principal!r} (service {service}): not allowed to {op.name} topic "
                   f"{topic_prefix + topic!r} (allowed: {sorted(o.name for o in ops) or 'nothing'}); {expected}")
            raise AccessError(msg)
