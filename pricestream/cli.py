"""The ``pricestream`` command: a thin shell over library calls.

Every flag has a ``PRICESTREAM_*`` environment variable (see :mod:`pricestream.settings`).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from pricestream.progress import console, progress_bar
from pricestream.settings import Settings

app = typer.Typer(help="Real-time hotel pricing on a streaming feature platform.", no_args_is_help=True)
topics_app = typer.Typer(help="Kafka topics of the registry.", no_args_is_help=True)
flink_app = typer.Typer(help="The standalone Flink cluster shipped with the PyFlink wheel.", no_args_is_help=True)
jobs_app = typer.Typer(help="Flink jobs.", no_args_is_help=True)
app.add_typer(topics_app, name="topics")
app.add_typer(flink_app, name="flink")
app.add_typer(jobs_app, name="jobs")


def _settings() -> Settings:
    return Settings()


def _fail(exc: Exception) -> None:
    console.print(f"[red]error:[/red] {exc}")
    raise typer.Exit(code=1)


@app.command()
def up(
    with_: Annotated[list[str] | None, typer.Option("--with", help="extra services: druid, flink")] = None,
) -> None:
    """Start the local stack (Kafka, Redis; optionally Druid, Flink). Idempotent."""
    from infra import stack
    from infra.errors import InfraError

    settings = _settings()
    extras = set(with_ or [])
    try:
        with console.status("resolving jars and starting Kafka and Redis"):
            statuses = stack.up(settings.stack())
        if "flink" in extras:
            from infra import flink_cluster

            flink_cluster.start(settings.stack())
        if "druid" in extras:
            from infra import druid_stack

            with console.status("assembling and starting Druid (minutes on first run)"):
                druid_stack.start(druid_stack.settings_for(settings.stack()))
    except InfraError as exc:
        _fail(exc)
    _print_status(statuses)


@app.command()
def down() -> None:
    """Stop what ``up`` started (pid files only)."""
    from infra import stack

    from infra import druid_stack, flink_cluster

    settings = _settings()
    config = settings.stack()
    stopped = druid_stack.stop(druid_stack.settings_for(config).state_dir)
    if flink_cluster.stop(config):
        stopped.append("flink")
    stopped += stack.down(config)
    console.print(f"stopped: {', '.join(stopped) or 'nothing was running'}")


@app.command()
def status() -> None:
    """Show what is running."""
    from infra import stack

    _print_status(stack.status(_settings().stack()))


def _print_status(statuses: list) -> None:
    table = Table("service", "pid", "ready", "endpoint")
    for s in statuses:
        table.add_row(s.name, str(s.pid or "-"), "yes" if s.ready else "no", s.endpoint)
    console.print(table)


@topics_app.command("create")
def topics_create() -> None:
    """Create every registry topic and its DLQ twin (idempotent)."""
    from events.admin import create_topics

    result = create_topics(_settings().kafka())
    table = Table("topic", "result")
    for name, outcome in sorted(result.items()):
        table.add_row(name, outcome)
    console.print(table)


@app.command()
def produce(
    hotels: Annotated[int, typer.Option(envvar="PRICESTREAM_HOTELS")] = 20,
    rate: Annotated[float, typer.Option(envvar="PRICESTREAM_RATE", help="events per second")] = 2000.0,
    duration: Annotated[float, typer.Option(envvar="PRICESTREAM_DURATION", help="seconds")] = 10.0,
    seed: Annotated[int, typer.Option(envvar="PRICESTREAM_SEED")] = 7,
) -> None:
    """Publish simulated behaviour events to Kafka at a steady rate."""
    from events.admin import create_topics
    from pricestream.produce import produce as run_produce

    settings = _settings()
    create_topics(settings.kafka())
    with progress_bar("producing", total=int(rate * duration)) as bar:
        report = run_produce(
            settings.kafka(), hotels=hotels, rate=rate, duration_s=duration, seed=seed,
            on_progress=lambda n: bar.advance(bar.task_ids[0], n),
        )
    console.print(
        f"sent {report.sent}, delivered {report.delivered}, failed {report.failed}, "
        f"rejected before sending {report.rejected}, DLQ'd {report.dlq_records} "
        f"({report.rate:,.0f} events/s over {report.seconds:.1f}s)"
    )


def _iso(value: str) -> datetime:
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        msg = f"timestamp {value!r} has no timezone; give an ISO-8601 time with an offset, e.g. 2026-11-30T12:00Z"
        raise typer.BadParameter(msg)
    return parsed


def main() -> None:  # pragma: no cover - console script entry
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


__all__ = ["app", "json", "Path"]
