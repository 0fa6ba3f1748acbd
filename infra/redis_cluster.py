"""A local Redis Cluster of N masters with one replica each, for the online store's scale-out tests.

``pricestream up --redis-cluster 3`` starts it beside the single Redis of :mod:`infra.redis_server`
(the benchmark compares the two in one run). Node ``i`` (0-based) listens on ``redis_port + 1 + i``:
nodes ``0..N-1`` become the masters and ``N..2N-1`` their replicas (``redis-cli --cluster create
--cluster-replicas 1``, which spreads the 16,384 hash slots evenly). Each node runs
``--cluster-enabled yes`` with AOF (``appendfsync everysec``) in its own directory of the state
dir, and a node timeout of :data:`NODE_TIMEOUT_MS`: a master that stops answering for that long is
marked failed and its replica is promoted (a few seconds here, not Redis's 15 s default).

Clients select the cluster by URL only: ``PRICESTREAM_REDIS_URL=redis+cluster://h:p,h:p,h:p``
(every master as a seed, so a client can start with any one node down); :func:`cluster_url`
prints it. Replication is asynchronous: a write acknowledged by a master that dies before its
replica received it is lost, unless the writer waited for the replica (``WAIT 1 <ms>``, which
:mod:`features.online_writer` does on a cluster when ``redis_wait_replicas`` is set).

Example:
    >>> from pathlib import Path
    >>> cfg = StackConfig(state_dir=Path("/tmp/ps"), redis_port=36379)
    >>> node_ports(cfg, 3)
    [36380, 36381, 36382, 36383, 36384, 36385]
    >>> cluster_url(cfg, 3)
    'redis+cluster://127.0.0.1:36380,127.0.0.1:36381,127.0.0.1:36382'
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable

import redis

from infra import processes
from infra.config import StackConfig
from infra.errors import StartError
from infra.prereqs import require

SERVICE = "redis-cluster"
NODE_TIMEOUT_MS = 2000
"""``cluster-node-timeout``: how long a silent master is waited for before its replica takes over."""
REPLICAS = 1
_NODES_FILE = "cluster-nodes.pid"  # how many nodes the running cluster has (for down and status)


def node_service(i: int) -> str:
    """The pid and log file name of node ``i``."""
    return f"{SERVICE}-{i}"


def node_ports(config: StackConfig, masters: int) -> list[int]:
    """Every node's port: the masters' first, then their replicas'."""
    return [config.redis_port + 1 + i for i in range(masters * (1 + REPLICAS))]


def cluster_url(config: StackConfig, masters: int) -> str:
    """The ``PRICESTREAM_REDIS_URL`` of the cluster: every master as a seed."""
    seeds = ",".join(f"{config.host}:{port}" for port in node_ports(config, masters)[:masters])
    return f"redis+cluster://{seeds}"


def _node_client(config: StackConfig, port: int) -> redis.Redis:
    return redis.Redis(host=config.host, port=port, socket_timeout=1.0, socket_connect_timeout=1.0)


def cluster_info(config: StackConfig, port: int) -> dict[str, str]:
    """``CLUSTER INFO`` of one node as a dict (empty when the node does not answer)."""
    client = _node_client(config, port)
    try:
        info = client.execute_command("CLUSTER INFO")  # redis-py parses the reply into a dict
    except redis.RedisError:
        return {}
    finally:
        client.close()
    return {str(k): str(v) for k, v in info.items()}


def start_node(config: StackConfig, i: int) -> int:
    """Start node ``i`` if it is not running (it rejoins with its ``nodes.conf``); returns its pid."""
    pid = processes.read_pid(config.pid_file(node_service(i)))
    if pid is not None:
        return pid
    binary = require("redis-server", "Redis (apt-get install redis-server)")
    data = config.state_dir / SERVICE / str(i)
    data.mkdir(parents=True, exist_ok=True)
    port = config.redis_port + 1 + i
    argv = [
        binary, "--bind", config.host, "--port", str(port), "--dir", str(data), "--daemonize", "no",
        "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
        "--cluster-node-timeout", str(NODE_TIMEOUT_MS), "--appendonly", "yes", "--appendfsync", "everysec",
        "--save", "", "--protected-mode", "yes", "--logfile", "",
    ]
    return processes.spawn(argv, pid_file=config.pid_file(node_service(i)),
                           log_file=config.log_file(node_service(i)), cwd=data)


