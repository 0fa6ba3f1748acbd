"""The scorer on real Redis: features written by the online writer, read by RedisFeatureSource.

The outage test starts its own redis-server (own port, state under ``tmp_path``), stops
it while scoring and starts it again; the lead's Redis is only used by the first test,
under a private project (key suffix) that is deleted afterwards.
"""

from __future__ import annotations

import math
import socket
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from events.catalog import VIEWS
from events.models import PricingDecision, PricingRequest
from features.config import FeaturesConfig
from features.online_source import RedisFeatureSource
from features.online_writer import OnlineWriter
from features.rows import FeatureRow
from infra import redis_server
from infra.config import StackConfig
from market.synthetic import training_frame
from pricing.degraded import FEATURE_STORE_UNAVAILABLE
from pricing.models import DemandModelConfig
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from pricing.tiers import load_pricer
from pricing.training import train_bundle
from routing.calibration import Thresholds
from routing.router import TieredRouter
from tests.integration._features_helpers import drop_project_keys

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
T0_MS = int(T0.timestamp() * 1000)
RULES = Path(__file__).resolve().parents[2] / "pricing" / "rules" / "default.yaml"
HOTELS, NIGHTS, VERSION = 4, 6, 11
MODEL_ONLY = Thresholds(rules_below=0.0, heavy_above=0.3)
"""Nothing scores below 0, so every non-degraded decision is priced by a model."""


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    out, frame = tmp_path_factory.mktemp("bundles"), training_frame(2_000, seed=5)
    light = train_bundle(frame, out / "light", tier="light", config=DemandModelConfig(num_trees=15))
    heavy = train_bundle(frame, out / "heavy", tier="heavy",
                         config=DemandModelConfig(n_members=3, num_trees=20, bootstrap=True))
    return light.path, heavy.path


def _keys() -> list[tuple[str, str, date]]:
    return [(f"h{h}", "std", date(2026, 12, 1) + timedelta(days=d)) for h in range(HOTELS) for d in range(NIGHTS)]


def _rows() -> list[FeatureRow]:
    """Every view of every key, values from the synthetic training frame (in-distribution), a minute old."""
    frame = training_frame(len(_keys()), seed=9)
    rows = []
    for (hotel, room, stay), (_, values) in zip(_keys(), frame.iterrows(), strict=True):
        for view, (keys, names) in VIEWS.items():
            if view == "hotel_stats" and stay != date(2026, 12, 1):
                continue
            feats = {n: None if math.isnan(values[n]) else float(values[n]) for n in names}
            stay_key = "room_type" in keys
            rows.append(FeatureRow(hotel, view, room if stay_key else None, stay.isoformat() if stay_key else None,
                                   T0_MS - 60_000, VERSION, T0_MS - 60_000, feats))
    return rows


def _requests(n: int) -> list[PricingRequest]:
    keys = _keys()
    return [PricingRequest(hotel_id=keys[i % len(keys)][0], room_type="std", stay_date=keys[i % len(keys)][2],
                           nights=1 + i % 3, event_time=T0 + timedelta(seconds=i)) for i in range(n)]


def _scorer(config: FeaturesConfig, bundles: tuple[Path, Path]) -> Scorer:
    return Scorer(ScorerConfig(deadline_ms=60_000.0), rules=RuleSet.load(RULES),
                  feature_source=RedisFeatureSource(config, clock=lambda: T0),  # read as of the rows (TTL)
                  light=load_pricer(bundles[0]), heavy=load_pricer(bundles[1]), router=TieredRouter(MODEL_ONLY))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[StackConfig]:
    """A redis-server of this test only (free port, AOF under tmp_path); stopped at the end."""
    config = StackConfig(state_dir=tmp_path / "stack", redis_port=_free_port(), ready_timeout_s=30.0)
    redis_server.start(config)
    try:
        yield config
    finally:
        redis_server.stop(config)


def _model_priced(decisions: list[PricingDecision]) -> bool:
    return all(d.tier in ("light", "heavy") and not d.degraded and d.feature_version == VERSION for d in decisions)


def test_decisions_use_the_features_in_redis(
    stack: StackConfig, key_prefix: str, tmp_path: Path, bundles: tuple[Path, Path]
) -> None:
    config = FeaturesConfig(project=key_prefix.rstrip(":"), state_dir=tmp_path, redis_url=stack.redis_url)
    writer = OnlineWriter(config, registry=CollectorRegistry())
    try:
        assert writer.write_rows(_rows()).written == len(_rows())
        scorer = _scorer(config, bundles)
        decisions = scorer.price_batch(_requests(40)) + [scorer.price(r) for r in _requests(8)]
        unknown = scorer.price(PricingRequest(hotel_id="nobody", room_type="std", stay_date=date(2026, 12, 2),
                                              event_time=T0))
    finally:
        drop_project_keys(config)
        writer.close()

    assert _model_priced(decisions)
    assert {d.tier for d in decisions} == {"light", "heavy"}
    first = decisions[0]
    stored = next(r for r in _rows() if r.view == "stay_inventory" and r.hotel_id == first.hotel_id
                  and r.stay_date == first.stay_date.isoformat())
    assert first.features["occupancy"] == stored.features["occupancy"]
    assert first.features["hotel_searches_24h"] is not None
    assert unknown.feature_version is None  # nothing stored for that key: not the version of another key


def test_redis_outage_degrades_to_rules_and_models_resume_after_restart(
    own_redis: StackConfig, tmp_path: Path, bundles: tuple[Path, Path]
) -> None:
    config = FeaturesConfig(project="outage", state_dir=tmp_path, redis_url=own_redis.redis_url, redis_timeout_s=0.3)
    writer = OnlineWriter(config, registry=CollectorRegistry())
    writer.write_rows(_rows())
    writer.close()
    scorer = _scorer(config, bundles)
    requests = _requests(30)

    before = scorer.price_batch(requests[:10])
    assert redis_server.stop(own_redis)
    during = scorer.price_batch(requests[10:20]) + [scorer.price(r) for r in requests[20:25]]
    redis_server.start(own_redis)
    after = scorer.price_batch(requests[25:]) + [scorer.price(requests[0])]

    assert _model_priced(before)
    assert all(d.tier == "rules" and d.degraded and d.feature_version is None for d in during)
    assert all((d.degraded_reason or "").startswith(FEATURE_STORE_UNAVAILABLE) for d in during)
    assert all(math.isfinite(d.price) and 25.0 <= d.price <= 2000.0 for d in during)
    assert scorer.stats.value("pricestream_degraded_decisions_total", reason=FEATURE_STORE_UNAVAILABLE) == 15.0
    assert scorer.stats.value("pricestream_decisions_total", tier="rules") == 15.0
    assert _model_priced(after)  # AOF brought the features back with the restarted server
