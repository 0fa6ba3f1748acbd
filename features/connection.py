"""Redis connections of the online store: one server or a Redis Cluster, chosen by the URL alone.

``redis://host:port/db`` is one server (Feast's ``redis_type: redis``).
``redis+cluster://host:port[,host:port...]`` is a Redis Cluster (Feast's ``redis_type:
redis_cluster``): the listed nodes are seeds, the client discovers the rest and routes each key to
the master of its hash slot. List every master so that a client can start with any one node down.
``pricestream up --redis-cluster 3`` prints such a URL (:mod:`infra.redis_cluster`).

Every key the store writes or reads is one entity's hash (Feast's layout), so every command and
every compare-and-set script call touches one key, hence one slot; the writer groups its script
calls per slot (:func:`slot_of`).

Example:
    >>> is_cluster("redis+cluster://127.0.0.1:36380,127.0.0.1:36381")
    True
    >>> cluster_seeds("redis+cluster://127.0.0.1:36380,127.0.0.1:36381")
    [('127.0.0.1', 36380), ('127.0.0.1', 36381)]
    >>> feast_cluster_string("redis+cluster://a:1,b:2", username="writer")
    'a:1,b:2,username=writer'
    >>> cluster_seeds("redis+cluster://127.0.0.1")
    Traceback (most recent call last):
    ...
    features.errors.StoreConfigError: redis_url: got seed '127.0.0.1' in 'redis+cluster://127.0.0.1', expected host:port
    >>> slot_of(b"{h1}x") == slot_of(b"h1")
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot
from redis.exceptions import RedisClusterException

from events.redact import redact
from features.errors import StoreConfigError

if TYPE_CHECKING:
    from features.config import FeaturesConfig

CLUSTER_SCHEME = "redis+cluster"
RedisClient: TypeAlias = "redis.Redis | RedisCluster"
"""What the online store talks to: redis-py's client of one server or of a cluster."""
STORE_ERRORS: tuple[type[Exception], ...] = (redis.RedisError, RedisClusterException)
"""What either client raises when the store cannot answer (a cluster's uncovered slot during a failover
raises ``SlotNotCoveredError``, which is not a ``RedisError``)."""


def is_cluster(url: str) -> bool:
    """The URL names a Redis Cluster (scheme ``redis+cluster``)."""
    return url.split("://", 1)[0].lower() == CLUSTER_SCHEME


def cluster_seeds(url: str) -> list[tuple[str, int]]:
    """(host, port) of every seed node of a ``redis+cluster://`` URL.

    Raises:
        StoreConfigError: not a cluster URL, no seed, or a seed that is not ``host:port``.
    """
    if not is_cluster(url):
        msg = f"redis_url: got {redact(url)!r}, expected {CLUSTER_SCHEME}://host:port[,host:port...]"
        raise StoreConfigError(msg)
    rest = url.split("://", 1)[1].split("/", 1)[0].rsplit("@", 1)[-1]
    seeds = []
    for seed in filter(None, rest.split(",")):
        host, _, port = seed.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            msg = f"redis_url: got seed {seed!r} in {redact(url)!r}, expected host:port"
            raise StoreConfigError(msg)
        seeds.append((host, int(port)))
    if not seeds:
        msg = f"redis_url: got {redact(url)!r} with no node, expected {CLUSTER_SCHEME}://host:port[,host:port...]"
        raise StoreConfigError(msg)
    return seeds


def feast_cluster_string(url: str, *, password: str | None = None, username: str | None = None) -> str:
    """Feast's connection string of a cluster: ``host:port,host:port[,password=..][,username=..]``."""
    out = ",".join(f"{host}:{port}" for host, port in cluster_seeds(url))
    if password is not None:
        out += f",password={password}"
    if username is not None:
        out += f",username={username}"
    return out


def slot_of(key: bytes) -> int:
    """The hash slot of ``key`` (CRC16 of its hash tag, if any, modulo 16,384), as the server computes it."""
    return int(key_slot(key))


def redis_client(config: FeaturesConfig) -> RedisClient:
    """A redis-py client for ``config.redis_url``: one server or a cluster (binary replies, bounded timeouts)."""
    password = config.redis_password.get_secret_value() if config.redis_password else None
    timeout = config.redis_timeout_s
    if is_cluster(config.redis_url):
        nodes = [ClusterNode(host, port) for host, port in cluster_seeds(config.redis_url)]
        try:  # unlike one server's client, a cluster client connects at once (to learn the slots)
            return RedisCluster(startup_nodes=nodes, password=password, username=config.redis_username,
                                socket_timeout=timeout, socket_connect_timeout=timeout)
        except STORE_ERRORS as exc:
            msg = f"redis_url {redact(config.redis_url)!r}: no seed node gave the cluster's slots ({exc})"
            raise redis.ConnectionError(msg) from exc
    host, port, db = config.redis_host_port_db
    return redis.Redis(host=host, port=port, db=db, password=password, username=config.redis_username,
                       socket_timeout=timeout, socket_connect_timeout=timeout)
