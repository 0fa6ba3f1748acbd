"""Fuzz the event parser: coverage-guided (atheris/libFuzzer), 0 exceptions but our validation error.

Every input goes through :func:`events.models.parse_event` (with and without hotel profiles) and, when
it parses, through :func:`events.contract.flags` and a round trip: any exception other than
``EventValidationError`` is a crash, saved by libFuzzer under ``--artifacts``. The seed corpus is one
valid event of each type plus the hostile records of issue 11.

After the run, the corpus libFuzzer grew is replayed twice in this process: through ``parse_event``
and through the peer, ``json.loads`` (what any consumer does at least); the ratio is printed.

    .venv/bin/python bench/fuzz_events.py --runs 1000000
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from datetime import UTC, date, datetime
from pathlib import Path

from rich.console import Console
from rich.progress import Progress

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
_RUNS = re.compile(rb"^#(\d+)")


def _seeds() -> list[bytes]:
    from events.models import (
        BookingEvent,
        CancellationEvent,
        CompetitorRateEvent,
        InventoryEvent,
        PricingRequest,
        SearchEvent,
        ViewEvent,
        dumps,
    )

    key = {"hotel_id": "h1", "room_type": "std", "stay_date": date(2026, 12, 24),
           "event_time": datetime(2026, 12, 1, tzinfo=UTC)}
    records = [SearchEvent(**key), ViewEvent(**key, price_shown=120.0), BookingEvent(**key, price_paid=0.0, nights=0),
               CancellationEvent(**key, booking_id="1b4e28ba-2fa1-11d2-883f-0016d3cca427"),
               CompetitorRateEvent(**key, competitor_id="c", rate=99.5),
               InventoryEvent(**key, rooms_left=3, capacity=9),
               PricingRequest(**key, nights=2, last_published_price=150.0)]
    raw = [dumps(r) for r in records]
    return [*raw, raw[1].replace(b"120.0", b"NaN"), raw[1] + b" x", raw[1].replace(b'"h1"', b'"h\\ud800"'),
            raw[1].replace(b'"h1"', b'"h\xff("'), raw[1].replace(b"1796083200000", b"1e20")]


def worker(argv: list[str]) -> None:
    """The libFuzzer process: ``atheris.Fuzz`` never returns; exit 0 when the runs are done."""
    import atheris
    import pydantic  # noqa: F401  (imported outside: coverage of our code, not of pydantic's Python layer)
    import pydantic_core  # noqa: F401

    with atheris.instrument_imports(include=["events"]):
        from events.contract import HotelProfile, flags
        from events.errors import EventValidationError
        from events.models import dumps, parse_event

    hotels = {"hotels": {"h1": HotelProfile(zone="America/New_York", price_range=(50.0, 400.0))}}

    def one_input(data: bytes) -> None:
        for context in (None, hotels):
            try:
                record = parse_event(data, context=context)
            except EventValidationError:
                continue
            flags(record, context["hotels"] if context else None)
            if parse_event(dumps(record), context=context) != record:
                msg = f"round trip changed {record!r}"
                raise AssertionError(msg)

    atheris.Setup(argv, one_input)
    atheris.Fuzz()


def _replay(corpus: Path) -> tuple[int, float, float]:
    from events.errors import EventValidationError
    from events.models import parse_event

    inputs = [p.read_bytes() for p in corpus.iterdir() if p.is_file()]
    start = time.perf_counter()
    for data in inputs:
        try:
            parse_event(data)
        except EventValidationError:
            pass
    ours = time.perf_counter() - start
    start = time.perf_counter()
    for data in inputs:
        try:
            json.loads(data)
        except ValueError:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            pass
    peer = time.perf_counter() - start
    return len(inputs), ours, peer


def run(runs: int, artifacts: Path, *, seed: int = 1) -> int:
    """Fuzz ``runs`` inputs in a child process; returns its exit status (0: no crash)."""
    console = Console(stderr=True)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus"
        corpus.mkdir()
        for i, seed_input in enumerate(_seeds()):
            (corpus / f"seed{i}").write_bytes(seed_input)
        artifacts.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, __file__, "--worker", str(corpus), f"-runs={runs}", f"-seed={seed}",
                f"-artifact_prefix={artifacts}/", "-max_len=4096", "-print_final_stats=1"]
        started = time.perf_counter()
        tail: list[bytes] = []
        with Progress(console=console, transient=True) as bar, subprocess.Popen(  # noqa: S603
                argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL) as child:
            task = bar.add_task("fuzzing parse_event", total=runs)
            assert child.stderr is not None
            for line in child.stderr:
                tail = [*tail[-30:], line]
                found = _RUNS.match(line)
                if found:
                    bar.update(task, completed=int(found.group(1)))
            status = child.wait()
        elapsed = time.perf_counter() - started
        if status != 0:
            console.print(b"".join(tail).decode(errors="replace"))
            console.print(f"[red]crash after {elapsed:.0f} s; inputs saved under {artifacts}")
            return status
        done = next((int(m.group(1)) for line in reversed(tail) if (m := re.search(rb"Done (\d+) runs", line))), 0)
        n, ours, peer = _replay(corpus)
    print(f"fuzzed inputs: {done:,} in {elapsed:.1f} s ({done / elapsed:,.0f}/s), exceptions other than "
          f"EventValidationError: 0")
    print(f"replay of the grown corpus ({n:,} inputs): parse_event {n / ours:,.0f}/s, json.loads {n / peer:,.0f}/s, "
          f"ratio parse_event/json.loads time {ours / peer:.2f}")
    return 0 if done >= runs else 1


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker([sys.argv[0], *sys.argv[2:]])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--artifacts", type=Path, default=REPO / ".state" / "fuzz" / "events")
    args = parser.parse_args()
    raise SystemExit(run(args.runs, args.artifacts, seed=args.seed))


if __name__ == "__main__":
    main()
