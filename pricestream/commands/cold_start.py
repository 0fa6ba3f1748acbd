"""``pricestream cold-start ...``: a new hotel's stage (rules, transfer, own) and the refit on its own labels."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pricestream.commands.common import fail, new_app, out, parse_time, settings, table
from pricestream.settings import Settings

if TYPE_CHECKING:
    import pandas as pd

    from delivery.cold_start import RedisHistoryStore
    from pricing.cold_start import ColdStartConfig

app = new_app("Cold start of a new hotel: rules on day one, the pooled models, then its own labels.")


def cold_start_config(s: Settings) -> ColdStartConfig:
    """The :class:`pricing.cold_start.ColdStartConfig` of the settings."""
    from pricing.cold_start import ColdStartConfig

    weight = {} if s.cold_start_own_weight is None else {"own_weight": s.cold_start_own_weight}
    return ColdStartConfig(transfer_after_days=s.cold_start_transfer_after_days,
                           own_after_labels=s.cold_start_own_after_labels,
                           own_after_bookings=s.cold_start_own_after_bookings,
                           rules_bid_floor=s.cold_start_rules_bid_floor, **weight)


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
    pooled: Annotated[list[Path] | None, typer.Option(
        help="a pooled bundle directory (repeat for light and heavy); default: the registry's live ones")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="writes <out>/<tier> per bundle (default: a "
                                                              "temporary directory, with --publish)")] = None,
    pooled_frame: Annotated[Path | None, typer.Option(help="the pooled training rows (parquet or CSV), sampled "
                                                           "into the refit")] = None,
    publish: Annotated[bool, typer.Option(help="publish the bundles as the hotel's own models (<registry>/hotels): "
                                               "serve prices its own-stage requests with them")] = False,
    seed: Annotated[int, typer.Option(envvar="PRICESTREAM_SEED")] = 0,
) -> None:
    """Stage three: continue each pooled bundle on the hotel's own labels (weighted), one new bundle per tier.

    The trainer service does this by itself for a hotel that reaches stage ``own`` (PRICESTREAM_COLD_START_REFIT);
    this command refits from a file of labels, and ``--publish`` serves the result.
    """
    import tempfile

    from pricing.cold_start import refit_bundles
    from pricing.errors import PricingError

    s = settings()
    config = cold_start_config(s)
    own = _read(labels, option="--labels")
    if "hotel_id" not in own.columns:
        fail(f"--labels {labels}: no hotel_id column, expected label rows with hotel_id")
        return
    own = own[own["hotel_id"] == hotel]
    if len(own) < config.own_after_labels:
        fail(f"--hotel {hotel}: {len(own)} labels in {labels}, expected at least {config.own_after_labels} "
             "(PRICESTREAM_COLD_START_OWN_AFTER_LABELS)")
        return
    if out_dir is None and not publish:
        fail("--out: missing, expected a directory for the bundles (or --publish)")
        return
    bundles = _pooled_bundles(s, pooled)
    rows = None if pooled_frame is None else _read(pooled_frame, option="--pooled-frame")
    with tempfile.TemporaryDirectory(prefix="pricestream-refit-") as tmp:
        try:
            paths = refit_bundles(list(bundles.values()), own, out_dir or Path(tmp), config=config,
                                  pooled_frame=rows, seed=seed)
        except PricingError as exc:
            fail(str(exc))
            return
        _show_refit(s, hotel, paths, publish=publish, examples=len(own))


def _pooled_bundles(s: Settings, pooled: list[Path] | None) -> dict[str, Path]:
    """Version -> bundle dir of the bundles to continue: ``--pooled``, or the registry's live ones."""
    from feedback.registry import ModelRegistry
    from pricing.errors import PricingError
    from pricing.training import read_meta

    if pooled:
        try:
            return {str(read_meta(p)["version"]): p for p in pooled}
        except PricingError as exc:
            fail(f"--pooled: {exc}")
    registry = ModelRegistry(s.registry())
    live = [e for tier in ("light", "heavy") if (e := registry.current(tier)) is not None]
    if not live:
        fail(f"--pooled: none given and the registry {s.registry()} has no promoted model, expected one of them")
    return {e.version: e.path for e in live}


def _show_refit(s: Settings, hotel: str, paths: list[Path], *, publish: bool, examples: int) -> None:
    from feedback.errors import RegistryError
    from feedback.hotel_models import HotelModels
    from feedback.hotel_refit import tag_version
    from pricing.training import read_meta

    by_tier = {str(read_meta(p)["tier"]): p for p in paths}
    shown = []
    if publish:
        for path in paths:
            tag_version(path, hotel)
        parent = {str(read_meta(p)["tier"]): str(read_meta(p)["parent"]) for p in paths}
        try:
            published = HotelModels(s.registry()).publish(hotel, by_tier, parents=parent, examples=examples)
        except RegistryError as exc:
            fail(str(exc))
            return
        shown = [(str(e.path), e.version, parent[tier]) for tier, e in published.live.items()]
    else:
        shown = [(str(p), read_meta(p)["version"], read_meta(p)["parent"]) for p in paths]
    title = f"cold start refit of {hotel}" + (" (published: serve prices it with these)" if publish else "")
    out.print(table(("bundle", "version", "continued from"), shown, title=title))


@app.command("refits")
def refits(
    withdraw: Annotated[str | None, typer.Option(help="stop serving this hotel's own models (back to the pooled)")]
    = None,
) -> None:
    """The hotels with published own models (the trainer's refits, ``refit --publish``), or withdraw one."""
    from feedback.hotel_models import HotelModels

    hotels = HotelModels(settings().registry())
    if withdraw is not None:
        if not hotels.withdraw(withdraw):
            fail(f"--withdraw {withdraw}: no own models published for that hotel, expected one of "
                 f"{sorted(hotels.live())}")
            return
        out.print(f"withdrawn: {withdraw} is priced by the pooled models again")
        return
    rows = [(hotel, tier, e.version, m.parents.get(tier, "-"), m.examples, m.published_at)
            for hotel, m in sorted(hotels.live().items()) for tier, e in sorted(m.live.items())]
    out.print(table(("hotel", "tier", "version", "continued from", "examples", "published"), rows,
                    title=f"per-hotel models (generation {hotels.generation})"))


def history_store(s: Settings) -> RedisHistoryStore:
    """The served hotels' cold-start history (first request, label counts) in the online store's Redis."""
    from delivery.cold_start import RedisHistoryStore, history_prefix
    from features.connection import redis_client

    features = s.features()
    return RedisHistoryStore(redis_client(features), prefix=history_prefix(features.project))


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
    out.print(table(("hotel", "first seen", "labels", "bookings", "stage", "own models"),
                    [(hotel, "mature" if first is None else first.isoformat(), labels, bookings, reason,
                      _own_models(s, hotel))], title="cold start"))


def _own_models(s: Settings, hotel: str) -> str:
    """The hotel's published refit (what ``serve`` prices it with in stage ``own``), or why the pooled models do."""
    from feedback.hotel_models import HotelModels

    published = HotelModels(s.registry()).get(hotel)
    if published is None:
        return "none published: the pooled models"
    return ", ".join(e.version for _, e in sorted(published.live.items()))


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
