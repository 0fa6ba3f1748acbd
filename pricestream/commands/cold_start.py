"""``pricestream cold-start ...``: a new hotel's stage (rules, transfer, own) and the refit on its own labels."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pricestream.commands.common import fail, new_app, out, parse_time, settings, table
from pricestream.settings import Settings

if TYPE_CHECKING:
    import pandas as pd

    from pricing.cold_start import ColdStartConfig
    from pricing.cold_start_serving import RedisHistoryStore

app = new_app("Cold start of a new hotel: rules on day one, the pooled models, then its own labels.")


def cold_start_config(s: Settings) -> ColdStartConfig:
    """The :class:`pricing.cold_start.ColdStartConfig` of the settings."""
    from pricing.cold_start import ColdStartConfig

    weight = {} if s.cold_start_own_weight is None else {"own_weight": s.cold_start_own_weight}
    return ColdStartConfig(transfer_after_days=s.cold_start_transfer_after_days,
                           own_after_labels=s.cold_start_own_after_labels,
                           own_after_bookings=s.cold_start_own_after_bookings, **weight)


@app.command("stage")
def stage(
    first_seen: Annotated[str, typer.Option("--first-seen", help="the hotel's first request (ISO-8601, with zone)")],
    labels: Annotated[int, typer.Option(min=0, help="labels of its own so far")] = 0,
    bookings: Annotated[int, typer.Option(min=0, help="bookings among those labels")] = 0,
    at: Annotated[str | None, typer.Option(help="when (ISO-8601, with zone); default now")] = None,
) -> None:
    """The stage a hotel is priced in and the rule that put it there (thresholds: PRICESTREAM_COLD_START_*)."""
    from datetime import UTC, datetime

    from pricing.cold_start import HotelHistory, stage_of

    config = cold_start_config(settings())
    seen = parse_time(first_seen, option="--first-seen")
    when = datetime.now(tz=UTC) if at is None else parse_time(at, option="--at")
    name, reason = stage_of(HotelHistory(seen, labels, bookings), when, config)
    out.print(table(("stage", "reason"), [(name, reason)], title="cold start"))


@app.command("refit")
def refit(
    hotel: Annotated[str, typer.Option(help="the new hotel's id (rows of other hotels in --labels are ignored)")],
    labels: Annotated[Path, typer.Option(help="its label rows: parquet or CSV with features, price, base_rate, "
                                               "booked, hotel_id")],
    pooled: Annotated[list[Path], typer.Option(help="a pooled bundle directory (repeat for light and heavy)")],
    out_dir: Annotated[Path, typer.Option("--out", help="writes <out>/<tier> per bundle")],
    pooled_frame: Annotated[Path | None, typer.Option(help="the pooled training rows (parquet or CSV), sampled "
                                                           "into the refit")] = None,
    seed: Annotated[int, typer.Option(envvar="PRICESTREAM_SEED")] = 0,
) -> None:
    """Stage three: continue each pooled bundle on the hotel's own labels (weighted), one new bundle per tier."""
    from pricing.cold_start import refit_bundles
    from pricing.errors import PricingError
    from pricing.training import read_meta

    config = cold_start_config(settings())
    own = _read(labels, option="--labels")
    if "hotel_id" not in own.columns:
        fail(f"--labels {labels}: no hotel_id column, expected label rows with hotel_id")
        return
    own = own[own["hotel_id"] == hotel]
    if len(own) < config.own_after_labels:
        fail(f"--hotel {hotel}: {len(own)} labels in {labels}, expected at least {config.own_after_labels} "
             "(PRICESTREAM_COLD_START_OWN_AFTER_LABELS)")
        return
    rows = None if pooled_frame is None else _read(pooled_frame, option="--pooled-frame")
    try:
        paths = refit_bundles(pooled, own, out_dir, config=config, pooled_frame=rows, seed=seed)
    except PricingError as exc:
        fail(str(exc))
        return
    shown = [(str(p), read_meta(p)["version"], read_meta(p)["parent"]) for p in paths]
    out.print(table(("bundle", "version", "continued from"), shown, title=f"cold start refit of {hotel}"))


def history_store(s: Settings) -> RedisHistoryStore:
    """The served hotels' cold-start history (first request, label counts) in the online store's Redis."""
    from features.connection import redis_client
    from pricing.cold_start_serving import RedisHistoryStore, history_prefix

    features = s.features()
    return RedisHistoryStore(redis_client(features), prefix=history_prefix(features.project))  # type: ignore[arg-type]


@app.command("history")
def history(
    hotel: Annotated[str, typer.Option(help="the hotel's id")],
    at: Annotated[str | None, typer.Option(help="when (ISO-8601, with zone); default now")] = None,
) -> None:
    """What ``serve`` (PRICESTREAM_COLD_START_SERVE) recorded of a hotel: first request, labels, bookings, stage."""
    from datetime import UTC, datetime

    from pricing.cold_start import HotelHistory, stage_of

    s = settings()
    store = history_store(s)
    when = datetime.now(tz=UTC) if at is None else parse_time(at, option="--at")
    raw = store.recorded(hotel)
    labels, bookings = store.counts(hotel)
    if raw is None:
        out.print(table(("hotel", "first seen", "labels", "bookings", "stage"),
                        [(hotel, "never priced", labels, bookings, "rules: no request yet")], title="cold start"))
        return
    first = store.first_seen(hotel, when, mature=lambda: False)
    reason = ("own: a mature hotel, with behaviour in the feature store before its first request" if first is None
              else stage_of(HotelHistory(first, labels, bookings), when, cold_start_config(s))[1])
    out.print(table(("hotel", "first seen", "labels", "bookings", "stage"),
                    [(hotel, "mature" if first is None else first.isoformat(), labels, bookings, reason)],
                    title="cold start"))


@app.command("labels")
def add_labels(
    hotel: Annotated[str, typer.Option(help="the hotel's id")],
    labels: Annotated[int, typer.Option(min=0, help="labels to add (decisions joined with outcomes)")],
    bookings: Annotated[int, typer.Option(min=0, help="bookings among them")] = 0,
) -> None:
    """Add to a hotel's label counts, which move it to stage ``own`` in ``serve`` at the thresholds."""
    if bookings > labels:
        fail(f"--bookings {bookings}: more than --labels {labels}, expected at most the labels added")
        return
    total = history_store(settings()).add_labels(hotel, labels=labels, bookings=bookings)
    out.print(table(("hotel", "labels", "bookings"), [(hotel, *total)], title="cold start"))


def _read(path: Path, *, option: str) -> pd.DataFrame:
    """A parquet or CSV file as a frame; a missing or unreadable file stops the command naming the option."""
    import pandas as pd

    frame = pd.DataFrame()
    if not path.is_file():
        fail(f"{option} {path}: not a file, expected a parquet or CSV file")
    try:
        frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except (OSError, ValueError) as exc:
        fail(f"{option} {path}: unreadable ({exc}), expected a parquet or CSV file")
    return frame
