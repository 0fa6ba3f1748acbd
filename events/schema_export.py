"""Export the JSON Schema of every contract record to ``events/schemas/``.

One file per record type, ``<event_type>.v<SCHEMA_VERSION>.json``, with sorted keys
and two-space indentation so that a change to a model shows up as a readable diff.

The schemas describe the *wire* form, so they are generated in pydantic's
``serialization`` mode: ``event_time`` is an integer (UTC epoch milliseconds),
which is what :func:`events.models.dumps` writes and what producers in other
languages must send. (``validation`` mode would describe the Python-side input,
where ``event_time`` is an ISO-8601 string, and every record we publish would
fail it.) On top of what pydantic derives, the exporter marks the envelope fields
that every record carries (``event_id``, ``event_type``, ``event_time``,
``schema_version``) as required, pins ``schema_version`` to the current version
and adds ``$schema``/``$id``.

Regenerate after changing :mod:`events.models`::

    .venv/bin/python -m events.schema_export          # rewrite the files
    .venv/bin/python -m events.schema_export --check  # exit 1 if they drifted

Example:
    >>> schema = schema_for("view")
    >>> schema["properties"]["event_time"]["type"], schema["properties"]["schema_version"]["const"]
    ('integer', 1)
    >>> sorted(set(ENVELOPE) - set(schema["required"]))
    []
    >>> file_name("view")
    'view.v1.json'
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from events.models import CONTRACT, ENVELOPE, SCHEMA_VERSION

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
"""Where the committed schema files live (shipped as package data)."""


_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_ID_BASE = "https://pricestream.local/schemas/"
_CURRENT = f"*.v{SCHEMA_VERSION}.json"  # files of older versions stay, as the contract's history


def file_name(event_type: str) -> str:
    """Name of the schema file of one record type."""
    return f"{event_type}.v{SCHEMA_VERSION}.json"


def schema_for(event_type: str) -> dict[str, Any]:
    """The wire-form JSON Schema of the record type ``event_type`` (a key of ``CONTRACT``)."""
    model = CONTRACT[event_type]
    schema = model.model_json_schema(mode="serialization")
    props = schema["properties"]
    props["event_time"] = {**props["event_time"], "description": "UTC instant, epoch milliseconds"}
    props["schema_version"] = {**props["schema_version"], "const": SCHEMA_VERSION}
    required = list(schema.get("required", []))
    schema["required"] = [*ENVELOPE, *(name for name in required if name not in ENVELOPE)]
    schema["$schema"] = _DIALECT
    schema["$id"] = _ID_BASE + file_name(event_type)
    return schema


def render(schema: dict[str, Any]) -> str:
    """Stable text of a schema: sorted keys, two-space indent, trailing newline."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def expected_files() -> dict[str, str]:
    """File name -> text, for every record type of the contract."""
    return {file_name(kind): render(schema_for(kind)) for kind in sorted(CONTRACT)}


def drift(directory: Path | None = None) -> list[str]:
    """Current-version file names under ``directory`` that are missing, stale or no longer in the contract.

    Example:
        >>> drift()
        []
    """
    root = SCHEMA_DIR if directory is None else directory
    wanted = expected_files()
    out = []
    for name, text in wanted.items():
        path = root / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            out.append(name)
    present = {p.name for p in root.glob(_CURRENT)} if root.exists() else set()
    out.extend(sorted(present - set(wanted)))
    return out


def export(directory: Path | None = None) -> list[Path]:
    """Write every changed schema file and drop current-version files of types that left the contract.

    Returns:
        The paths written (unchanged files are left alone).
    """
    root = SCHEMA_DIR if directory is None else directory
    root.mkdir(parents=True, exist_ok=True)
    wanted = expected_files()
    written = []
    for name, text in wanted.items():
        path = root / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written.append(path)
    for stale in sorted(root.glob(_CURRENT)):
        if stale.name not in wanted:
            stale.unlink()
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m events.schema_export [--check] [--out DIR]``; returns the exit status."""
    parser = argparse.ArgumentParser(description="Export the event contract as JSON Schema files.")
    parser.add_argument("--check", action="store_true", help="only report drift; exit 1 if any")
    parser.add_argument("--out", type=Path, default=None, help=f"directory (default {SCHEMA_DIR})")
    args = parser.parse_args(argv)
    if args.check:
        stale = drift(args.out)
        for name in stale:
            sys.stderr.write(f"stale: {name}\n")
        return 1 if stale else 0
    for path in export(args.out):
        sys.stdout.write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
