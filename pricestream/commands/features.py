"""``pricestream features ...``: Feast apply, online/offline writers, freshness status."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pricestream.commands.common import err, iso, kv_table, new_app, out, settings, stoppable

if TYPE_CHECKING:
    import pandas as pd

app = new_app("The feature store: Feast definitions, online and offline writers, freshness.")

_MaxIdle = Annotated[
    float | None,
    typer.Option("--max-idle", envvar="PRICESTREAM_MAX_IDLE", min=0.1, help="stop after this many idle seconds"),
]


@app.command("status")
def features_status() -> None:
    """Online freshness (Kafka append to Redis, p50/p99) and row counts: of the feature job's own Redis sink
    (where it writes Redis) and of the Python online writer (where it ran)."""
    from features.freshness import FreshnessSummary, read_sink_status, read_status, sink_status_key
    from features.online_writer import redis_client

    config = settings().features()
    sources: list[tuple[str, FreshnessSummary]] = []
    from features.connection import STORE_ERRORS

    try:
        client = redis_client(config)
        sink = read_sink_status(client.hgetall(sink_status_key(config.project)))
        client.close()
    except STORE_ERRORS as exc:
        out.print(f"redis at {config.redis_url}: {exc} (the job's sink status is kept there)")
        sink = None
    if sink is not None:
        sources.append(("feature job's Redis sink (bucket upper edges, since the job started)", sink))
    writer = read_status(config.status_file)
    if writer is not None:
        sources.append(("online writer (recent window)", writer))
    if not sources:
        out.print(f"nothing has written the online store of project {config.project!r} yet: no status from the "
                  f"feature job's sink in Redis and no {config.status_file}")
        out.print("start the pipeline with: pricestream run (or pricestream jobs run features)")
        return
    for title, summary in sources:
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
        out.print(kv_table(rows, title=f"online feature store: {title}"))


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
        f"offline writer: polled {stats.polled}, written {stats.written} rows and {stats.events} events in "
        f"{stats.flushes} flushes, "
        f"dead-lettered {stats.dead_lettered}; store {config.offline}"
    )


@app.command("history")
def features_history(
    since: Annotated[str | None, typer.Option(envvar="PRICESTREAM_HISTORY_SINCE",
                                              help="ISO date: rewrite from this date on (default: every date)")] = None,
) -> None:
    """Rewrite the point-in-time history (as-of rows of every view) from the offline store's raw events.

    The offline writer keeps it current after each flush; this rebuilds it, e.g. after a compaction
    or a change of the windows.
    """
    from datetime import date

    from rich.progress import Progress

    from features.history import asof_root, materialise
    from pricestream.commands.common import fail

    if since is not None:
        try:
            date.fromisoformat(since)
        except ValueError:
            fail(f"--since: got {since!r}, expected an ISO date YYYY-MM-DD")
    root = settings().offline()
    with Progress(console=err, transient=True) as bar:
        task = bar.add_task(f"history of {root}", total=None)
        done = materialise(root, since=since, progress=lambda n, total: bar.update(task, completed=n, total=total))
    out.print(f"history: {done.rows:,} as-of rows of {done.dates} date(s) in {done.files} file(s) under "
              f"{asof_root(root)}")


@app.command("skew")
def features_skew(
    snapshot: Annotated[str, typer.Option("--snapshot", envvar="PRICESTREAM_SKEW_SNAPSHOT",
                                          help="the training frame: a snapshot id")],
    served: Annotated[str | None, typer.Option(
        "--served", envvar="PRICESTREAM_SKEW_SERVED",
        help="the served features: a snapshot id, or a .parquet/.csv of features; default: the values "
             "served before each view event in the offline store (its raw events and their history)")] = None,
) -> None:
    """PSI per feature between a training frame and the features served (training/serving skew).

    Ten reference-quantile bins per feature, as the drift monitor bins them; a feature with fewer
    than 30 values on either side is left out. PSI above 0.1 is a shift worth a look, above 0.2 a
    material one; the noise limit (``limit``) is what two samples of one distribution reach at these sizes.
    """
    import pandas as pd

    from events.catalog import ALL_FEATURES
    from features.snapshots import load_snapshot
    from feedback.monitors.drift import MIN_SAMPLES, DriftMonitor
    from pricestream.commands.common import fail, table

    s = settings()
    reference = load_snapshot(s.snapshots(), snapshot)
    if served is None:
        frame = _served_before_views(s.offline())
    elif Path(served).suffix in (".parquet", ".csv"):
        path = Path(served)
        if not path.is_file():
            fail(f"--served: file {served!r} does not exist")
        frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    else:
        frame = load_snapshot(s.snapshots(), served)
    names = tuple(n for n in ALL_FEATURES if n in frame and reference[n].notna().sum() >= MIN_SAMPLES
                  and frame[n].notna().sum() >= MIN_SAMPLES)
    if not names:
        fail(f"skew: no feature has {MIN_SAMPLES} values in both the snapshot and the served features")
    report = DriftMonitor(reference, features=names).check(frame)
    rows = [(f.feature, f"{f.psi:.3f}", f"{f.psi_limit:.3f}", f"{f.wasserstein:.3f}", f.n) for f in report]
    out.print(table(("feature", "psi", "limit", "wasserstein/std", "served values"), rows,
                    title=f"skew: snapshot {snapshot} ({len(reference):,} rows) vs served ({len(frame):,} rows)"))
    worst = max(report, key=lambda f: f.psi)
    out.print(f"max psi {worst.psi:.3f} ({worst.feature}); features above 0.1: "
              f"{[f.feature for f in report if f.psi > 0.1] or 'none'}")


def _served_before_views(offline: Path) -> pd.DataFrame:
    """The features as of 1 ms before each view event of the offline store: what the pricing read saw."""
    import pandas as pd

    from features.raw_events import read_events
    from features.replay import POINT_COLUMNS, features_at
    from pricestream.commands.common import fail

    events = read_events(offline)
    views = events[events["event_type"] == "view"]
    if views.empty:
        fail(f"skew: the offline store {offline} holds no view events; give --served")
    points = views[list(POINT_COLUMNS)].assign(event_time=views["event_time"] - pd.Timedelta(milliseconds=1))
    return features_at(events, points)


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


def plain_numbers(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its real columns as plain decimal text (``15770.25``, not ``1.577e+04``) for a table.

    Example:
        >>> import pandas as pd
        >>> plain_numbers(pd.DataFrame({"x": [15770.25, 3.0, 0.000012, float("nan")]}))["x"].tolist()
        ['15770.25', '3', '1.2e-05', '-']
    """
    out = frame.copy()
    for name in out.columns:
        if out[name].dtype.kind == "f":
            out[name] = [_number(x) for x in out[name]]
    return out


def _number(x: float) -> str:
    if x != x:
        return "-"
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    if abs(x) >= 1e-3:
        return f"{x:.4f}".rstrip("0").rstrip(".")
    return f"{x:.2g}"
