"""``pricestream run``: the whole pipeline locally, one OS process per service, one status table, one stop.

The processes (:func:`pricestream.supervision.programs`) run under ``supervisord``; the table
(rich) shows each one's state, pid, uptime, ``/healthz`` verdict and consumer lag. Ctrl-C or
SIGTERM stops them all gracefully (SIGTERM each, consumers before producers, each within its
grace period) and exits 0 when every service did; logs are under ``<state>/run/logs``.
"""

from __future__ import annotations

import signal
import threading
from typing import Annotated
from urllib.parse import urlsplit

import typer
from rich.live import Live
from rich.table import Table

from pricestream.commands.common import err, fail, out, settings

RUN_DIR = "run"
_SHUTDOWN_MARGIN_S = 30.0


def _table(rows: list) -> Table:
    view = Table("service", "state", "pid", "up (s)", "health", "lag", title="pricestream run")
    for r in rows:
        colour = "green" if r.state == "RUNNING" and r.health in ("ok", "-") else "yellow"
        view.add_row(r.name, f"[{colour}]{r.state}[/{colour}]", str(r.pid or "-"), f"{r.uptime_s:.0f}",
                     r.health, "-" if r.lag is None else str(r.lag))
    return view


def _check_ports(progs: list) -> None:
    """Stop before anything starts when a program's port is taken, naming each address (issue 31 item 6)."""
    from pricestream.commands.common import ensure_bindable

    for prog in progs:
        if prog.ops_url is not None:
            netloc = urlsplit(prog.ops_url)
            ensure_bindable(netloc.hostname or "127.0.0.1", netloc.port or 0, what=f"{prog.name} port")


def _ports_line(progs: list) -> str:
    return ", ".join(f"{p.name} {urlsplit(p.ops_url).port}" for p in progs if p.ops_url is not None)


def run(
    without: Annotated[list[str] | None, typer.Option(
        "--without", envvar="PRICESTREAM_RUN_WITHOUT",
        help="leave out a process (repeatable): features, online-writer, offline-writer, serve, labels, sampler, "
             "trainer, monitor")] = None,
    refresh: Annotated[float, typer.Option(envvar="PRICESTREAM_RUN_REFRESH_S", min=0.2,
                                           help="seconds between status refreshes")] = 2.0,
) -> None:
    """Start the pipeline as separate processes (feature job, writers, serve, labels, sampler, trainer, monitor)."""
    from events.admin import create_topics
    from feedback.registry import ModelRegistry
    from pricestream.ops_ports import with_ops_ports
    from pricestream.supervision import Supervisor, programs
    from pricestream.wiring import ensure_models

    s = with_ops_ports(settings())  # this deployment's recorded (or newly picked) ops ports, not another's
    skip = frozenset(without or ())
    progs = programs(s, skip=skip)
    unknown = skip - {p.name for p in programs(s)}
    if unknown:
        fail(f"--without: got {sorted(unknown)}, expected names from {[p.name for p in programs(s)]}")
    _check_ports(progs)
    with err.status("creating topics and making sure a light and a heavy model are promoted"):
        create_topics(s.kafka())
        if s.secure:  # as the admin: each service principal's ACLs on this deployment's (prefixed) topics
            from infra.kafka_security import apply_acls
            from infra.redis_server import grant_project

            apply_acls(s.stack(), s.topic_prefix)
            grant_project(s.stack())  # the Redis users' key pattern of this deployment's Feast project
        ensure_models(ModelRegistry(s.registry()), seed=s.seed, rows=s.bootstrap_rows, cache_dir=s.cache_dir)  # once
    sup = Supervisor(s.state_dir / RUN_DIR, progs, grace_s=s.grace_s)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        sup.start()
        err.print(f"supervisord running {len(progs)} processes; logs in {sup.root / 'logs'}; ops ports "
                  f"{_ports_line(progs)}; Ctrl-C stops all")
        with Live(_table(sup.statuses()), console=err, refresh_per_second=4, transient=False) as live:
            while not stop.wait(refresh) and sup.alive():
                live.update(_table(sup.statuses()))
        err.print("stopping every process (SIGTERM, each within its grace period)")
    finally:
        code = sup.shutdown(timeout_s=s.grace_s * len(progs) + _SHUTDOWN_MARGIN_S)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    codes = sup.exit_codes()
    failed = sup.unclean()
    out.print(f"stopped {len(codes)} processes: " + ", ".join(f"{n} {c}" for n, c in sorted(codes.items())))
    if code != 0 or failed:
        fail(f"not every process stopped cleanly: supervisord exit {code}, {failed}")
