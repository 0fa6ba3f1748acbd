"""``pricestream bid-price ...``: the bid price's forecast parameters, measured from the hotel's behaviour history."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from pricestream.commands.common import CliInputError, new_app, one_of, out, settings, table

if TYPE_CHECKING:
    from events.config import KafkaConfig
    from events.models import Record

app = new_app("The bid price's forecast (booking curve, room shares, stays, cancellations) from behaviour history.")

_SHOWN_ERRORS = 3

_METHODS: tuple[Literal["dp", "fluid", "stochastic"], ...] = ("dp", "fluid", "stochastic")


def events_from_file(path: Path, rejected: list[str]) -> Iterator[Record]:
    """The contract records of a JSON-lines file; a line that is not one is added to ``rejected``, named."""
    from events.errors import EventValidationError
    from events.models import parse_event

    try:
        handle = path.open("rb")
    except OSError as exc:
        msg = f"--events: cannot read {path}: {exc.strerror or exc}"
        raise CliInputError(msg) from exc
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield parse_event(line.rstrip(b"\r\n"))
            except EventValidationError as exc:
                rejected.append(f"{path}:{number}: {exc}")


def _from_topic(topic: str, rejected: list[str]) -> Iterator[Record]:
    from events.errors import EventValidationError
    from events.models import parse_event
    from feedback.services.kafka_io import drain

    kafka = settings().kafka()
    logical = _logical(topic, kafka.topic_prefix)
    _require_topic(kafka, logical)
    for message in drain(kafka, logical):  # drain applies the prefix itself
        try:
            yield parse_event(message.value() or b"")
        except EventValidationError as exc:
            rejected.append(f"{topic}@{message.partition()}:{message.offset()}: {exc}")


def _logical(topic: str, prefix: str) -> str:
    """``--topic`` as a logical name: the deployment's prefix is applied once, also to a name given with it.

    Example:
        >>> _logical("behaviour.events", "nu53."), _logical("nu53.behaviour.events", "nu53.")
        ('behaviour.events', 'behaviour.events')
    """
    return topic[len(prefix):] if prefix and topic.startswith(prefix) else topic


def _require_topic(kafka: KafkaConfig, logical: str) -> None:
    """Stop with the command that creates the topic when it is not there (a consumer would say it in Python)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    name = kafka.topic(logical)
    try:
        meta = AdminClient({**kafka.client_conf(), "log_level": 0}).list_topics(name, timeout=10)
    except KafkaException as exc:
        msg = f"--topic: cannot read the topics of {kafka.bootstrap_servers}: {exc}"
        raise CliInputError(msg) from exc
    info = meta.topics.get(name)
    if info is None or info.error is not None:
        prefix = f" (PRICESTREAM_TOPIC_PREFIX={kafka.topic_prefix})" if kafka.topic_prefix else ""
        msg = (f"--topic: topic {name!r} does not exist at {kafka.bootstrap_servers}; create it with "
               f"`pricestream topics create`{prefix} and publish events (`pricestream produce`), or give --events")
        raise CliInputError(msg)


@app.command("measure")
def measure(
    out_path: Annotated[
        Path, typer.Option("--out", help="the BidPriceConfig JSON to write (serve loads it: PRICESTREAM_BID_CONFIG)")
    ],
    events: Annotated[
        list[Path] | None,
        typer.Option("--events", help="behaviour events, one contract record per line (JSONL); default: the topic"),
    ] = None,
    topic: Annotated[str, typer.Option(help="topic read when no --events is given (to its end); "
                                            "PRICESTREAM_TOPIC_PREFIX is applied once")] = "behaviour.events",
    method: Annotated[str, typer.Option(help="the bid's method: dp, fluid or stochastic")] = "dp",
) -> None:
    """Measure the forecast from a year of searches, bookings and cancellations; write it for ``serve`` to load.

    Lines or records that are not contract records are skipped and counted (the first few shown); other record
    types (views, inventory, rates) are ignored.
    """
    from pricing.bid_history import measure as measure_history

    chosen = one_of("--method", method, _METHODS)
    rejected: list[str] = []

    def records() -> Iterator[Record]:
        if events:
            for path in events:
                yield from events_from_file(path, rejected)
        else:
            yield from _from_topic(topic, rejected)

    try:
        history = measure_history(records(), method=chosen)
    except ValueError as exc:
        raise CliInputError(str(exc)) from exc
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(history.config.model_dump_json(indent=2) + "\n")
    cfg = history.config
    shares = ", ".join(f"{name} {share:.3f}" for name, share in cfg.room_shares or ())
    rows = [
        ("searches / bookings / cancellations", f"{history.searches} / {history.bookings} / {history.cancellations}"),
        ("from .. to", f"{history.first:%Y-%m-%d} .. {history.last:%Y-%m-%d}" if history.first and history.last
         else "-"),
        ("horizon (days)", cfg.horizon_days),
        ("room shares of searches", shares),
        ("rooms / nights per booking", f"{cfg.rooms_per_booking:.2f} / {cfg.nights_per_booking:.2f}"),
        ("cancelled share of rooms", f"{cfg.cancel_share:.3f}"),
        ("records skipped (not contract records)", len(rejected)),
    ]
    out.print(table(("measured", "value"), rows, title=f"bid price forecast -> {out_path}"))
    for line in rejected[:_SHOWN_ERRORS]:
        out.print(f"skipped {line}")
