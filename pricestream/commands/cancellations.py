"""``pricestream cancellations train / score``: the cancellation forecast, from behaviour history to a probability."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pricestream.commands.bid_price import events_from_file
from pricestream.commands.common import fail, new_app, out, table

if TYPE_CHECKING:
    from events.models import Record

app = new_app("The cancellation forecast: train it on behaviour history, score bookings with it.")


def _events(paths: list[Path], rejected: list[str]) -> Iterator[Record]:
    for path in paths:
        yield from events_from_file(path, rejected)


@app.command("train")
def train_cmd(
    events: Annotated[list[Path], typer.Option(
        "--events", envvar="PRICESTREAM_CANCEL_EVENTS",
        help="JSON-lines files of behaviour events (bookings and cancellations)")],
    out_dir: Annotated[Path, typer.Option("--out", envvar="PRICESTREAM_CANCEL_MODEL", help="where the model goes")],
    test_share: Annotated[float, typer.Option(envvar="PRICESTREAM_CANCEL_TEST_SHARE", min=0.05, max=0.9,
                                              help="newest share of the bookings held out")] = 0.3,
    seed: Annotated[int, typer.Option(envvar="PRICESTREAM_SEED")] = 0,
) -> None:
    """Train the forecast on the older bookings whose stays have passed; report AUC and calibration on the newest."""
    from pricing.cancellations import booking_frame, evaluate, split_by_time, train
    from pricing.errors import TrainingError

    rejected: list[str] = []
    segments: dict[str, int] = {}
    frame = booking_frame(_events(events, rejected), segments=segments)
    held_in, held_out = split_by_time(frame, test_share=test_share)
    try:
        model = train(held_in, segments=segments, seed=seed)
    except TrainingError as exc:
        fail(str(exc))
    result = evaluate(model, held_out)
    model.meta.update({"auc": result.auc, "held_out": len(held_out), "worst_decile_gap": result.worst_decile_gap})
    model.save(out_dir)
    rows = [[str(i + 1), f"{e:.1f}", f"{o:.0f}", str(n)] for i, (e, o, n) in enumerate(result.deciles)]
    out.print(table(["decile", "expected", "observed", "bookings"], rows,
                    title=f"held out: the newest {len(held_out):,} of {len(frame):,} bookings"))
    refused = f"; {len(rejected)} lines refused" if rejected else ""
    out.print(f"AUC {result.auc:.3f}; worst decile gap {result.worst_decile_gap:.1%}; cancel rate "
              f"{frame['cancelled'].mean():.1%}; model in {out_dir}{refused}")


@app.command("score")
def score_cmd(
    model_dir: Annotated[Path, typer.Option("--model", envvar="PRICESTREAM_CANCEL_MODEL", help="a trained model")],
    bookings: Annotated[Path, typer.Argument(help="JSON-lines booking events ('-': standard input)")],
) -> None:
    """The cancellation probability of each booking, one JSON line each; a malformed line is refused by number."""
    import pandas as pd

    from events.errors import EventValidationError
    from events.models import BookingEvent, parse_event
    from pricing.cancellations import COLUMNS, CancellationModel, booking_frame

    try:
        model = CancellationModel.load(model_dir)
    except (OSError, KeyError, ValueError) as exc:
        fail(f"--model: {model_dir} holds no cancellation model ({exc}); "
             "train one with `pricestream cancellations train`")
    handle = sys.stdin.buffer if str(bookings) == "-" else bookings.open("rb")
    refused, scored = 0, 0
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                event = parse_event(line.rstrip(b"\r\n"))
                if not isinstance(event, BookingEvent):
                    raise EventValidationError(field="event_type", value=getattr(event, "event_type", None),
                                               expected="'booking'")
            except EventValidationError as exc:
                refused += 1
                print(f"line {number}: {exc}", file=sys.stderr)
                continue
            frame = booking_frame([event], segments=dict(model.segments), closed_by=event.stay_date.max)
            prob = float(model.predict(pd.DataFrame(frame, columns=list(COLUMNS)))[0])
            print(json.dumps({"booking_id": str(event.booking_id), "cancel_probability": round(prob, 6)}))
            scored += 1
    print(f"scored {scored} bookings, refused {refused} lines", file=sys.stderr)
    if refused:
        raise typer.Exit(1)
