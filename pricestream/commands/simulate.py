"""``pricestream simulate``: the calibrated market's shoppers against the running system, through ``serve``."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from pricestream.commands.common import fail, out, settings, stoppable


def simulate(
    market: Annotated[str, typer.Option(envvar="PRICESTREAM_SIMULATE_MARKET", help="resort, city or flat")] = "city",
    hotels: Annotated[int, typer.Option(envvar="PRICESTREAM_SIMULATE_HOTELS", min=1, max=50)] = 4,
    days: Annotated[float, typer.Option(envvar="PRICESTREAM_SIMULATE_DAYS", min=0.01, max=60.0,
                                        help="simulated days of shoppers, ending now")] = 1.0,
    rate: Annotated[float, typer.Option(envvar="PRICESTREAM_SIMULATE_RATE", min=1.0,
                                        help="most pricing requests per second")] = 50.0,
    duration: Annotated[float | None, typer.Option(envvar="PRICESTREAM_SIMULATE_DURATION", min=1.0,
                                                   help="stop after this many seconds (default: all the days)")] = None,
    url: Annotated[str | None, typer.Option(envvar="PRICESTREAM_SIMULATE_URL",
                                            help="serve's address (default: the local http host and port)")] = None,
    api_key: Annotated[str | None, typer.Option(envvar="PRICESTREAM_API_KEY", help="key of a secured serve")] = None,
    seed: Annotated[int, typer.Option(envvar="PRICESTREAM_SEED")] = 0,
) -> None:
    """Drive a running system: shoppers priced by serve, their searches, views, bookings and cancellations
    published to behaviour.events, so labels, training and rollouts follow (start it with `pricestream run`)."""
    from events.admin import create_topics
    from events.errors import TopicError
    from events.topics import TOPICS
    from market.errors import UnknownKeyError
    from pricestream.demo import demo_market
    from pricestream.traffic import TrafficDriver, TrafficError

    s = settings()
    try:
        sim_market = demo_market(market, hotels=hotels, seed=seed)
    except UnknownKeyError as exc:
        fail(f"--market: {exc}")
    try:  # what `pricestream run` creates; a driver started first must not lose its events
        create_topics(s.kafka(), [TOPICS["behaviour.events"], TOPICS["behaviour.events.dlq"]])
    except TopicError as exc:
        fail(f"{exc} (create the topics with `pricestream topics create`)")
    base = url or f"http://{s.http_host}:{s.http_port}"
    driver = TrafficDriver(s, sim_market, base, rate=rate, api_key=api_key)
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[line]}"), TimeElapsedColumn())
    with Progress(*columns, console=out, transient=False) as bar:
        task = bar.add_task(f"{market}, {hotels} hotels, {days:g} days -> {base}", total=duration, line="")

        def shown(stats: object) -> None:
            st = driver.stats
            line = f"{st.decisions:,} priced, {st.events:,} events, {st.bookings:,} bookings"
            bar.update(task, completed=st.elapsed_s if duration else None, line=line)

        try:
            with stoppable(s.grace_s) as stop:  # SIGTERM / Ctrl-C: stop after the event in hand, flushed
                stats = driver.run(days=days, duration_s=duration, seed=seed, on_progress=shown, stop=stop)
        except TrafficError as exc:
            fail(str(exc))
    tiers = ", ".join(f"{k} {v:,}" for k, v in sorted(stats.by_tier.items()))
    out.print(f"priced {stats.decisions:,} shoppers through serve ({tiers}); published {stats.events:,} events, "
              f"{stats.bookings:,} bookings, revenue {stats.revenue:,.2f}, in {stats.elapsed_s:,.1f} s")
