"""``pricestream market ...``: the simulated market's presets and their calibration to real hotel data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from pricestream.commands.common import fail, new_app, out, table

if TYPE_CHECKING:
    from market import Market

app = new_app("The simulated hotel market: presets calibrated to the Hotel Booking Demand dataset.")


def _preset_market(preset: str, *, hotels: int, seed: int) -> Market:
    """The market of ``preset`` (exits with the known presets named if it is not one)."""
    from market import Market
    from market.presets import PRESETS
    from market.presets import preset as make

    if preset not in PRESETS:
        fail(f"--preset: got {preset!r}, expected one of {sorted(PRESETS)}")
    return Market(make(preset, hotels=hotels, seed=seed))


@app.command("calibrate")
def calibrate(
    preset: Annotated[
        str, typer.Option("--preset", envvar="PRICESTREAM_MARKET_PRESET", help="resort, city (or flat: no targets)")
    ] = "resort",
    hotels: Annotated[int, typer.Option(envvar="PRICESTREAM_MARKET_HOTELS", min=1, help="hotels simulated")] = 4,
    seed: Annotated[int, typer.Option(envvar="PRICESTREAM_SEED", help="market and sampling seed")] = 0,
    offers: Annotated[
        int, typer.Option(envvar="PRICESTREAM_CALIBRATION_OFFERS", min=500, help="offers sampled")
    ] = 8000,
) -> None:
    """Each dataset figure against its target and tolerance; exit code 1 if any misses."""
    from market.calibration import check

    checks = check(preset, _preset_market(preset, hotels=hotels, seed=seed), n=offers, seed=seed)
    if not checks:
        out.print(f"preset {preset!r} has no dataset targets")
        return
    rows = [(c.name, round(c.value, 3), c.target, f"±{c.tolerance:g}", "ok" if c.ok else "MISS") for c in checks]
    out.print(table(("figure", "measured", "target", "tolerance", "verdict"), rows, title=f"market preset {preset}"))
    missed = [c.name for c in checks if not c.ok]
    out.print(f"{len(checks) - len(missed)}/{len(checks)} figures within tolerance")
    if missed:
        fail(f"preset {preset}: outside tolerance: {', '.join(missed)}")


@app.command("bound")
def bound(
    preset: Annotated[
        str, typer.Option("--preset", envvar="PRICESTREAM_MARKET_PRESET", help="resort, city or flat")
    ] = "resort",
    hotels: Annotated[int, typer.Option(envvar="PRICESTREAM_MARKET_HOTELS", min=1, help="hotels simulated")] = 1,
    seed: Annotated[int, typer.Option(envvar="PRICESTREAM_SEED", help="simulation seed")] = 0,
    start: Annotated[
        str, typer.Option(envvar="PRICESTREAM_MARKET_START", help="first priced instant, ISO-8601 with timezone")
    ] = "2026-05-01T00:00:00+00:00",
    days: Annotated[int, typer.Option(envvar="PRICESTREAM_MARKET_DAYS", min=1, help="check-in nights priced")] = 60,
    warmup_days: Annotated[
        int, typer.Option(envvar="PRICESTREAM_MARKET_WARMUP_DAYS", min=0, help="days at the static price first")
    ] = 14,
    held: Annotated[
        bool, typer.Option("--held", help="cancelled bookings hold their rooms until they cancel (tighter bound)")
    ] = False,
) -> None:
    """The fluid LP bound on any policy's expected net revenue for a window (market.fluid)."""
    from datetime import datetime

    from market.fluid import fluid_bound

    market = _preset_market(preset, hotels=hotels, seed=0)
    try:
        at = datetime.fromisoformat(start)
    except ValueError:
        fail(f"--start: got {start!r}, expected an ISO-8601 time with a timezone")
    if at.tzinfo is None:
        fail(f"--start: got {start!r}, expected an ISO-8601 time with a timezone")
    value = fluid_bound(market, start=at, days=days, seed=seed,
                        warmup_days=warmup_days, held=held)
    label = "held fluid LP bound" if held else "fluid LP bound"
    out.print(f"preset {preset}, seed {seed}, {days} nights from {at.isoformat()}: {label} {value:,.0f}")
