"""bench/learning.py: the in-process label join and the update rounds' clock."""

from __future__ import annotations

import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # the bench's modules import each other bare
import learning  # noqa: E402

T0 = datetime(2026, 11, 1, 9, tzinfo=UTC)


def _shown(at: datetime, price: float, channel: str = "ota") -> tuple[SimpleNamespace, SimpleNamespace]:
    request = SimpleNamespace(hotel_id="h1", room_type="standard", stay_date=date(2026, 11, 20), channel=channel,
                              event_time=at)
    return request, SimpleNamespace(price=price)


def test_a_booking_labels_the_decision_of_its_key_and_price_and_the_rest_become_zeros_after_the_horizon() -> None:
    seen: list[tuple[float, str, bool]] = []
    join = learning.LabelJoin(lambda r, d, booked: seen.append((d.price, r.channel, booked)))
    for request, decision in (_shown(T0, 100.0), _shown(T0 + timedelta(minutes=1), 120.0),
                              _shown(T0 + timedelta(minutes=2), 120.0, channel="direct")):
        join.shown(request, decision)  # type: ignore[arg-type]
    booking = SimpleNamespace(hotel_id="h1", room_type="standard", stay_date=date(2026, 11, 20), channel="ota",
                              price_paid=120.0)
    join.booked(booking)
    join.booked(SimpleNamespace(**{**vars(booking), "price_paid": 99.0}))  # no decision quoted 99: nothing
    assert seen == [(120.0, "ota", True)]
    join.flush(T0 + timedelta(hours=learning.LABEL_HORIZON_H, minutes=1, seconds=30))
    assert seen == [(120.0, "ota", True), (100.0, "ota", False)]  # the direct quote is not two hours old yet
    join.flush(T0 + timedelta(hours=3))
    assert seen[-1] == (120.0, "direct", False) and not join.pending


def test_a_round_with_too_few_labels_to_hold_out_keeps_them_for_the_next() -> None:
    rounds: list[tuple[Path, Path]] = []
    trainer = learning.LoopTrainer((Path("light"), Path("heavy")), pd.DataFrame({"booked": [0]}), Path("work"),
                                   every=timedelta(days=7), seed=0, on_update=lambda a, b: rounds.append((a, b)))
    trainer.tick(T0)  # starts the clock
    trainer.rows = [{"event_time": T0 + timedelta(minutes=i), "booked": i % 2} for i in range(150)]
    trainer.tick(T0 + timedelta(days=6))
    assert len(trainer.rows) == 150 and not trainer.log  # not due yet
    trainer.tick(T0 + timedelta(days=7))
    assert len(trainer.rows) == 150 and rounds == [] and "too few to hold 100 out" in trainer.log[-1]
