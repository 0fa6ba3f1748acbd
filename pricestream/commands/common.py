"""What every command shares: consoles, the one-red-line error handler, ISO-8601 times, tables.

Errors: any exception that escapes a command becomes one red line on stderr naming what is
wrong, and exit code 1 (no traceback). ``PRICESTREAM_DEBUG=1`` re-raises instead, for bugs.

Example:
    >>> parse_time("2026-11-30T12:00:00+01:00", option="--as-of").isoformat()
    '2026-11-30T11:00:00+00:00'
    >>> parse_time("2026-11-30T12:00", option="--as-of")
    Traceback (most recent call last):
    ...
    pricestream.commands.common.CliInputError: --as-of: got '2026-11-30T12:00', expected an ISO-8601 time with \
a timezone, e.g. 2026-11-30T12:00:00Z
"""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, NoReturn, TypeVar

import pandas as pd
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer import _click as click
from typer.core import TyperGroup

from pricestream.progress import console as err
from pricestream.settings import Settings

WIDE = 160
"""Columns of tables when stdout is not a terminal (pipes, files, tests): no truncated version ids."""

out = Console(soft_wrap=True, width=None if sys.stdout.isatty() else WIDE)
"""Results (tables, summaries) go to stdout; progress and errors to stderr (:data:`err`)."""

DEBUG_ENV = "PRICESTREAM_DEBUG"


class CliInputError(ValueError):
    """A flag or argument that the CLI itself refuses (names the option, the value and the expectation)."""


_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`<]*?)(?:\s*<[^>]*>)?`")
_LITERAL = re.compile(r"``(.+?)``")


def plain_help(text: str | None) -> str | None:
    """A docstring as ``--help`` shows it: no Sphinx roles or double backticks (issue 31 item 22).

    Example:
        >>> plain_help("Reads ``features.v1`` (:mod:`pricestream.settings`, :func:`~a.b.run`).")
        'Reads features.v1 (pricestream.settings, run).'
        >>> plain_help(":class:`the store <features.store.Store>`")
        'the store'
    """
    if text is None:
        return None

    def role(match: re.Match[str]) -> str:
        target = match.group(1).strip()
        return target.rsplit(".", 1)[-1] if match.group(0).split("`", 1)[1].startswith("~") else target

    return _LITERAL.sub(r"\1", _ROLE.sub(role, text))


def _plain_command(command: click.Command) -> None:
    """Help text without markup, flags without a ``<bool>`` type, click's plain layout (no cut names)."""
    command.help = plain_help(command.help)
    command.short_help = plain_help(command.short_help)
    # The rich layout folds or cuts an env var name in a narrow column at 80 columns; click's wraps words.
    command.rich_markup_mode = None  # type: ignore[attr-defined]
    for param in command.params:
        if hasattr(param, "help"):
            param.help = plain_help(param.help)


class HandledGroup(TyperGroup):
    """A typer group whose commands fail with one red line and exit code 1 instead of a traceback.

    Its help and its commands' help are plain text: Sphinx markup of the docstrings removed, flags
    shown without a type, and click's layout, which wraps at word boundaries instead of cutting
    names at 80 columns.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # click's own signature, passed on
        super().__init__(*args, **kwargs)
        _plain_command(self)
        for command in self.commands.values():
            if not isinstance(command, HandledGroup):  # a group cleaned itself
                _plain_command(command)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, click.ClickException):
            raise
        except Exception as exc:
            if os.environ.get(DEBUG_ENV):
                raise
            report_error(exc)
            raise typer.Exit(code=1) from None


def report_error(exc: BaseException) -> None:
    """Print ``error: <message>`` in red on one line (the exception class when the message is empty)."""
    message = " ".join(str(exc).split()) or type(exc).__name__
    if not isinstance(exc, CliInputError) and type(exc).__module__.split(".")[0] not in _OURS:
        message = f"{type(exc).__name__}: {message}"
    err.print(f"[bold red]error:[/bold red] [red]{escape(message)}[/red]", soft_wrap=True, highlight=False)


_OURS = frozenset({"events", "pipelines", "features", "pricing", "routing", "feedback", "infra", "pricestream"})


def fail(message: str) -> NoReturn:
    """Stop the command with one red line and exit code 1."""
    raise CliInputError(message)


_Choice = TypeVar("_Choice", bound=str)


def one_of(option: str, value: str, allowed: tuple[_Choice, ...]) -> _Choice:
    """``value`` as one of ``allowed`` (typed as they are, e.g. a ``Literal``), else fail naming the option.

    Example:
        >>> one_of("--engine", "druid", ("auto", "druid"))
        'druid'
    """
    for choice in allowed:
        if value == choice:
            return choice
    fail(f"{option}: got {value!r}, expected one of {list(allowed)}")


def ensure_bindable(host: str, port: int, *, what: str) -> None:
    """Stop with one line naming ``host:port`` when a server could not bind it (another process listens there).

    Called before a command's slow work (models, topics, a consumer group), so a taken port is said at once.
    Port 0 (any free port) always binds.

    Example:
        >>> import socket
        >>> with socket.socket() as held:
        ...     held.bind(("127.0.0.1", 0)); held.listen()
        ...     try:
        ...         ensure_bindable("127.0.0.1", held.getsockname()[1], what="--port")
        ...     except CliInputError as exc:
        ...         print(str(exc).replace(str(held.getsockname()[1]), "PORT")[:58])
        --port: cannot bind 127.0.0.1:PORT: Address already in use
    """
    import socket

    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do: TIME_WAIT is no conflict
        try:
            sock.bind((host, port))
        except OSError as exc:
            fail(f"{what}: cannot bind {host}:{port}: {exc.strerror or exc} (another process listens there; "
                 "choose another port)")


def bind_error(exc: OSError, host: str, port: int, *, what: str) -> CliInputError:
    """A server's failed bind as one line naming the address (``OSError`` itself names no address)."""
    return CliInputError(f"{what}: cannot bind {host}:{port}: {exc.strerror or exc}")


