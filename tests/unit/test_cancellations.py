"""The cancellation forecast on the simulator's truth, and its two commands."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from events.models import dumps
from market import Market, Simulation, static_policy
from market.presets import preset
from pricestream.cli import app
from pricing.cancellations import booking_frame, evaluate, split_by_time, train


@pytest.fixture(scope="module")
def events_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    market = Market(preset("city", hotels=2, seed=3))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    events = Simulation(market, start=start, duration=timedelta(days=160), policy=static_policy(market), rng_seed=2)
    path = tmp_path_factory.mktemp("cancel") / "events.jsonl"
    with path.open("wb") as f:
        for event in events:
            if event.event_type in ("booking", "cancellation"):
                f.write(dumps(event) + b"\n")
    return path


def _records(path: Path) -> list:
    from events.models import parse_event

    return [parse_event(line) for line in path.read_bytes().splitlines()]


def test_the_forecast_ranks_held_out_bookings_better_than_chance_and_leaves_open_stays_out(events_file: Path) -> None:
    records = _records(events_file)
    segments: dict[str, int] = {}
    frame = booking_frame(records, segments=segments)
    newest = max(r.event_time for r in records).date()
    bookings = [r for r in records if r.event_type == "booking"]
    assert len(frame) == sum(b.stay_date < newest for b in bookings) < len(bookings)  # open stays may still cancel
    assert 0.1 < frame["cancelled"].mean() < 0.5
    held_in, held_out = split_by_time(frame)
    assert held_in["arrival"].max() <= held_out["arrival"].min()
    result = evaluate(train(held_in, segments=segments), held_out)
    assert result.auc > 0.55
    expected = sum(e for e, _, _ in result.deciles)
    observed = sum(o for _, o, _ in result.deciles)
    assert abs(expected - observed) / observed < 0.15  # calibrated in total on the latest arrivals


def test_train_then_score_refuses_a_malformed_line_by_number_and_scores_the_rest(
    events_file: Path, tmp_path: Path
) -> None:
    runner = CliRunner()
    model = tmp_path / "model"
    trained = runner.invoke(app, ["cancellations", "train", "--events", str(events_file), "--out", str(model)])
    assert trained.exit_code == 0, trained.output
    assert "AUC" in trained.output and (model / "cancellations.onnx").exists()
    bookings = [line for line in events_file.read_text().splitlines() if '"booking"' in line][:3]
    broken = json.loads(bookings[1]) | {"nights": -2}
    lines = tmp_path / "score.jsonl"
    lines.write_text("\n".join([bookings[0], json.dumps(broken), bookings[2]]) + "\n")
    scored = runner.invoke(app, ["cancellations", "score", "--model", str(model), str(lines)])
    assert scored.exit_code == 1
    answers = [json.loads(x) for x in scored.stdout.splitlines() if x.startswith("{")]
    assert [a["booking_id"] for a in answers] == [json.loads(bookings[i])["booking_id"] for i in (0, 2)]
    assert all(0.0 < a["cancel_probability"] < 1.0 for a in answers)
    assert "line 2: field 'nights'" in scored.stderr
