"""Output audit on the serving path: a model that quotes 3x its key's recent median is clamped, counted, recorded.

The serving path is the real one (a trained ONNX light model, the rollout scorer, the audit
log, the HTTP app); the bad model is that same model with its prices tripled, promoted by a
hot swap as the trainer's ``swap`` promotion does.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Mapping
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from audit.log import AuditLog
from delivery import DeliveryConfig
from delivery.rollout import RolloutScorer
from events.catalog import ALL_FEATURES
from events.models import PricingRequest
from market.synthetic import training_frame
from pricing.feature_source import MemoryFeatureSource
from pricing.models import DemandModelConfig
from pricing.output_audit import OutputAudit, OutputAuditConfig, output_audit_counter, rules_band
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from pricing.tiers import Quote, load_pricer
from pricing.training import train_bundle
from routing.router import Thresholds, TieredRouter
from serving.http import create_app

pytestmark = pytest.mark.integration

RULES = "min_price: 10\nmax_price: 5000\ndefault_base_rate: 150\n"
T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
STAY = date(2026, 12, 12)
HISTORY = 12
BODY = {"hotel_id": "h1", "room_type": "std", "stay_date": STAY.isoformat(), "nights": 1,
        "event_time": T0.isoformat()}


@dataclasses.dataclass
class Scaled:
    """A real pricer whose prices are multiplied by ``factor`` (a model gone wrong, or poisoned)."""

    inner: Any
    factor: float
    version: str = "bad-3x"
    name: str = "demand-light"

    def quote(self, request: PricingRequest, features: Mapping[str, float | None], *, floor: float,
              ceiling: float, rule_price: float | None = None) -> Quote:
        q = self.inner.quote(request, features, floor=floor, ceiling=ceiling, rule_price=rule_price)
        return dataclasses.replace(q, price=min(ceiling, max(floor, q.price * self.factor)), model_version=self.version)


@pytest.fixture(scope="module")
def light(tmp_path_factory: pytest.TempPathFactory) -> Any:
    info = train_bundle(training_frame(800, seed=0), tmp_path_factory.mktemp("bundle") / "light", tier="light",
                        config=DemandModelConfig(num_trees=15))
    return load_pricer(info.path)


def _serving(light: Any, tmp_path: Path, action: str) -> tuple[TestClient, Scorer, AuditLog]:
    source = MemoryFeatureSource()
    values = {name: 2.0 for name in ALL_FEATURES}
    values.update(occupancy=0.6, capacity=80.0, rooms_left=30.0, comp_rate_median_24h=160.0)
    source.put("h1", "std", STAY, values, version=1, event_time=T0)
    rules = RuleSet.from_yaml(RULES)
    incumbent = Scorer(ScorerConfig(stale_after_s=None, deadline_ms=60_000.0), rules=rules, feature_source=source,
                       light=light, heavy=None,
                       router=TieredRouter(thresholds=Thresholds(rules_below=0.0, heavy_above=1.0)))
    log = AuditLog(tmp_path / "audit.jsonl", key="output-audit-test")
    rollout = RolloutScorer(incumbent, config=DeliveryConfig(state_path=tmp_path / "rollout.json"), audit=log)
    rollout.output_audit = OutputAudit(OutputAuditConfig(max_move=0.5, action=action),  # type: ignore[arg-type]
                                       band=rules_band(rules), counter=output_audit_counter(incumbent.stats.registry))
    return TestClient(create_app(rollout, probes={})), incumbent, log  # type: ignore[arg-type]


def _counted(client: TestClient, action: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(f'pricestream_output_audit_total{{action="{action}",reason="median"}}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.parametrize("action", ["clamp", "hold"])
def test_a_model_quoting_3x_the_recent_median_is_clamped_counted_and_recorded(
    light: Any, tmp_path: Path, action: str
) -> None:
    client, incumbent, log = _serving(light, tmp_path, action)
    history = [client.post("/v1/price", json=BODY).json() for _ in range(HISTORY)]
    assert {d["tier"] for d in history} == {"light"}
    assert not any(r.startswith("output-audit") for d in history for r in d["rule_ids"])
    assert _counted(client, action) == 0.0
    median = statistics.median(d["price"] for d in history)

    incumbent.swap_models(light=Scaled(light, 3.0))  # the promoted model triples every price
    bad = client.post("/v1/price", json=BODY).json()
    assert bad["model_version"] == "bad-3x"
    expected = median if action == "hold" else median * 1.5
    assert bad["price"] == pytest.approx(expected, rel=1e-9)
    assert bad["price"] < 3.0 * median * 0.9  # far from what the model quoted
    assert f"output-audit:{action}:median" in bad["rule_ids"]
    assert _counted(client, action) == 1.0

    log.close()
    entries = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert len(entries) == HISTORY + 1
    assert entries[-1]["decision"]["price"] == bad["price"]  # the audit log holds the served, clamped price
    assert f"output-audit:{action}:median" in entries[-1]["rule_ids"]
