"""Progressive delivery on the serving path: RolloutScorer over real scorers, Kafka, Redis and the HTTP app."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from delivery import DeliveryConfig, GateLimits, Stage, hash_unit
from delivery.rollout import RolloutScorer
from delivery.sequential import SequentialConfig
from events.admin import create_topics
from events.catalog import ALL_FEATURES, VIEWS
from events.config import KafkaConfig
from events.consumer import EventConsumer
from events.models import OutcomeLabel, PricingDecision, PricingRequest
from events.producer import Producer
from events.topics import TOPICS
from features.config import FeaturesConfig
from features.online_source import RedisFeatureSource
from features.online_writer import OnlineWriter
from feedback.offpolicy import evaluate
from infra.config import StackConfig
from market import Market, MarketConfig, Offer
from market.generator import Simulation
from market.synthetic import training_frame
from pricing.feature_source import FeatureSource, MemoryFeatureSource
from pricing.models import DemandModelConfig
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from pricing.tiers import Quote, TierPricer, load_pricer
from pricing.training import train_bundle
from routing.router import Thresholds, TieredRouter
from serving.http import create_app
from tests.integration._features_helpers import T0_MS, drop_project_keys, features_config, make_row

pytestmark = pytest.mark.integration

RULES = "min_price: 10\nmax_price: 5000\ndefault_base_rate: 150\n"
ALWAYS_LIGHT = Thresholds(rules_below=0.0, heavy_above=1.0)
T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
HOTELS = tuple(f"h{i}" for i in range(8))
# these tests are about prices, not speed; the candidate books twice as often, an effect of half the outcome's
# spread: the sequential gate is tuned for it (mixture_sd) and decides from 50 outcomes per arm
LOOSE_LATENCY = GateLimits(max_p99_latency_ms=60_000.0,
                           sequential=SequentialConfig(min_outcomes=50, mixture_sd=0.5))


# -- pricers -------------------------------------------------------------------------------------
@dataclasses.dataclass
class Tagged:
    """A real pricer under another version, optionally moving its price (always, or on a share of inputs)."""

    inner: Any
    version: str
    factor: float = 1.0
    flip_share: float = 0.0
    delay_s: float = 0.0
    name: str = "demand-light"

    def quote(self, request: PricingRequest, features: Mapping[str, float | None], *, floor: float,
              ceiling: float, rule_price: float | None = None) -> Quote:
        if self.delay_s:
            threading.Event().wait(self.delay_s)  # a deliberately slow candidate
        q = self.inner.quote(request, features, floor=floor, ceiling=ceiling, rule_price=rule_price)
        factor = self.factor
        if self.flip_share and hash_unit(str(request.request_id), "flip") < self.flip_share:
            factor *= 1.10
        price = min(ceiling, max(floor, q.price * factor))
        return dataclasses.replace(q, price=price, model_version=self.version)


@dataclasses.dataclass
class MarketPricer:
    """Quotes the simulated hotel's reference price times ``factor`` (a policy the truth can score)."""

    market: Market
    factor: float
    version: str
    name: str = "market-ref"

    def quote(self, request: PricingRequest, features: Mapping[str, float | None], *, floor: float,
              ceiling: float, rule_price: float | None = None) -> Quote:
        price = round(self.market.reference_price(request.hotel_id, request.room_type) * self.factor, 2)
        return Quote(price, 0.0, None, 0.0, (), self.name, self.version)


@dataclasses.dataclass
class Flat:
    """The rules price under a version: the cheapest real pricer, for the 100,000-key canary."""

    version: str
    name: str = "flat"

    def quote(self, request: PricingRequest, features: Mapping[str, float | None], *, floor: float,
              ceiling: float, rule_price: float | None = None) -> Quote:
        return Quote(rule_price or floor, 0.0, None, 0.0, (), self.name, self.version)