def new_app(help_text: str) -> typer.Typer:
    """A sub-command group with the red-line error handler."""
    return typer.Typer(help=help_text, no_args_is_help=True, cls=HandledGroup, pretty_exceptions_enable=False)


def settings() -> Settings:
    """Settings from ``PRICESTREAM_*`` (read at call time, so tests can set the environment)."""
    return Settings()


def parse_time(value: str, *, option: str) -> datetime:
    """An aware UTC datetime from ISO-8601 text with a timezone (``Z`` or an offset)."""
    expected = "an ISO-8601 time with a timezone, e.g. 2026-11-30T12:00:00Z"
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        msg = f"{option}: got {value!r}, expected {expected}"
        raise CliInputError(msg) from None
    if parsed.tzinfo is None:
        msg = f"{option}: got {value!r}, expected {expected}"
        raise CliInputError(msg)
    return parsed.astimezone(UTC)


def iso(value: datetime | float | None) -> str:
    """ISO-8601 (UTC) of a datetime or epoch seconds; ``-`` for None.

    Example:
        >>> iso(0.0), iso(None)
        ('1970-01-01T00:00:00+00:00', '-')
    """
    if value is None:
        return "-"
    when = datetime.fromtimestamp(value, tz=UTC) if isinstance(value, int | float) else value.astimezone(UTC)
    return when.isoformat(timespec="seconds")


def fmt(value: object, digits: int = 4) -> str:
    """Short text of a cell: floats to ``digits`` significant digits, times as ISO-8601, None as ``-``.

    Example:
        >>> fmt(3.14159), fmt(None), fmt(12)
        ('3.142', '-', '12')
    """
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    if isinstance(value, pd.Timestamp | datetime):
        return iso(value.to_pydatetime() if isinstance(value, pd.Timestamp) else value)
    return str(value)


def table(columns: Sequence[str], rows: Iterable[Sequence[object]], *, title: str | None = None) -> Table:
    """A rich table of ``rows`` (cells formatted with :func:`fmt`)."""
    view = Table(*columns, title=title)
    for row in rows:
        view.add_row(*(fmt(cell) for cell in row))
    return view


def frame_table(frame: pd.DataFrame, *, limit: int, title: str | None = None) -> Table:
    """The first ``limit`` rows of ``frame`` as a rich table."""
    shown = frame.head(limit)
    return table([str(c) for c in frame.columns], shown.itertuples(index=False, name=None), title=title)


def kv_table(pairs: Iterable[tuple[str, object]], *, title: str | None = None) -> Table:
    """A two-column (field, value) table."""
    return table(("field", "value"), pairs, title=title)


EXIT_GRACE_EXCEEDED = 75
"""Exit code of a service that did not stop within its grace period (it is ended; nothing was committed late)."""


@contextmanager
def stoppable(grace_s: float | None = None) -> Iterator[threading.Event]:
    """An event set by SIGINT/SIGTERM, so a service finishes its batch and commits before it stops.

    With ``grace_s``, a process still running that long after the signal is ended with
    :data:`EXIT_GRACE_EXCEEDED` (what it had not committed is replayed by the next start).
    """
    stop = threading.Event()
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def asked(signum: int, frame: object) -> None:
        if not stop.is_set() and grace_s is not None:
            threading.Thread(target=_end_after, args=(grace_s, signum), name="grace", daemon=True).start()
        stop.set()

    for sig in previous:
        signal.signal(sig, asked)
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _end_after(grace_s: float, signum: int) -> None:
    time.sleep(grace_s)
    logging.getLogger("pricestream").error(
        "grace period exceeded", extra={"event": "grace_exceeded", "grace_s": grace_s, "signal": signum})
    logging.shutdown()
    os._exit(EXIT_GRACE_EXCEEDED)


def json_logs(level: int = logging.INFO) -> None:
    """Log JSON lines on stderr (``python-json-logger``): one object per line with the record's extra fields."""
    from pythonjsonlogger.json import JsonFormatter

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter("%(asctime)s %(levelname)s %(name)s %(message)s",
                                       rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
                                       datefmt="%Y-%m-%dT%H:%M:%S%z"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
