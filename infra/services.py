"""The service table: every process of a pricestream deployment, declared once.

One row per process: its name, the ``pricestream`` command that runs it, its start order, the
Kafka principal it acts as and what that principal may read and write (its :class:`Grant`), its
Redis user, and whether it is a stream service (``services run NAME``, with ``/healthz`` and
``/metrics`` on an ops port of its own). Everything that lists the processes reads this table:

* ``pricestream services run NAME`` (which names exist, their ops ports: base + :func:`ops_index`);
* ``pricestream run`` and its supervisord config (:func:`pricestream.supervision.programs`);
* the least-privilege Kafka ACLs of a secure stack (:data:`infra.kafka_security.GRANTS`);
* the Kubernetes manifests, checked against it by ``pricestream k8s validate``
  (:func:`infra.k8s_manifests.check_services`: one Deployment per stream service running its
  command, and a password per principal in the Secret).

Example:
    >>> [s.name for s in STREAM_SERVICES]
    ['online-writer', 'offline-writer', 'labels', 'sampler', 'trainer', 'monitor']
    >>> ops_index("labels"), by_name("serve").principal, by_name("features").command
    (2, 'scorer', 'jobs run features')
    >>> by_name("trainer").grant.read
    ('training.examples',)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from infra.errors import InfraError


@dataclass(frozen=True)
class Grant:
    """What one Kafka principal may do (topics are logical: the stack's prefix is added).

    ``groups`` and ``transactional_ids`` are prefixes (the principal's own name always is one);
    ``describe`` topics are visible (metadata, watermarks) but neither read nor written.
    """

    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    describe: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    transactional_ids: tuple[str, ...] = ()


Kind = Literal["job", "serve", "service"]
"""``job``: the Flink feature job (no ops port; SIGTERM stops it with a savepoint); ``serve``: the HTTP
scorer (its ``/healthz`` on the pricing port); ``service``: a stream service of ``services run``."""


@dataclass(frozen=True)
class Service:
    """One process of a deployment (see the module docstring)."""

    name: str
    kind: Kind
    command: str
    """What follows the ``pricestream`` executable to start it."""
    priority: int
    """Start order under supervisord (producers of a topic before its consumers)."""
    principal: str
    grant: Grant
    redis_user: str | None = None
    """Its Redis ACL user on a secure stack (``None``: it never opens Redis)."""
    role: str = ""
    """What it does, in a few words (the README's and ``services run --help``'s table)."""


def _service(name: str, priority: int, grant: Grant, role: str, redis_user: str | None = None) -> Service:
    return Service(name, "service", f"services run {name}", priority, name, grant, redis_user, role)


TABLE: tuple[Service, ...] = (
    Service("features", "job", "jobs run features", 10, "features",
            Grant(read=("behaviour.events",),
                  write=("features.v1", "behaviour.events.dlq", "behaviour.events.accepted"),
                  groups=("pricestream-feature-job",), transactional_ids=("pricestream-features",)),
            role="behaviour.events -> features.v1 and Redis (the Flink job)"),
    _service("online-writer", 20, Grant(read=("features.v1",), write=("features.v1.dlq",),
                                        groups=("features-online-writer",)),
             "features.v1 -> Redis (Feast); idempotent upserts", redis_user="writer"),
    _service("offline-writer", 20, Grant(read=("features.v1", "behaviour.events.accepted"),
                                         write=("features.v1.dlq", "behaviour.events.accepted.dlq"),
                                         groups=("features-offline-writer",)),
             "features.v1 and accepted events -> parquet; a manifest per flush"),
    Service("serve", "serve", "serve", 30, "scorer",
            Grant(read=("features.v1", "pricing.requests", "control.v1"),
                  write=("pricing.decisions", "pricing.decisions.dlq", "pricing.requests.dlq", "audit.heads"),
                  groups=("serve-stream", "pricing-stream-scorer", "pricestream-control")),
            redis_user="scorer", role="POST /v1/price -> pricing.decisions (audited)"),
    _service("labels", 40, Grant(read=("pricing.decisions", "behaviour.events"),
                                 write=("feedback.labels", "pricing.decisions.dlq", "behaviour.events.dlq"),
                                 groups=("feedback-labels",), transactional_ids=("feedback-labels",)),
             "decisions + outcomes -> feedback.labels; exactly once"),
    _service("sampler", 50, Grant(read=("feedback.labels",), write=("training.examples", "feedback.labels.dlq"),
                                  groups=("feedback-sampler",), transactional_ids=("feedback-sampler",)),
             "feedback.labels -> training.examples; exactly once"),
    _service("trainer", 60, Grant(read=("training.examples",), write=("training.examples.dlq",),
                                  groups=("feedback-trainer",)),
             "training.examples -> model registry; guarded updates"),
    _service("monitor", 70, Grant(read=("pricing.decisions",), write=("pricing.decisions.dlq",),
                                  groups=("pricestream-monitors",)),
             "pricing.decisions -> Prometheus metrics and a live dashboard"),
)
"""Every process of ``pricestream run``, in start order."""

STREAM_SERVICES: tuple[Service, ...] = tuple(s for s in TABLE if s.kind == "service")
"""The processes of ``services run NAME``, in the order of their ops ports."""

OTHER_PRINCIPALS: dict[str, Grant] = {
    "producer": Grant(write=("behaviour.events",), describe=("behaviour.events.dlq",)),
    "druid": Grant(read=("features.v1", "behaviour.events"), groups=("kafka-supervisor",)),
    "auditor": Grant(read=("audit.heads",), groups=("pricestream-audit-verify",)),
}
"""Principals that are not processes of the deployment: event producers, Druid's ingestion and the auditor
(``pricestream audit verify`` reads the audit log's anchors)."""


def by_name(name: str) -> Service:
    """The row of ``name``.

    Raises:
        InfraError: no process of that name (the message lists them).
    """
    for service in TABLE:
        if service.name == name:
            return service
    msg = f"service: got {name!r}, expected one of {[s.name for s in TABLE]}"
    raise InfraError(msg)


def ops_index(name: str) -> int:
    """Offset of a stream service's ops port from the deployment's ops base port."""
    names = [s.name for s in STREAM_SERVICES]
    if name not in names:
        msg = f"service: got {name!r}, expected a stream service, one of {names}"
        raise InfraError(msg)
    return names.index(name)


def grants() -> dict[str, Grant]:
    """Every Kafka principal's grant: the processes' own, then the others'."""
    return {**{s.principal: s.grant for s in TABLE}, **OTHER_PRINCIPALS}