@pytest.fixture(scope="module")
def light(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A small real light model (ONNX), trained once on the seeded synthetic demand."""
    info = train_bundle(training_frame(800, seed=0), tmp_path_factory.mktemp("bundle") / "light", tier="light",
                        config=DemandModelConfig(num_trees=15))
    return load_pricer(info.path)


def scorer(pricer: TierPricer | Any, source: FeatureSource) -> Scorer:
    # a generous deadline: on a loaded CI machine a model must not be skipped for time (no timing in tests)
    return Scorer(ScorerConfig(stale_after_s=None, deadline_ms=60_000.0), rules=RuleSet.from_yaml(RULES),
                  feature_source=source, light=pricer, heavy=None, router=TieredRouter(thresholds=ALWAYS_LIGHT))


def memory_source() -> MemoryFeatureSource:
    source = MemoryFeatureSource()
    rng = np.random.default_rng(3)
    for hotel in HOTELS:
        for day in range(10):
            values = {name: float(rng.gamma(2.0, 3.0)) for name in ALL_FEATURES}
            values.update(occupancy=float(rng.uniform(0.1, 0.95)), capacity=80.0, rooms_left=float(rng.integers(5, 70)),
                          comp_rate_median_24h=float(rng.uniform(100, 220)))
            source.put(hotel, "std", date(2026, 12, 10) + timedelta(days=day), values, version=1, event_time=T0)
    return source


def request(i: int, *, guest: str | None = None) -> PricingRequest:
    return PricingRequest(hotel_id=HOTELS[i % len(HOTELS)], room_type="std",
                          stay_date=date(2026, 12, 10) + timedelta(days=i % 10), event_time=T0,
                          guest_key=guest if guest is not None else f"guest-{i}")


def delivery(tmp_path: Path, **kw: Any) -> DeliveryConfig:
    return DeliveryConfig(state_path=tmp_path / "rollout.json", limits=kw.pop("limits", LOOSE_LATENCY), **kw)


def drive(rollout: RolloutScorer, make: Callable[[int], PricingRequest], *, until: Stage, n: int = 1500) -> int:
    """Move a healthy candidate from shadow to ``until``: price traffic, reward it, advance. Returns requests used."""
    i = 0
    while rollout.controller.status().stage != until:
        stage = rollout.controller.status().stage
        for _ in range(60 if stage == Stage.SHADOW else n):
            d = rollout.price(make(i))
            i += 1
            if stage != Stage.SHADOW:  # the candidate books 60% of its decisions, the incumbent 30%
                share = 0.6 if d.arm == "candidate" else 0.3
                rollout.reward(str(d.decision_id), hash_unit(str(d.decision_id), "book") < share)
        assert rollout.drain()
        result = rollout.advance(reason="test drive")
        if result.waiting and i < 50 * n:  # the sequential gate wants more outcomes: serve more of the stage
            continue
        assert result.advanced, result.message
    return i


# -- shadow ------------------------------------------------------------------------------------------
def test_shadow_never_serves_a_slow_candidate_and_logs_its_decision_on_kafka(
    light: Any, tmp_path: Path, kafka_config: KafkaConfig
) -> None:
    create_topics(kafka_config, [TOPICS["pricing.decisions"]])
    source = memory_source()
    slow = Tagged(light, "cand-2", factor=1.3, delay_s=0.05)
    producer = Producer(kafka_config, topic="pricing.decisions")
    rollout = RolloutScorer(scorer(Tagged(light, "inc-1"), source), config=delivery(tmp_path, latency_budget_ms=10.0),
                            on_decision=lambda _r, d: producer.send(d))
    rollout.start(scorer(slow, source), version="cand-2", incumbent_version="inc-1")
    plain_inc, plain_cand = scorer(Tagged(light, "inc-1"), source), scorer(Tagged(light, "cand-2", 1.3), source)
    requests = [request(i) for i in range(20)]
    served = [rollout.price(r) for r in requests]
    for r, d in zip(requests, served, strict=True):
        assert (d.arm, d.propensity, d.model_version) == ("incumbent", 1.0, "inc-1")
        assert d.price == plain_inc.price(r).price
        assert d.price != plain_cand.price(r).price  # the candidate's price never reaches the caller
    assert rollout.drain()
    producer.flush()
    logged: dict[str, dict[str, PricingDecision]] = {}
    with EventConsumer(kafka_config, topic="pricing.decisions", group_id="rollout-shadow-test") as consumer:
        for record in consumer.records(idle_timeout_s=3.0):
            assert isinstance(record, PricingDecision)
            logged.setdefault(str(record.request_id), {})[record.arm] = record
            if sum(len(v) for v in logged.values()) == 40:
                break
    producer.close()
    for r in requests:
        pair = logged[str(r.request_id)]
        assert set(pair) == {"incumbent", "candidate-shadow"}
        assert pair["candidate-shadow"].model_version == "cand-2"
        assert pair["candidate-shadow"].price == plain_cand.price(r).price
    evidence = rollout.evidence()
    # prices leave in cents: the ratio holds to the rounding (half a cent on prices of 50 or more)
    assert np.allclose(np.asarray(evidence.candidate_prices) / np.asarray(evidence.incumbent_prices), 1.3, rtol=2e-4)
    assert rollout.stats.value("pricestream_rollout_shadow_total", outcome="late") == 20.0  # 50 ms > 10 ms budget
    rollout.close()


# -- canary ------------------------------------------------------------------------------------------
def test_canary_share_over_100k_keys_is_5_percent_and_sticky(tmp_path: Path) -> None:
    source = MemoryFeatureSource()
    rollout = RolloutScorer(scorer(Flat("v1"), source), config=delivery(tmp_path), pair_share=0.0)
    rollout.start(scorer(Flat("v2"), source), version="v2")
    drive(rollout, request, until=Stage.CANARY)
    arms: dict[str, str] = {}
    for start in range(0, 100_000, 2_000):
        batch = [request(i, guest=f"key-{i}") for i in range(start, start + 2_000)]
        for r, d in zip(batch, rollout.price_batch(batch), strict=True):
            assert d.model_version == ("v2" if d.arm == "candidate" else "v1")
            assert d.propensity == pytest.approx(0.05 if d.arm == "candidate" else 0.95)
            arms[r.guest_key or ""] = d.arm
    share = sum(a == "candidate" for a in arms.values()) / len(arms)
    assert len(arms) == 100_000
    assert abs(share - 0.05) <= 0.003, share
    again = [rollout.price(request(i + 7, guest=f"key-{i}")) for i in range(0, 100_000, 37)]
    assert [d.arm for d in again] == [arms[f"key-{i}"] for i in range(0, 100_000, 37)]
    rollout.close()


def test_canary_reads_features_from_redis(
    light: Any, tmp_path: Path, stack: StackConfig, key_prefix: str, kafka_config: KafkaConfig
) -> None:
    config = redis_features(stack, key_prefix, tmp_path, kafka_config)
    try:
        # read as of the rows' time: the views' TTL would serve a year-old row as missing
        source = RedisFeatureSource(config, clock=lambda: datetime.fromtimestamp(T0_MS / 1000, tz=UTC))
        rollout = RolloutScorer(scorer(Tagged(light, "v1"), source), config=delivery(tmp_path))
        rollout.start(scorer(Tagged(light, "v2"), source), version="v2")
        drive(rollout, redis_request, until=Stage.CANARY)
        decisions = [rollout.price(redis_request(i)) for i in range(400)]
        assert all(d.feature_version == 10 + int(d.hotel_id[1:]) for d in decisions)  # read from Redis
        assert {d.arm for d in decisions} == {"incumbent", "candidate"}
        rollout.close()
    finally:
        drop_project_keys(config)


def redis_features(stack: StackConfig, key_prefix: str, tmp_path: Path, kafka: KafkaConfig) -> FeaturesConfig:
    config = features_config(stack, key_prefix, tmp_path, kafka)
    rows = [make_row(view, f"h{h}", version=10 + h) for view in VIEWS for h in range(4)]
    writer = OnlineWriter(config, registry=CollectorRegistry())
    assert writer.write_rows(rows).written == len(rows)
    writer.close()
    return config


def redis_request(i: int) -> PricingRequest:
    return PricingRequest(hotel_id=f"h{i % 4}", room_type="std", stay_date=date(2026, 12, 24), event_time=T0,
                          guest_key=f"redis-guest-{i}")


# -- gates ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("candidate", "failed", "observed"),
    [
        ({"flip_share": 0.2}, "flip_rate", 0.2),
        ({"factor": 1.15}, "price_mean_shift", 0.15),
    ],
    ids=["flips-20-percent", "shifted-prices"],
)
def test_a_gate_stops_a_bad_candidate_and_names_itself(
    light: Any, tmp_path: Path, candidate: dict[str, Any], failed: str, observed: float
) -> None:
    source = memory_source()
    rollout = RolloutScorer(scorer(Tagged(light, "v1"), source), config=delivery(tmp_path))
    rollout.start(scorer(Tagged(light, "v2", **candidate), source), version="v2")
    for i in range(400):
        rollout.price(request(i))
    assert rollout.drain()
    result = rollout.advance()
    assert not result.advanced and result.stage == Stage.ABORTED
    gates = {r.gate: r for r in result.results}
    assert not gates[failed].passed
    assert gates[failed].observed == pytest.approx(observed, abs=0.05)
    assert f"gate {failed!r} failed: observed" in result.message and "over by" in result.message
    if failed == "price_mean_shift":
        assert not gates["price_ks"].passed  # the whole distribution moved
    assert rollout.controller.status().history[-1].reason.startswith("shadow -> canary blocked: ")
    assert rollout.price(request(1)).model_version == "v1"
    rollout.close()


# -- rollback under load ---------------------------------------------------------------------------------
def test_rollback_while_four_threads_call_the_http_app(
    light: Any, tmp_path: Path, stack: StackConfig, key_prefix: str, kafka_config: KafkaConfig
) -> None:
    config = redis_features(stack, key_prefix, tmp_path, kafka_config)
    try:
        source = RedisFeatureSource(config, clock=lambda: datetime.fromtimestamp(T0_MS / 1000, tz=UTC))
        rollout = RolloutScorer(scorer(Tagged(light, "v1"), source), config=delivery(tmp_path), pair_share=0.25)
        rollout.start(scorer(Tagged(light, "v2"), source), version="v2")
        drive(rollout, redis_request, until=Stage.FULL)
        app = create_app(rollout)  # type: ignore[arg-type]
        results = run_load(app, rollout)
    finally:
        drop_project_keys(config)
    before = [r for r in results if not r[1]]
    after = [r for r in results if r[1]]
    assert all(status == 200 for status, _, _ in results), {s for s, _, _ in results}
    assert {v for _, _, v in before} >= {"v2"}
    assert after and {v for _, _, v in after} == {"v1"}
    assert rollout.controller.status().stage == Stage.ABORTED
    assert rollout.last_rollback_ms is not None and rollout.health()["rollout"]["active_arm"] == "incumbent"
    rollout.close()


def run_load(app: Any, rollout: RolloutScorer) -> list[tuple[int, bool, str | None]]:
    """4 threads POST /v1/price until stopped; the main thread rolls back once they have served 200."""
    rolled_back, stop = threading.Event(), threading.Event()
    results: list[tuple[int, bool, str | None]] = []
    lock = threading.Lock()
    body = {"hotel_id": "h1", "room_type": "std", "stay_date": "2026-12-24", "event_time": T0.isoformat()}

    def worker() -> None:
        with TestClient(app) as client:
            while not stop.is_set():
                started_after = rolled_back.is_set()
                response = client.post("/v1/price", json=body)
                version = response.json().get("model_version") if response.status_code == 200 else None
                with lock:
                    results.append((response.status_code, started_after, version))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    wait_until(lambda: len(results) >= 200)
    rollout.rollback("test: rollback under load")
    rolled_back.set()
    wait_until(lambda: sum(r[1] for r in results) >= 200)
    stop.set()
    for t in threads:
        t.join()
    return results


def wait_until(condition: Callable[[], bool], timeout_s: float = 120.0) -> None:
    done = threading.Event()
    end = datetime.now(tz=UTC) + timedelta(seconds=timeout_s)
    while not condition():
        if datetime.now(tz=UTC) > end:
            msg = "condition not reached"
            raise AssertionError(msg)
        done.wait(0.01)


# -- blend with delayed rewards from the label topic ---------------------------------------------------
def test_blend_moves_weight_to_the_better_arm_on_delayed_labels_from_kafka(
    light: Any, tmp_path: Path, kafka_config: KafkaConfig
) -> None:
    create_topics(kafka_config, [TOPICS["feedback.labels"]])
    source = memory_source()
    rollout = RolloutScorer(scorer(Tagged(light, "v1"), source), config=delivery(tmp_path), pair_share=0.25)
    rollout.start(scorer(Tagged(light, "v2"), source), version="v2")
    used = drive(rollout, request, until=Stage.BLEND)
    assert rollout.controller.status().candidate_weight == 0.2
    decisions = [rollout.price(request(used + i)) for i in range(3000)]
    assert {d.propensity for d in decisions if d.arm == "candidate"} == {0.2}
    with Producer(kafka_config, topic="feedback.labels") as producer:  # outcomes arrive later, as labels
        for d in decisions:
            p = 0.5 if d.arm == "candidate" else 0.2
            booked = int(hash_unit(str(d.decision_id), "label") < p)
            producer.send(OutcomeLabel(hotel_id=d.hotel_id, room_type=d.room_type, stay_date=d.stay_date,
                                       decision_id=d.decision_id, label=booked, price=d.price, tier=d.tier))
        producer.send(OutcomeLabel(hotel_id="h0", room_type="std", stay_date=date(2026, 12, 10),
                                   decision_id=decisions[0].request_id, label=1, price=100.0, tier="light"))
        producer.flush()
    credited = 0
    with EventConsumer(kafka_config, topic="feedback.labels", group_id="rollout-blend-test") as consumer:
        for label in consumer.records(idle_timeout_s=3.0):
            assert isinstance(label, OutcomeLabel)
            credited += rollout.reward_label(label)
            if credited == len(decisions) and rollout.unknown_rewards == 1:
                break
    assert credited == len(decisions) and rollout.unknown_rewards == 1
    weight = rollout.update_weights(reason="test")
    assert weight == 0.95  # P(candidate better) ~ 1, clipped at 1 - min_weight
    assert any(h.kind == "weight" and "thompson" in h.reason for h in rollout.controller.status().history)
    later = [rollout.price(request(10_000 + i, guest=f"late-{i}")) for i in range(2000)]
    share = sum(d.arm == "candidate" for d in later) / len(later)
    assert abs(share - 0.95) < 0.03
    assert sorted({round(d.propensity, 9) for d in later}) == [0.05, 0.95]
    rollout.close()


# -- off-policy evaluation from a canary run on the simulator ------------------------------------------
def test_off_policy_estimate_of_the_candidate_covers_its_true_value(tmp_path: Path) -> None:
    market = Market(MarketConfig(hotels=6, horizon_days=30, seed=11))
    source = MemoryFeatureSource()
    logged: list[tuple[Offer, PricingDecision]] = []
    # the candidate prices 60% above the incumbent: price gates off, this test is about the logs
    limits = GateLimits(max_flip_rate=1.0, max_ks=1.0, max_mean_shift=10.0, max_p99_latency_ms=60_000.0)
    rollout = RolloutScorer(scorer(MarketPricer(market, 1.0, "inc"), source),
                            config=delivery(tmp_path, canary_share=0.2, limits=limits), pair_share=0.0)
    candidate = scorer(MarketPricer(market, 1.6, "cand"), source)
    rollout.start(candidate, version="cand")
    counter = iter(range(10**9))

    def policy(offer: Offer) -> float:
        i = next(counter)
        stage = rollout.controller.status().stage
        decision = rollout.price(offer_request(offer, i))
        if stage == Stage.CANARY:
            logged.append((offer, decision))
        elif i == 59:  # 60 shadow pairs, then the canary starts
            assert rollout.drain() and rollout.advance().advanced
        return decision.price

    for _ in Simulation(market, duration=timedelta(days=4), policy=policy, rng_seed=5):
        pass
    truth = float(np.mean([market.expected_revenue(o.hotel_id, o.room_type, o.stay_date, o.at,
                                                   candidate.price(offer_request(o, 0)).price, channel=o.channel)
                           for o, _ in logged]))
    frame, draw = logs_frame(market, logged)
    incumbent_truth = float(frame.loc[frame.action == "incumbent", "expected"].mean())
    assert len(frame) > 2000 and 0.17 < (frame.action == "candidate").mean() < 0.23
    # Revenue per offer is heavy-tailed (group bookings), so one draw says little about a 95% interval:
    # the same logs get 40 independent outcome draws from the truth, and the intervals must cover as advertised.
    rng = np.random.default_rng(9)
    estimates = [evaluate(frame.assign(reward=draw(rng)), "candidate_prob", method="ips", ci="normal")
                 for _ in range(40)]
    coverage = np.mean([e.covers(truth) for e in estimates])
    assert coverage >= 0.85, (coverage, truth, estimates[:3])
    assert np.mean([e.value for e in estimates]) == pytest.approx(truth, rel=0.05)
    assert np.median([e.ci_high for e in estimates]) < incumbent_truth  # the logs tell the candidate earns less
    rollout.close()


def offer_request(offer: Offer, i: int) -> PricingRequest:
    return PricingRequest(hotel_id=offer.hotel_id, room_type=offer.room_type, stay_date=offer.stay_date,
                          event_time=offer.at, nights=offer.nights, channel=offer.channel, guest_key=f"shopper-{i}")


def logs_frame(
    market: Market, logged: list[tuple[Offer, PricingDecision]]
) -> tuple[pd.DataFrame, Callable[[np.random.Generator], np.ndarray]]:
    """One row per served decision, and a function drawing each decision's revenue from the market's truth.

    A draw picks the shopper's segment from the market's mix for the offer's channel, books with the
    truth's probability at the served price and earns price x the segment's rooms x nights: its mean is
    exactly ``Market.expected_revenue`` at that price.
    """
    mixes, probs, prices, expected = [], [], [], []
    for offer, d in logged:
        h, r = market.hotel_index(offer.hotel_id), market.room_index(offer.room_type)
        ordinal, ts = offer.stay_date.toordinal(), offer.at.timestamp()
        comp = market.comp_median(h, r, ordinal, ts)
        mixes.append(market.segment_mix(h, r, ordinal, ts, offer.channel))
        probs.append([market.prob(h, r, ordinal, ts, d.price, s, offer.channel, comp) for s in range(len(mixes[-1]))])
        prices.append(d.price)
        expected.append(market.expected_revenue(offer.hotel_id, offer.room_type, offer.stay_date, offer.at, d.price,
                                                channel=offer.channel))
    cum, p, price = np.cumsum(mixes, axis=1), np.asarray(probs), np.asarray(prices)
    weight = np.asarray(market.seg_weight)

    def draw(rng: np.random.Generator) -> np.ndarray:
        seg = (rng.random(len(price))[:, None] > cum).sum(axis=1).clip(max=cum.shape[1] - 1)
        booked = rng.random(len(price)) < p[np.arange(len(price)), seg]
        return np.asarray(booked * price * weight[seg])

    frame = pd.DataFrame({"action": [d.arm for _, d in logged], "propensity": [d.propensity for _, d in logged],
                          "candidate_prob": [1.0 if d.arm == "candidate" else 0.0 for _, d in logged],
                          "expected": expected})
    return frame, draw
