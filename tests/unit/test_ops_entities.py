"""Issue 31 item 19: ``snapshot create --entities`` reads what pandas writes, or says clearly what is wrong."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from pricestream.cli import app


def _entities(times: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"hotel_id": ["h0001", "h0002"], "room_type": ["standard", "suite"],
                         "stay_date": pd.to_datetime(["2027-01-10", "2027-01-11"]),
                         "event_timestamp": pd.to_datetime(times, format="ISO8601")})


def _create(tmp_path: Path, csv: Path) -> str:
    result = CliRunner().invoke(app, ["snapshot", "create", "--entities", str(csv), "--as-of", "2026-12-07T00:00:00Z"],
                                env={"PRICESTREAM_STATE_DIR": str(tmp_path / "state")})
    return f"exit {result.exit_code}: " + " ".join(result.output.split())


@pytest.mark.parametrize("index", [True, False])
def test_a_csv_written_by_pandas_makes_a_snapshot(tmp_path: Path, index: bool) -> None:
    csv = tmp_path / "entities.csv"
    # one time with sub-second digits: pandas writes 10:00:00+00:00 and 11:00:00.123000+00:00 in one column,
    # which pd.to_datetime refused with a raw "doesn't match format" error
    _entities(["2026-12-05T10:00:00Z", "2026-12-05T11:00:00.123Z"]).to_csv(csv, index=index)
    out = _create(tmp_path, csv)
    assert out.startswith("exit 0") and "2 rows" in out, out


def test_a_naive_time_is_refused_naming_line_and_value(tmp_path: Path) -> None:
    csv = tmp_path / "entities.csv"
    frame = _entities(["2026-12-05T10:00:00Z", "2026-12-05T11:00:00Z"])
    frame["event_timestamp"] = frame["event_timestamp"].dt.tz_localize(None)
    frame.to_csv(csv, index=False)
    out = _create(tmp_path, csv)
    assert out.startswith("exit 1")
    assert "line 2: event_timestamp '2026-12-05 10:00:00', expected an ISO-8601 time with a timezone" in out


def test_an_empty_value_is_refused_naming_line_and_column(tmp_path: Path) -> None:
    csv = tmp_path / "entities.csv"
    frame = _entities(["2026-12-05T10:00:00Z", "2026-12-05T11:00:00Z"])
    frame.loc[1, "room_type"] = None
    frame.to_csv(csv, index=False)
    assert "line 3: room_type is empty, expected a value" in _create(tmp_path, csv)


def test_a_stay_date_with_a_time_of_day_is_refused(tmp_path: Path) -> None:
    csv = tmp_path / "entities.csv"
    frame = _entities(["2026-12-05T10:00:00Z", "2026-12-05T11:00:00Z"]).astype({"stay_date": str})
    frame.loc[0, "stay_date"] = "2027-01-10 12:30:00"
    frame.to_csv(csv, index=False)
    assert "line 2: stay_date '2027-01-10 12:30:00', expected a date YYYY-MM-DD" in _create(tmp_path, csv)
