"""``pricestream overbooking limit``: how many bookings a night may take beyond its rooms."""

from __future__ import annotations

from typing import Annotated

import typer

from pricestream.commands.common import CliInputError, new_app, out, settings, table

app = new_app("Overbooking limits from the show-up forecast and the cost of walking a guest.")


@app.command("limit")
def limit(
    capacity: Annotated[int, typer.Option(min=0, envvar="PRICESTREAM_OVERBOOKING_CAPACITY", help="rooms of the night")],
    cancel_share: Annotated[float, typer.Option(
        min=0.0, max=0.95, envvar="PRICESTREAM_OVERBOOKING_CANCEL_SHARE", help="share of bookings that cancel")],
    reference_price: Annotated[float, typer.Option(
        min=0.0, envvar="PRICESTREAM_OVERBOOKING_REFERENCE_PRICE", help="the night's reference price per room")],
    no_show_share: Annotated[float | None, typer.Option(
        min=0.0, max=0.95, help="share of staying bookings that do not arrive (PRICESTREAM_OVERBOOKING_NO_SHOW_SHARE)")
    ] = None,
    relocation_cost: Annotated[float | None, typer.Option(
        min=0.0, help="walk cost beyond the night's price (PRICESTREAM_OVERBOOKING_RELOCATION_COST)")] = None,
) -> None:
    """The overbooking limit of one night, its expected walks and show-ups, at the walk costs around the given one."""
    from pricing.errors import QuoteError
    from pricing.overbooking import expected_walks, overbooking_limit

    s = settings()
    no_show = s.overbooking_no_show_share if no_show_share is None else no_show_share
    relocation = s.overbooking_relocation_cost if relocation_cost is None else relocation_cost
    show = (1.0 - cancel_share) * (1.0 - no_show)
    rows = []
    for cost in sorted({relocation, relocation / 2, relocation * 2, relocation * 4}):
        try:
            bookings = overbooking_limit(capacity, show_prob=show, room_value=reference_price,
                                         walk_cost=reference_price + cost,
                                         max_walks_per_1000=s.overbooking_max_walks_per_1000)
        except QuoteError as exc:
            raise CliInputError(str(exc)) from exc
        walks = expected_walks(bookings, capacity, show)
        per_1000 = 1000 * walks / max(bookings * show, 1e-9)
        rows.append([f"{cost:,.2f}" + (" (setting)" if cost == relocation else ""), str(bookings),
                     str(bookings - capacity), f"{bookings * show:,.1f}", f"{per_1000:.2f}"])
    out.print(table(["relocation cost", "limit", "beyond capacity", "expected guests", "walks per 1,000 guests"],
                    rows, title=f"{capacity} rooms, {cancel_share:.0%} cancel, {no_show:.0%} no-show"))
