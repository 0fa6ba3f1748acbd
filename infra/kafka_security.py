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

from typing import Any

from infra.config import StackConfig
from infra.errors import StartError

PRINCIPALS = ("admin", "producer", "scorer", "trainer")
"""SCRAM users of a secure stack (``admin`` is the super user)."""

MECHANISM = "SCRAM-SHA-512"

GRANTS: dict[str, dict[str, tuple[str, ...]]] = {
    "producer": {"write": ("behaviour.events",), "read": ()},
    "scorer": {"write": ("pricing.decisions", "pricing.decisions.dlq"), "read": ("features.v1", "pricing.requests")},
    "trainer": {"write": ("training.examples.dlq",), "read": ("training.examples",)},
}
"""Topics each service principal may write and read (DESCRIBE comes with both)."""


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
        conf.update({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": MECHANISM,
                     "sasl.username": principal, "sasl.password": password(config, principal)})
    return conf


def _jaas(module: str, principal: str, secret: str, *, plain_users: bool = False) -> str:
    extra = f' user_{principal}="{secret}"' if plain_users else ""
    return f'org.apache.kafka.common.security.{module} required username="{principal}" password="{secret}"{extra};'


def listener_properties(config: StackConfig) -> list[str]:
    """``server.properties`` lines of the listeners: PLAINTEXT, or SASL/SCRAM with the authorizer."""
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
    return [
        f"listeners=SASL_PLAINTEXT://{host}:{port},CONTROLLER://{host}:{cport}",
        f"advertised.listeners=SASL_PLAINTEXT://{host}:{port}",
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=SASL_PLAINTEXT",
        "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        f"listener.name.sasl_plaintext.sasl.enabled.mechanisms={MECHANISM}",
        f"sasl.mechanism.inter.broker.protocol={MECHANISM}",
        "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
        "sasl.mechanism.controller.protocol=PLAIN",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config="
        + _jaas("scram.ScramLoginModule", "admin", admin),
        "listener.name.controller.plain.sasl.jaas.config="
        + _jaas("plain.PlainLoginModule", "admin", admin, plain_users=True),
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:admin",
    ]


def scram_format_args(config: StackConfig) -> list[str]:
    """``kafka-storage format`` arguments that bootstrap every principal's SCRAM credential (KIP-900)."""
    if not config.secure:
        return []
    args: list[str] = []
    for principal in PRINCIPALS:
        args += ["--add-scram", f"{MECHANISM}=[name={principal},password={password(config, principal)}]"]
    return args


def acl_bindings(config: StackConfig, topic_prefix: str = "") -> list[Any]:
    """The ACLs of :data:`GRANTS` (topics literal with ``topic_prefix``; groups and transactional ids prefixed)."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    def allow(kind: Any, name: str, pattern: Any, principal: str, op: Any) -> Any:
        return AclBinding(kind, name, pattern, f"User:{principal}", "*", op, AclPermissionType.ALLOW)

    out = []
    literal, prefixed = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    for principal, grant in GRANTS.items():
        for topic in grant["write"]:
            out += [allow(ResourceType.TOPIC, topic_prefix + topic, literal, principal, op)
                    for op in (AclOperation.WRITE, AclOperation.DESCRIBE)]
        for topic in grant["read"]:
            out += [allow(ResourceType.TOPIC, topic_prefix + topic, literal, principal, op)
                    for op in (AclOperation.READ, AclOperation.DESCRIBE)]
        own = f"{topic_prefix}{principal}"
        out.append(allow(ResourceType.GROUP, own, prefixed, principal, AclOperation.READ))
        out += [allow(ResourceType.TRANSACTIONAL_ID, own, prefixed, principal, op)
                for op in (AclOperation.WRITE, AclOperation.DESCRIBE)]
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
    return len(bindings)
