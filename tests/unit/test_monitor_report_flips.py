"""``pricestream monitor report``'s flip panel counts requests priced twice with identical inputs."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from audit.log import AuditLog
from events.models import PricingDecision, dumps
from pricestream.commands.monitoring import audit_frame, flip_reports

T0 = datetime(2026, 5, 1, 9, tzinfo=UTC)


def _decision(minutes: int, price: float, occupancy: float = 0.5) -> dict[str, object]:
    d = PricingDecision(hotel_id="h1", room_type="std", stay_date=date(2026, 6, 1), request_id=uuid.uuid4(),
                        event_time=T0 + timedelta(minutes=minutes), price=price, tier="light", complexity=0.3,
                        latency_ms=1.0, model_version="v1", features={"occupancy": occupancy, "searches_7d": 4.0})
    return dict(json.loads(dumps(d)))


def test_identical_inputs_priced_differently_are_one_flip(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    with AuditLog(path) as log:
        for minutes, price, occupancy in ((0, 100.0, 0.5), (5, 112.0, 0.5), (10, 100.0, 0.7), (15, 100.0, 0.7)):
            log.append_entry({"tier": "light", "latency_ms": 1.0, "input_sha256": uuid.uuid4().hex,
                              "decision": _decision(minutes, price, occupancy)})
    frame = audit_frame(path)
    assert frame["input_sha256"].nunique() == 2  # two inputs, each priced twice (fresh ids and times)
    report = flip_reports(frame)[-1]
    assert (report.n_inputs, report.n_flipped) == (2, 1)
