"""Issue 31 items 22 and 20: every ``--help`` is plain text, flags carry no ``<bool>``, names are whole at 80 columns;
``query --help`` says how to count rolled-up Druid rows."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from pricestream.cli import app

SPHINX = re.compile(r"``|:(?:mod|func|class|meth|attr|data|exc|obj|ref):`")


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(typer.main.get_command(app)))


def _help(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], terminal_width=80, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.output


def test_there_are_many_commands() -> None:
    assert len(COMMANDS) > 60


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_help_is_plain_and_names_are_whole_at_80_columns(path: tuple[str, ...], command: Any) -> None:
    text = _help(path)
    assert not SPHINX.search(text), SPHINX.search(text)
    assert "<bool>" not in text
    for param in command.params:
        for name in ([param.envvar] if isinstance(param.envvar, str) else param.envvar or []):
            assert name in text, f"{' '.join(path)}: {name} cut in --help at 80 columns"
    assert max(len(line) for line in text.splitlines()) <= 80


def test_query_help_says_to_count_rolled_up_events_with_sum() -> None:
    text = " ".join(_help(("query",)).split())
    assert "SUM(events), not COUNT(*)" in text
    assert "behaviour_events" in text
