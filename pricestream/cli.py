"""The ``pricestream`` command: a thin shell over library calls.

Every flag has a ``PRICESTREAM_*`` environment variable (see :mod:`pricestream.settings`);
times are ISO-8601 with a timezone; long work shows a progress bar on stderr and results go
to stdout. Any error ends the command with one red line naming what is wrong and exit code 1.

Command groups live in :mod:`pricestream.commands` (the stack's ``up``, ``down``, ``status``, ``topics`` and
``produce`` in :mod:`pricestream.commands.stack`); this module holds ``serve``, ``query``, ``audit`` and ``demo``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from pricestream.commands import autoscale as autoscale_cmd
from pricestream.commands import bid_price as bid_price_cmd
from pricestream.commands import cancellations as cancellations_cmd
from pricestream.commands import cold_start as cold_start_cmd
from pricestream.commands import features as features_cmd
from pricestream.commands import heavy as heavy_cmd
from pricestream.commands import jobs as jobs_cmd
from pricestream.commands import k8s as k8s_cmd
from pricestream.commands import keys as keys_cmd
from pricestream.commands import market as market_cmd
from pricestream.commands import models as models_cmd
from pricestream.commands import overbooking as overbooking_cmd
from pricestream.commands import reports as reports_cmd
from pricestream.commands import router as router_cmd
from pricestream.commands import run as run_cmd
from pricestream.commands import services as services_cmd
from pricestream.commands import simulate as simulate_cmd
from pricestream.commands import snapshots as snapshots_cmd
from pricestream.commands import stack as stack_cmd
from pricestream.commands.common import (
    HandledGroup,
    ensure_bindable,
    err,
    fail,
    frame_table,
    new_app,
    one_of,
    out,
    settings,
)
from pricestream.progress import progress_bar

if TYPE_CHECKING:
    pass

app = typer.Typer(
    help="Real-time hotel pricing on a streaming feature platform.",
    no_args_is_help=True,
    cls=HandledGroup,
    pretty_exceptions_enable=False,
)
audit_app = new_app("The hash-chained audit log of pricing decisions.")
app.add_typer(stack_cmd.topics_app, name="topics")
app.add_typer(audit_app, name="audit")
app.add_typer(features_cmd.app, name="features")
app.add_typer(jobs_cmd.flink_app, name="flink")
app.add_typer(jobs_cmd.jobs_app, name="jobs")
app.add_typer(jobs_cmd.druid_app, name="druid")
app.add_typer(snapshots_cmd.app, name="snapshot")
app.add_typer(models_cmd.models_app, name="models")
app.add_typer(models_cmd.rollout_app, name="rollout")
app.add_typer(reports_cmd.monitor_app, name="monitor")
app.add_typer(reports_cmd.evaluate_app, name="evaluate")
app.add_typer(router_cmd.router_app, name="router")
app.add_typer(services_cmd.app, name="services")
app.command("run")(run_cmd.run)
app.add_typer(market_cmd.app, name="market")
app.add_typer(cold_start_cmd.app, name="cold-start")
app.add_typer(bid_price_cmd.app, name="bid-price")
app.add_typer(cancellations_cmd.app, name="cancellations")
app.add_typer(overbooking_cmd.app, name="overbooking")
app.add_typer(keys_cmd.app, name="keys")
app.add_typer(heavy_cmd.app, name="heavy")
app.add_typer(k8s_cmd.app, name="k8s")
app.command("autoscale")(autoscale_cmd.autoscale)
app.command("simulate")(simulate_cmd.simulate)
for _stack_command in stack_cmd.COMMANDS:  # up, down, status, produce
    app.command()(_stack_command)


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(envvar="PRICESTREAM_HTTP_HOST", help="bind address")] = None,
    port: Annotated[int | None, typer.Option(envvar="PRICESTREAM_HTTP_PORT", min=1, max=65535)] = None,
    audit: Annotated[bool, typer.Option(envvar="PRICESTREAM_AUDIT", help="append decisions to the audit log")] = True,
) -> None:
    """Serve ``POST /v1/price`` (uvicorn) through the serving path of :mod:`pricestream.app`.

    Decisions go to the audit log and ``pricing.decisions``; the running server follows
    ``rollout`` and ``models`` commands and router recalibration within ``PRICESTREAM_FOLLOW_INTERVAL_S``.
    SIGTERM: in-flight requests are answered, the audit log is fsynced, Kafka has every decision, exit 0.
    """
    from events.admin import create_topics
    from events.topics import TOPICS
    from pricestream.app import build_serving_path, serve_http

    s = settings().acting_as("scorer", redis_user="scorer")  # a secure stack's least-privilege logins
    service = s.http_service(host or s.http_host)  # refuses security off on a bind beyond loopback, before loading
    ensure_bindable(host or s.http_host, port or s.http_port, what="serve --port")  # before minutes of training
    if s.http_ops_port is not None:
        ensure_bindable(s.ops_host, s.http_ops_port, what="serve ops port (PRICESTREAM_HTTP_OPS_PORT)")
    create_topics(s.kafka(), [TOPICS["pricing.decisions"], TOPICS["pricing.decisions.dlq"],
                              *([TOPICS["audit.heads"]] if audit and s.audit_topic_anchors() else [])])
    with progress_bar("loading models", total=2) as bar:
        path = build_serving_path(
            s, audit=audit, on_progress=lambda step, done, total: bar.update(
                bar.task_ids[0], description=step, completed=done, total=total)
        )
        bar.update(bar.task_ids[0], description="models loaded", completed=2, total=2)
    health = path.scorer.health()
    bind_host, bind_port = host or s.http_host, port or s.http_port
    err.print(
        f"serving on {service.scheme}://{bind_host}:{bind_port}  light {health['light']['version']}, "
        f"heavy {health['heavy']['version']}, rollout {health['rollout']['stage']}; "
        f"audit log: {s.audit() if audit else 'off'}; decisions to {s.kafka().topic('pricing.decisions')}"
    )
    ops = None if s.http_ops_port is None else (s.ops_host, s.http_ops_port)
    err.print(f"API keys: {service.keys_file or 'off (loopback bind)'}; rate limit: {service.rate_limit or 'off'}; "
              f"/healthz and /metrics on {f'port {ops[1]}' if ops else 'the pricing port'}")
    serve_http(path, host=bind_host, port=bind_port, service=service, ops=ops)


@app.command("serve-stream")
def serve_stream(
    max_idle: Annotated[
        float | None, typer.Option(envvar="PRICESTREAM_STREAM_MAX_IDLE", help="stop after this many idle seconds")
    ] = None,
    batch_size: Annotated[int, typer.Option(envvar="PRICESTREAM_STREAM_BATCH", min=1)] = 500,
    ops_port: Annotated[int | None, typer.Option(
        envvar="PRICESTREAM_OPS_PORT", min=0, max=65535, help="/healthz and /metrics (default: none; 0: any)")] = None,
) -> None:
    """Price ``pricing.requests`` into ``pricing.decisions`` as a consumer-group service."""
    from events.admin import create_topics
    from pricestream.app import build_serving_path
    from pricestream.commands.common import json_logs, stoppable
    from serving.stream import StreamScorerConfig, runtime_config
    from serving.stream import run as run_stream

    s = settings()
    if ops_port is not None:
        ensure_bindable(s.ops_host, ops_port, what="serve-stream --ops-port")  # before the models and the group
    json_logs()
    create_topics(s.kafka())
    config = StreamScorerConfig(kafka=s.kafka(), batch_size=batch_size)
    runtime = runtime_config(config, max_idle_s=max_idle, ops_host=s.ops_host, ops_port=ops_port,
                             grace_s=s.grace_s, log_every_s=s.log_every_s,
                             instance_id=f"{s.topic_prefix}serve-stream-{s.service_instance}")
    # the stream runtime publishes the decisions it serves; the path publishes only shadow ones
    with build_serving_path(s, publish="shadow") as path, stoppable(s.grace_s) as stop:
        stats = run_stream(config, path.scorer, stop_event=stop, runtime=runtime)
    out.print(
        f"decisions {stats.decisions}, dead-lettered {stats.dead_lettered}, tiers {dict(stats.by_tier)}, "
        f"{stats.throughput:,.0f} requests/s while busy"
    )


_ENGINES: tuple[Literal["auto", "druid", "duckdb"], ...] = ("auto", "druid", "duckdb")


@app.command()
def query(
    sql: Annotated[str, typer.Argument(help="SQL over features_v1, events (DuckDB) or behaviour_events (Druid)")],
    engine: Annotated[str, typer.Option(envvar="PRICESTREAM_QUERY_ENGINE", help="auto, druid or duckdb")] = "auto",
    out_file: Annotated[
        Path | None, typer.Option("--out", envvar="PRICESTREAM_QUERY_OUT", help="write all rows to .csv or .parquet")
    ] = None,
    limit: Annotated[int, typer.Option(envvar="PRICESTREAM_QUERY_LIMIT", min=1, help="rows shown")] = 50,
) -> None:
    """Run analyst SQL on Druid, or on DuckDB over the offline store when Druid is not up.

    features_v1 holds one row per feature row (Druid and DuckDB): COUNT(*) counts them. Druid's
    behaviour_events is rolled up per minute and key: there count events with SUM(events), not COUNT(*),
    which counts rolled-up rows (29,990 for 30,000 events), and average prices with
    SUM(price_sum) / SUM(priced_events). On DuckDB, events holds one row per event the feature job
    accepted, with the contract's field names (event_type, event_time, hotel_id, room_type, stay_date,
    channel, segment, rooms, price_shown, price_paid, rate, competitor_id, rooms_left, capacity,
    booking_id) and the job's columns (is_search, is_view, n_booked, n_cancelled, lead_days): for
    example SELECT hotel_id, count(*), avg(price_paid) FROM events WHERE event_type = 'booking' GROUP BY 1.
    """
    from features.analytics import query as run_query

    chosen = one_of("--engine", engine, _ENGINES)
    if out_file is not None and out_file.suffix not in (".csv", ".parquet"):
        fail(f"--out: got {str(out_file)!r}, expected a path ending in .csv or .parquet")
    s = settings()
    with err.status(f"querying ({engine})"):
        result = run_query(sql, engine=chosen, druid_url=s.druid_url, offline_root=s.offline())
    from pricestream.commands.features import plain_numbers

    out.print(frame_table(plain_numbers(result.frame.head(limit)), limit=limit))
    shown = min(limit, len(result.frame))
    line = f"{len(result.frame)} rows (showing {shown}), answered by {result.engine}"
    if out_file is not None:
        line += f"; written to {result.write(out_file)}"
    out.print(line)


@audit_app.command("verify")
def audit_verify(
    path: Annotated[Path | None, typer.Argument(envvar="PRICESTREAM_AUDIT_LOG", help="audit log (default: settings)")]
    = None,
) -> None:
    """Walk the MAC chain, head and anchors of the audit log; exit 1 naming the first broken line."""
    from audit.verify import verify

    s = settings().acting_as("auditor")  # a secure stack's auditor principal reads audit.heads, nothing else
    target = path or s.audit()
    remote = None
    if s.audit_topic_anchors():  # the anchors on the audit.heads topic too (they survive deleted files)
        from audit.anchors import resolve_key
        from audit.errors import AuditLogError
        from audit.kafka_anchors import read_topic_anchors

        try:
            remote = read_topic_anchors(s.kafka(), target, resolve_key(s.audit_key))
        except AuditLogError as exc:  # e.g. the principal may not read the topic: a message, not a traceback
            fail(f"audit log {target}: {exc}")
    result = verify(target, key=s.audit_key, anchors=s.audit_anchors, remote=remote)
    last = f"last intact entry: seq {result.last_seq} at {result.last_timestamp or '-'}, hash {result.last_hash[:12]}"
    if not result.ok and result.first_bad_position is None:
        fail(f"audit log {target}: {result.reason}")
    if not result.ok:
        fail(f"audit log {target}: chain broken at line {result.first_bad_position}: {result.reason} "
             f"({result.entries} entries intact before it; {last})")
    out.print(f"audit log {target}: {result.entries} entries, hash chain intact; {last}")


@audit_app.command("repair")
def audit_repair(
    path: Annotated[Path | None, typer.Argument(envvar="PRICESTREAM_AUDIT_LOG", help="audit log (default: settings)")]
    = None,
) -> None:
    """Cut a torn last line (a crash in the middle of a write) off the log; its bytes are saved aside."""
    from audit.files import repair

    target = path or settings().audit()
    if not target.exists():
        fail(f"audit log {target}: no such file")
    result = repair(target)
    if result.dropped_bytes == 0:
        out.print(f"audit log {target}: no torn last line; nothing to repair (last seq {result.last_seq})")
        return
    out.print(f"audit log {target}: cut {result.dropped_bytes} bytes of a torn last line (saved to "
              f"{result.saved_to}); last intact entry seq {result.last_seq}")


@app.command()
def demo(
    nights: Annotated[int, typer.Option(envvar="PRICESTREAM_DEMO_NIGHTS", min=1,
                                        help="consecutive stay nights counted, each played to its close")] = 10,
    hotels: Annotated[int, typer.Option(envvar="PRICESTREAM_DEMO_HOTELS", min=1)] = 3,
    seed: Annotated[int | None, typer.Option(envvar="PRICESTREAM_SEED")] = None,
    market: Annotated[str, typer.Option(envvar="PRICESTREAM_DEMO_MARKET",
                                        help="simulated market: resort, city (calibrated presets) or flat")] = "city",
    window_days: Annotated[int, typer.Option(envvar="PRICESTREAM_DEMO_WINDOW_DAYS", min=1,
                                             help="booking window played before the first night (at most the "
                                                  "market's horizon; earlier bookings are history)")] = 90,
    phases: Annotated[int, typer.Option(envvar="PRICESTREAM_DEMO_PHASES", min=1,
                                        help="parts of about equal shoppers; the services catch up after each")] = 6,
    scenario: Annotated[str, typer.Option(envvar="PRICESTREAM_DEMO_SCENARIO",
                                          help="regime change at the middle phase (market.scenarios)")] = "price_war",
    train_every: Annotated[int, typer.Option(envvar="PRICESTREAM_DEMO_TRAIN_EVERY", min=1,
                                             help="training examples per guarded update of the trainer")] = 150,
) -> None:
    """End to end on the local stack over complete stay nights: RevPAR, ADR and occupancy against static, rules
    only and the DP oracle on the same shoppers, a regime change mid-run, and what the loop did about it."""
    from pricestream.demo import MARKETS, SCENARIOS, phases_done, run_demo

    if market not in MARKETS:
        fail(f"--market / PRICESTREAM_DEMO_MARKET: {market!r} is not a market; expected one of {', '.join(MARKETS)}")
    if scenario not in SCENARIOS:
        fail(f"--scenario / PRICESTREAM_DEMO_SCENARIO: {scenario!r} is not a scenario; expected one of "
             f"{', '.join(SCENARIOS)}")
    s = settings()
    with progress_bar("demo", total=phases) as bar:
        task = bar.task_ids[0]
        report = run_demo(
            s, nights=nights, hotels=hotels, seed=s.seed if seed is None else seed, market=market,
            window_days=window_days, phases=phases, scenario=scenario, train_every=train_every,
            on_progress=lambda message: bar.update(task, description=message, completed=phases_done(message)),
        )
    for line in report.summary_lines():
        out.print(line, highlight=False, markup=False, soft_wrap=True)


def main() -> None:  # pragma: no cover - console script entry
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


__all__ = ["app", "main"]
