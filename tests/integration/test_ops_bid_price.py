"""Issue 31 item 13: ``bid-price measure`` under ``PRICESTREAM_TOPIC_PREFIX`` reads the prefixed topic once."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infra.config import StackConfig
from pricestream.cli import app

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def produced(stack: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    env = {"PRICESTREAM_KAFKA_BOOTSTRAP": stack.kafka_bootstrap,
           "PRICESTREAM_TOPIC_PREFIX": f"t{uuid.uuid4().hex[:10]}.",
           "PRICESTREAM_STATE_DIR": str(tmp_path_factory.mktemp("bid") / "state")}
    result = CliRunner().invoke(app, ["produce", "--hotels", "2", "--rate", "500", "--duration", "1"], env=env)
    assert result.exit_code == 0, result.output
    return env


@pytest.mark.parametrize("topic", [None, "behaviour.events", "PREFIX"])
def test_measure_reads_the_prefixed_topic(produced: dict[str, str], tmp_path: Path, topic: str | None) -> None:
    out = tmp_path / "bid.json"
    prefix = produced["PRICESTREAM_TOPIC_PREFIX"]
    args = ["bid-price", "measure", "--out", str(out)]
    if topic is not None:
        args += ["--topic", topic.replace("PREFIX", f"{prefix}behaviour.events")]
    result = CliRunner().invoke(app, args, env=produced)
    assert result.exit_code == 0, result.output  # was: topic 'P.P.behaviour.events' does not exist
    assert json.loads(out.read_text())["horizon_days"] > 0


def test_a_missing_topic_names_the_command_that_creates_it(stack: StackConfig, tmp_path: Path) -> None:
    prefix = f"t{uuid.uuid4().hex[:10]}."
    result = CliRunner().invoke(app, ["bid-price", "measure", "--out", str(tmp_path / "b.json")],
                                env={"PRICESTREAM_KAFKA_BOOTSTRAP": stack.kafka_bootstrap,
                                     "PRICESTREAM_TOPIC_PREFIX": prefix})
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert f"topic '{prefix}behaviour.events' does not exist" in text
    assert "`pricestream topics create`" in text and "events.admin" not in text
