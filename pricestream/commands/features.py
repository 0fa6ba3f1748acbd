"""``pricestream features ...``: Feast apply, online/offline writers, freshness status."""

from __future__ import annotations

from typing import Annotated

import typer

from pricestream.commands.common import err, iso, kv_table, new_app, out, settings, stoppable

app = new_app("The feature store: Feast definitions, online and offline writers, freshness.")

_MaxIdle = Annotated[
    float | None,
    typer.Option("--max-idle", envvar="PRICESTREAM_MAX_IDLE", min=0.1, help="stop after this many idle seconds"),
]


@app.command("status")
def features_status() -> None:
    """Online freshness (Kafka append to Redis, p50/p99) and the online writer's row counts."""
    from features.freshness import read_status

    config = settings().features()
    summary = read_status(config.status_file)
    if summary is None:
        out.print(f"the online writer has not run for project {config.project!r} (no {config.status_file})")
        out.print("start it with: pricestream features write-online")
        return
    rows = [
        ("project", config.project),
        ("freshness p50 (s)", summary.p50_s),
        ("freshness p99 (s)", summary.p99_s),
        ("freshness max (s)", summary.max_s),
        ("rows in window", summary.count),
        ("rows written", summary.written),
        ("rows skipped (stale or superseded in batch)", summary.skipped_stale),
        ("updated at", iso(summary.updated_at)),
    ]
    out.print(kv_table(rows, title="online feature store"))


@app.command("apply")
def features_apply() -> None:
    """Register the entities and feature views with Feast (idempotent)."""
    from features.store import build_store

    config = settings().features()
    with err.status("feast apply"):
        store = build_store(config, apply=True)
        views = sorted(v.name for v in store.list_feature_views())
        entities = sorted(e.name for e in store.list_entities())
    out.print(
        f"project {config.project!r}: {len(entities)} entities ({', '.join(entities)}), "
        f"{len(views)} feature views ({', '.join(views)}); registry {config.registry}"
    )


@app.command("write-online")
def write_online(max_idle: _MaxIdle = None) -> None:
    """Consume ``features.v1`` into Redis (Feast layout, compare-and-set) until Ctrl-C or idle."""
    from features import online_writer

    config = settings().features()
    with stoppable() as stop, err.status(f"online writer: {config.kafka.topic(config.topic)} -> {config.redis_url}"):
        stats = online_writer.run(config, max_idle_s=max_idle, stop_event=stop)
    out.print(
        f"online writer: polled {stats.polled}, written {stats.written}, skipped as stale {stats.skipped_stale}, "
        f"superseded in batch {stats.superseded}, dead-lettered {stats.dead_lettered}"
    )


@app.command("write-offline")
def write_offline(max_idle: _MaxIdle = None) -> None:
    """Consume ``features.v1`` into date-partitioned parquet (offline store) until Ctrl-C or idle."""
    from features import offline_writer

    config = settings().features()
    with stoppable() as stop, err.status(f"offline writer: {config.kafka.topic(config.topic)} -> {config.offline}"):
        stats = offline_writer.run(config, max_idle_s=max_idle, stop_event=stop)
    out.print(
        f"offline writer: polled {stats.polled}, written {stats.written} in {stats.flushes} flushes, "
        f"dead-lettered {stats.dead_lettered}; store {config.offline}"
    )


@app.command("compact")
def features_compact(
    target_mb: Annotated[float, typer.Option(min=0.01, help="target size of a merged parquet file, MiB")] = 64.0,
) -> None:
    """Merge the offline store's small parquet parts, per date partition, into files of the target size."""
    from rich.progress import Progress

    from features.compaction import compact

    root = settings().offline()
    with Progress(console=err, transient=True) as bar:
        task = bar.add_task(f"compacting {root}", total=None)
        result = compact(root, target_bytes=int(target_mb * (1 << 20)),
                         progress=lambda done, total: bar.update(task, completed=done, total=total))
    out.print(f"compacted {result.partitions} partition(s) under {root}: "
              f"{result.files_before:,} parquet files -> {result.files_after:,}")
