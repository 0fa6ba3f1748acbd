"""Progress display for long CLI work (rich); the library never prints."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

console = Console(stderr=True)


@contextmanager
def progress_bar(description: str, total: float | None) -> Iterator[Progress]:
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as bar:
        bar.add_task(description, total=total)
        yield bar