def start(config: StackConfig, masters: int = 3) -> str:
    """Start ``masters`` masters and a replica of each, form the cluster once, wait for ``cluster_state:ok``.

    Idempotent: running nodes are left alone, and a cluster whose slots are assigned is not
    created again. Returns :func:`cluster_url`.

    Raises:
        StartError: fewer than 3 masters (Redis Cluster's minimum), a node that exited, or the deadline passed.
    """
    if masters < 3:
        msg = f"field 'redis_cluster': got {masters} masters, expected at least 3 (Redis Cluster's minimum)"
        raise StartError(msg)
    ports = node_ports(config, masters)
    for i in range(len(ports)):
        start_node(config, i)
    (config.state_dir / SERVICE).mkdir(parents=True, exist_ok=True)
    (config.state_dir / SERVICE / _NODES_FILE).write_text(f"{len(ports)}\n")
    _wait(config, ports, lambda info: bool(info), "answering")
    if all(int(cluster_info(config, p).get("cluster_slots_assigned", "0")) == 0 for p in ports):
        _create(config, ports)
    _wait(config, ports, lambda info: info.get("cluster_state") == "ok", "cluster_state:ok")
    return cluster_url(config, masters)


def _create(config: StackConfig, ports: list[int]) -> None:
    cli = require("redis-cli", "Redis (apt-get install redis-tools)")
    argv = [cli, "--cluster", "create", *(f"{config.host}:{p}" for p in ports),
            "--cluster-replicas", str(REPLICAS), "--cluster-yes"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=config.ready_timeout_s, check=False)  # noqa: S603
    if done.returncode != 0:
        msg = f"redis-cli --cluster create on ports {ports} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        raise StartError(msg)


def _wait(config: StackConfig, ports: list[int], ok: Callable[[dict[str, str]], bool], what: str) -> None:
    deadline = time.monotonic() + config.ready_timeout_s
    pending = list(ports)
    while time.monotonic() < deadline:
        for i, port in enumerate(ports):
            if processes.read_pid(config.pid_file(node_service(i))) is None:
                log = processes.tail(config.log_file(node_service(i)))
                msg = f"redis cluster node {i} (port {port}) exited during start-up:\n{log}"
                raise StartError(msg)
        pending = [p for p in ports if not ok(cluster_info(config, p))]
        if not pending:
            return
        time.sleep(0.2)
    msg = f"redis cluster: nodes on ports {pending} not {what} after {config.ready_timeout_s}s"
    raise StartError(msg)


def running_nodes(config: StackConfig) -> int:
    """How many nodes the last ``start`` launched (0 when none was)."""
    with contextlib.suppress(FileNotFoundError, ValueError):
        return int((config.state_dir / SERVICE / _NODES_FILE).read_text())
    return 0


def roles(config: StackConfig, masters: int) -> dict[int, str]:
    """Port -> ``master`` / ``slave`` / ``down`` of every node, as each reports itself."""
    out = {}
    for port in node_ports(config, masters):
        client = _node_client(config, port)
        try:
            out[port] = client.info("replication")["role"]
        except redis.RedisError:
            out[port] = "down"
        finally:
            client.close()
    return out


def stop(config: StackConfig) -> bool:
    """Stop every node (pid files); True if one was running."""
    nodes = running_nodes(config)
    stopped = [processes.stop(config.pid_file(node_service(i))) for i in range(nodes)]
    (config.state_dir / SERVICE / _NODES_FILE).unlink(missing_ok=True)
    return any(stopped)
