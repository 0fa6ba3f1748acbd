"""The ops ports of a local deployment, and the ``/healthz`` probes of the processes holding them.

Without ``ops_base_port`` a deployment's block of ports is picked free at its first :func:`ops_base` and
recorded under ``<state>/run`` (:data:`OPS_PORTS_FILE`), reused while it is free, so two deployments on one
host never take each other's. The status table reads a ``/healthz`` only when the process supervisord
started holds that port (:func:`listening`, :func:`own_probe`): another deployment's process answering
there is not this one's health.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request

from pricestream.commands.services import SERVICES, default_ops_port
from pricestream.settings import Settings

_HEALTH_TIMEOUT_S = 1.0
RUN_DIR = "run"
OPS_PORTS_FILE = "ops-ports.json"
"""Under ``<state>/run``: the ops ports picked for this state dir's deployment (``{"base": N, "ports": {...}}``)."""



def recorded_ops_base(s: Settings) -> int | None:
    """The ops base port recorded for ``s``'s state dir (None: none recorded, or an unreadable record)."""
    path = s.state_dir / RUN_DIR / OPS_PORTS_FILE
    try:
        base = json.loads(path.read_text(encoding="utf-8")).get("base")
    except (OSError, ValueError, AttributeError):
        return None
    return base if isinstance(base, int) and 0 < base < 65_000 else None


def ops_base(s: Settings) -> int:
    """``s.ops_base_port``, else this state dir's recorded block while it is free, else a free block (recorded).

    Raises:
        pricestream.deployment.DeploymentError: no block of free ports on ``ops_host``.
    """
    if s.ops_base_port is not None:
        return s.ops_base_port
    from pricestream.deployment import free_ports, port_free

    recorded = recorded_ops_base(s)
    if recorded is not None and all(port_free(s.ops_host, recorded + i) for i in range(len(SERVICES))):
        return recorded
    if recorded is not None and _held_by_this_run(s, recorded):
        return recorded  # this state dir's deployment is up: its ports are its own
    base = free_ports(s.ops_host, len(SERVICES))
    path = s.state_dir / RUN_DIR / OPS_PORTS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    ports = {name: default_ops_port(name, base=base) for name in SERVICES}
    path.write_text(json.dumps({"base": base, "host": s.ops_host, "ports": ports}, indent=1), encoding="utf-8")
    return base


def _held_by_this_run(s: Settings, base: int) -> bool:
    """A supervisord of this state dir runs and one of its children holds a port of the block."""
    pid_file = s.state_dir / RUN_DIR / "supervisord.pid"
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return False
    ports = {base + i for i in range(len(SERVICES))}
    return any(p in ports for p in _listening_ports(pid))


def with_ops_ports(s: Settings) -> Settings:
    """``s`` with its ops base port resolved (:func:`ops_base`): what every process of one ``run`` is given."""
    return s if s.ops_base_port is not None else s.model_copy(update={"ops_base_port": ops_base(s)})


def _listening_ports(pid: int) -> set[int]:
    """TCP ports that process ``pid`` or one of its descendants listens on (empty if it is gone)."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return set()
    ports: set[int] = set()
    for proc in procs:
        try:
            conns = proc.net_connections(kind="inet")
        except psutil.Error:
            continue
        ports |= {c.laddr.port for c in conns if c.status == psutil.CONN_LISTEN and c.laddr}
    return ports


def listening(pid: int, port: int) -> bool:
    """Process ``pid`` (or a child of it) listens on ``port``: a ``/healthz`` there is that process's.

    Example:
        >>> import os, socket
        >>> with socket.socket() as sock:
        ...     sock.bind(("127.0.0.1", 0)); sock.listen()
        ...     listening(os.getpid(), sock.getsockname()[1]), listening(os.getpid(), 1)
        (True, False)
    """
    return port in _listening_ports(pid)


def own_probe(url: str, pid: int) -> tuple[str, int | None]:
    """:func:`probe` of ``url`` when process ``pid`` holds its port; else what is wrong (another process's answer
    there is not this one's health: issue 31 item 6, a table that showed ``ok`` from another stack's services)."""
    from urllib.parse import urlsplit

    port = urlsplit(url).port
    if port is not None and not listening(pid, port):
        return f"not listening on {urlsplit(url).netloc}", None
    return probe(url)


def probe(url: str) -> tuple[str, int | None]:
    """``("ok" | "degraded: redis" | "down", lag)`` from a ``/healthz``."""
    try:
        with urllib.request.urlopen(url, timeout=_HEALTH_TIMEOUT_S) as resp:
            body = json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            body = json.loads(exc.read() or b"{}")
        except ValueError:
            return f"http {exc.code}", None
    except (OSError, ValueError, http.client.HTTPException):
        # HTTPException: not an HTTP answer, e.g. a probe of a port nobody has bound yet in the ephemeral
        # range that connected to itself (TCP self-connect) and read its own request back.
        return "not answering", None
    lag = body.get("lag_total")
    if body.get("status") == "ok":
        return "ok", lag
    down = body.get("down") or [body.get("reason", "?")]
    return "degraded: " + ", ".join(str(d) for d in down), lag
