"""Issue 31 item 19: ``produce`` writes no event in the future (a snapshot as of now sees them all)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime, timedelta

import pytest
from typer.testing import CliRunner

from events.config import KafkaConfig
from feedback.services.kafka_io import drain
from infra.config import StackConfig
from pricestream.cli import app

pytestmark = pytest.mark.integration


def test_produced_events_end_by_now(stack: StackConfig) -> None:
    prefix = f"t{uuid.uuid4().hex[:10]}."
    result = CliRunner().invoke(app, ["produce", "--hotels", "3", "--rate", "3000", "--duration", "1"],
                                env={"PRICESTREAM_KAFKA_BOOTSTRAP": stack.kafka_bootstrap,
                                     "PRICESTREAM_TOPIC_PREFIX": prefix})
    assert result.exit_code == 0, result.output
    after = datetime.now(tz=UTC)
    records = [json.loads(m.value()) for m in drain(KafkaConfig(bootstrap_servers=stack.kafka_bootstrap,
                                                                 topic_prefix=prefix), "behaviour.events")]
    assert len(records) == 3000
    times = [datetime.fromtimestamp(r["event_time"] / 1000, tz=UTC) for r in records]
    assert max(times) <= after  # was: up to a day ahead (3,000 events span about 2.5 h of market time)
    assert max(times) > after - timedelta(minutes=5)  # and the stream ends now, not long ago
    assert all(date.fromisoformat(r["stay_date"]) >= t.date() - timedelta(days=1) for r, t in zip(records, times,
                                                                                                     strict=True))
