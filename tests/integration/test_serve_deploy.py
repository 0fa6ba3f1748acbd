"""``pricestream serve`` as a deployed process: every returned decision is on Kafka and in the audit log.

Real Kafka and Redis (the session stack); the server is its own OS process started by the CLI.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from infra.config import StackConfig
from tests.integration.serve_helpers import (
    STAY_DATE,
    Server,
    read_topic,
    request_body,
    run_cli,
    seed_models,
    stack_env,
    start_serve,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def served(stack: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("serve")
    env = stack_env(stack, root / "state")
    seed_models(env)
    server = start_serve(env, root / "serve.log")
    yield server
    if server.proc.poll() is None:
        server.terminate()


def test_500_http_decisions_reach_kafka_and_the_audit_log_exactly_once(served: Server) -> None:
    bodies = [request_body(i) for i in range(500)]
    with httpx.Client(base_url=served.url, timeout=30.0) as client:
        answers = [client.post("/v1/price", json=body) for body in bodies]
    assert [a.status_code for a in answers] == [200] * 500
    assert {a.json()["request_id"] for a in answers} == {b["request_id"] for b in bodies}
    decisions = read_topic(served.env, "pricing.decisions", expect=500)
    assert Counter(d["request_id"] for d in decisions) == Counter(b["request_id"] for b in bodies)
    assert {(d["arm"], d["propensity"]) for d in decisions} == {("incumbent", 1.0)}
    served.proc.poll()
    verify = run_cli(served.env, "audit", "verify")
    # the server is still running: the idle flusher, not a shutdown, put the entries on disk
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "500 entries, hash chain intact" in verify.stdout


def test_a_drift_recalibration_moves_the_running_servers_tiers(served: Server) -> None:
    from datetime import UTC, datetime

    from feedback.monitors.drift import DriftReport, FeatureDrift
    from feedback.monitors.recalibration import RecalibrationConfig, ThresholdRecalibrator
    from pricestream.settings import Settings
    from routing.calibration import TierShares
    from routing.threshold_state import ThresholdStore

    store = ThresholdStore(Settings(state_dir=Path(served.env["PRICESTREAM_STATE_DIR"])).router_thresholds())
    alert = FeatureDrift("occupancy", 500, 1.0, 1.0, 0.2, True)

    def recalibrate(shares: TierShares, hour: int) -> list[str]:
        recal = ThresholdRecalibrator(RecalibrationConfig(enabled=True, shares=shares, min_samples=100), store=store)
        for i in range(500):
            recal.learn_one(i / 500)
        assert recal.on_report(DriftReport(datetime(2026, 12, 1, hour, tzinfo=UTC), 500, (alert,))) is not None
        threading.Event().wait(0.6)  # > the server's follow interval (0.2 s)
        with httpx.Client(base_url=served.url, timeout=30.0) as client:
            return [client.post("/v1/price", json=request_body(i)).json()["tier"] for i in range(40)]

    assert set(recalibrate(TierShares(rules=1.0, light=0.0, heavy=0.0), 1)) == {"rules"}
    assert set(recalibrate(TierShares(rules=0.0, light=0.0, heavy=1.0), 2)) == {"heavy"}
    health = httpx.get(f"{served.url}/healthz").json()
    assert health["thresholds"]["heavy_above"] == store.load().thresholds.heavy_above  # type: ignore[union-attr]


def _seed_log_with_line_separators(env: dict[str, str]) -> None:
    """An audit log from before the contract refused U+2028 / U+0085 in ids (or from another writer)."""
    from audit.log import AuditLog

    path = Path(env["PRICESTREAM_STATE_DIR"]) / "data" / "audit" / "decisions.jsonl"
    with AuditLog(path) as log:
        for hotel in ("h\u2028x", "h\u0085y"):
            log.append_entry({"tier": "rules", "decision": {"hotel_id": hotel, "price": 100.0}})


def test_sigterm_mid_traffic_and_restart_lose_and_duplicate_nothing(
    stack: StackConfig, tmp_path: Path
) -> None:
    env = stack_env(stack, tmp_path / "state")
    seed_models(env)
    _seed_log_with_line_separators(env)
    log = tmp_path / "serve.log"
    server = start_serve(env, log)  # starts on a log whose values hold U+2028 and U+0085
    returned: list[str] = []
    sent = threading.Event()
    bodies = [request_body(i) for i in range(400)]

    def client() -> None:
        with httpx.Client(timeout=30.0) as http:
            for i, body in enumerate(bodies):
                while True:  # a request refused while the server restarts is sent again
                    try:
                        answer = http.post(f"{url[0]}/v1/price", json=body)
                    except httpx.TransportError:
                        sent.wait(0.2)
                        continue
                    assert answer.status_code == 200, answer.text
                    returned.append(answer.json()["request_id"])
                    break
                if i == 150:
                    sent.set()

    url = [server.url]
    worker = threading.Thread(target=client)
    worker.start()
    sent.wait(300)
    rc = server.terminate()
    server = start_serve(env, log)
    url[0] = server.url
    worker.join(600)
    assert rc == 0, log.read_text()[-2000:]
    assert len(returned) == 400 and set(returned) == {b["request_id"] for b in bodies}
    decisions = read_topic(env, "pricing.decisions", expect=400)
    assert Counter(d["request_id"] for d in decisions) == Counter(returned)  # 0 lost, 0 duplicated
    assert server.terminate() == 0
    verify = run_cli(env, "audit", "verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "402 entries, hash chain intact" in verify.stdout  # the 2 seeded + one per decision returned

    from pricestream.commands.monitoring import audit_frame

    path = Path(env["PRICESTREAM_STATE_DIR"]) / "data" / "audit" / "decisions.jsonl"
    entries = [json.loads(line) for line in path.read_bytes().split(b"\n") if line]
    assert Counter(e["decision"].get("request_id") for e in entries[2:]) == Counter(returned)
    audited = audit_frame(path)
    assert len(audited) == 402  # the reader agrees with verify
    assert list(audited["hotel_id"].iloc[:2]) == ["h\u2028x", "h\u0085y"]


def _traded_hotel_rows(env: dict[str, str], hotel: str, stay: str) -> None:
    """Every feature view of ``hotel`` (stay ``stay``) in the deployment's online store, a minute old."""
    import math
    import time

    from events.catalog import VIEWS
    from features.online_writer import OnlineWriter
    from features.rows import FeatureRow
    from market.synthetic import training_frame
    from pricestream.settings import Settings

    values = training_frame(1, seed=9).iloc[0]
    values["views_7d"] = 40.0  # behaviour before its first request: a hotel that traded
    at_ms = int(time.time() * 1000) - 60_000
    rows = []
    for view, (keys, names) in VIEWS.items():
        feats = {n: None if math.isnan(values[n]) else float(values[n]) for n in names}
        stay_key = "room_type" in keys
        rows.append(FeatureRow(hotel, view, "std" if stay_key else None, stay if stay_key else None, at_ms, 1,
                               at_ms, feats))
    settings = Settings(state_dir=Path(env["PRICESTREAM_STATE_DIR"]), redis_url=env["PRICESTREAM_REDIS_URL"],
                        feast_project=env["PRICESTREAM_FEAST_PROJECT"])
    OnlineWriter(settings.features()).write_rows(rows)


def test_cold_start_in_serve_a_new_hotel_is_priced_by_rules_then_transferred_a_traded_one_by_the_model(
    stack: StackConfig, tmp_path: Path
) -> None:
    """Cold start, on by default: the stage comes from the hotel's history, and is recorded on the decision."""
    import time
    import uuid
    from datetime import UTC, datetime

    from pricestream.settings import Settings
    from routing.calibration import Thresholds
    from routing.threshold_state import ThresholdStore

    env = stack_env(stack, tmp_path / "state")
    seed_models(env)
    state = Settings(state_dir=Path(env["PRICESTREAM_STATE_DIR"]))
    ThresholdStore(state.router_thresholds()).publish(Thresholds(rules_below=0.0, heavy_above=0.99),
                                                      at=datetime.now(tz=UTC), reason="test: models price all")
    new, old, stay = f"new-{uuid.uuid4().hex[:8]}", f"old-{uuid.uuid4().hex[:8]}", STAY_DATE
    _traded_hotel_rows(env, old, stay)
    server = start_serve(env, tmp_path / "serve.log")
    try:
        now_ms = int(time.time() * 1000)
        day_ms = 86_400_000
        bodies = [{**request_body(0, hotel=new), "event_time": now_ms - 2 * day_ms},  # its first request
                  {**request_body(1, hotel=new), "event_time": now_ms - 2 * day_ms + 3_600_000},  # 1 h later
                  {**request_body(2, hotel=new), "event_time": now_ms},  # 2 days of history
                  {**request_body(3, hotel=old), "event_time": now_ms}]
        with httpx.Client(base_url=server.url, timeout=30.0) as client:
            answers = [client.post("/v1/price", json=b) for b in bodies]
            batch = client.post("/v1/price:batch", json=[{**request_body(4, hotel=new), "event_time": now_ms},
                                                          {**request_body(5, hotel=old), "event_time": now_ms}])
        assert [a.status_code for a in answers] == [200] * 4 and batch.status_code == 200
        first, hour, transfer, traded = (a.json() for a in answers)
        for rules in (first, hour):  # day one: rules, planned (not a degradation), inside the rules' bounds
            assert (rules["tier"], rules["rule_ids"][-1], rules["degraded"]) == ("rules", "cold_start:rules", False)
            assert rules["model_version"] is None and 0.0 < rules["price"] < 10_000.0
        assert transfer["tier"] in ("light", "heavy") and transfer["rule_ids"][-1] == "cold_start:transfer"
        assert transfer["model_version"] is not None
        # a hotel with behaviour in the feature store before its first request is mature: the model, as before
        assert traded["tier"] in ("light", "heavy") and traded["rule_ids"][-1] == "cold_start:own"
        assert traded["feature_version"] == 1 and not traded["degraded"]
        assert [d["rule_ids"][-1] for d in batch.json()] == ["cold_start:transfer", "cold_start:own"]
        # stage two is explored (PRICESTREAM_COLD_START_EXPLORE_BAND 0.10, 5 arms): a drawn arm's propensity
        # (1/5, or a multiple where the rules' band merges arms); rules and mature hotels are not explored
        assert transfer["propensity"] < 1.0 and round(transfer["propensity"] * 5) == transfer["propensity"] * 5
        assert first["propensity"] == traded["propensity"] == 1.0
        assert [d["propensity"] < 1.0 for d in batch.json()] == [True, False]
        published = {d["request_id"]: d for d in read_topic(env, "pricing.decisions", expect=6)}
        assert published[first["request_id"]]["rule_ids"][-1] == "cold_start:rules"  # recorded downstream too
        assert published[transfer["request_id"]]["propensity"] == transfer["propensity"]
        wide = {**env, "COLUMNS": "250"}  # one line per row: the first sight is not wrapped
        shown = run_cli(wide, "cold-start", "history", "--hotel", new)
        first_seen = datetime.fromtimestamp((now_ms - 2 * day_ms) / 1000, tz=UTC).isoformat()
        assert shown.returncode == 0 and first_seen[:19] in shown.stdout, shown.stdout + shown.stderr
        assert "mature" in run_cli(wide, "cold-start", "history", "--hotel", old).stdout
    finally:
        server.terminate()


def _own_examples(hotel: str, decision: dict, n: int) -> list:
    """``n`` training examples of ``hotel`` as the sampler writes them: the features its decision saw, prices spread
    over 60-400, booked more often at lower prices (both outcomes present)."""
    import random
    import time
    import uuid
    from datetime import UTC, date, datetime

    from events.models import TrainingExample

    rng = random.Random(11)
    features = {k: v for k, v in decision["features"].items() if v is None or isinstance(v, float | int)}
    stay = date.fromisoformat(STAY_DATE)
    at = datetime.fromtimestamp(time.time() - 3600, tz=UTC)
    features |= {"lead_time_days": float((stay - at.date()).days), "nights": 1.0, "stay_dow": float(stay.weekday()),
                 "channel_code": 0.0}
    out = []
    for _ in range(n):
        price = rng.uniform(60.0, 400.0)
        out.append(TrainingExample(hotel_id=hotel, room_type="std", stay_date=stay, event_time=at,
                                   decision_id=uuid.uuid4(), label=int(rng.random() < 1.0 / (1.0 + price / 150.0)),
                                   price=price, features=features, weight=1.0, strategy="random",
                                   selection_prob=1.0))
    return out


def test_a_new_hotel_in_stage_own_is_priced_by_the_trainers_refit_of_it_and_keeps_it_after_a_restart(
    stack: StackConfig, tmp_path: Path
) -> None:
    """Stage three deployed: the trainer refits a new hotel in stage own on its training.examples and publishes it;
    the running serve prices that hotel with it (no restart), the other hotels with the pooled models; and a
    killed and restarted serve still does."""
    import time
    import uuid
    from datetime import UTC, datetime

    from delivery.cold_start import NO_REFIT
    from events.admin import create_topics
    from events.producer import Producer
    from events.topics import TOPICS
    from feedback.hotel_models import HotelModels
    from feedback.registry import ModelRegistry
    from pricestream.commands.cold_start import history_store
    from pricestream.settings import Settings
    from routing.calibration import Thresholds
    from routing.threshold_state import ThresholdStore

    env = stack_env(stack, tmp_path / "state", PRICESTREAM_COLD_START_OWN_AFTER_LABELS="60",
                    PRICESTREAM_COLD_START_OWN_AFTER_BOOKINGS="5", PRICESTREAM_COLD_START_COUNTS_TTL_S="0",
                    PRICESTREAM_OPS_PORT="0")
    seed_models(env)
    s = Settings(state_dir=Path(env["PRICESTREAM_STATE_DIR"]), kafka_bootstrap=env["PRICESTREAM_KAFKA_BOOTSTRAP"],
                 topic_prefix=env["PRICESTREAM_TOPIC_PREFIX"], redis_url=env["PRICESTREAM_REDIS_URL"],
                 feast_project=env["PRICESTREAM_FEAST_PROJECT"])
    ThresholdStore(s.router_thresholds()).publish(Thresholds(rules_below=0.0, heavy_above=0.99),
                                                  at=datetime.now(tz=UTC), reason="test: the light model prices all")
    pooled = ModelRegistry(s.registry()).current("light")
    assert pooled is not None
    new, other = f"new-{uuid.uuid4().hex[:8]}", f"other-{uuid.uuid4().hex[:8]}"
    day_ms = 86_400_000
    server = start_serve(env, tmp_path / "serve.log")
    try:
        with httpx.Client(base_url=server.url, timeout=30.0) as client:
            for hotel in (new, other):  # first requests two days ago: new hotels, in stage transfer now
                assert client.post("/v1/price", json={**request_body(0, hotel=hotel),
                                                      "event_time": int(time.time() * 1000) - 2 * day_ms}).is_success
            transfer = client.post("/v1/price", json=request_body(1, hotel=new)).json()
        assert transfer["rule_ids"][-1] == "cold_start:transfer"
        history = history_store(s)  # their labels, as the label service sets its totals: both reach stage own
        history.set_joined({new: (80, 20), other: (80, 20)})
        create_topics(s.kafka(), [TOPICS["training.examples"], TOPICS["training.examples.dlq"]])
        producer = Producer(s.kafka(), topic="training.examples")
        producer.send_many(_own_examples(new, transfer, 80))
        producer.flush()
        trained = run_cli(env, "services", "run", "trainer", "--max-idle", "5")
        assert trained.returncode == 0, trained.stdout + trained.stderr
        published = HotelModels(s.registry()).get(new)
        assert published is not None, trained.stdout + trained.stderr
        own = published.live["light"].version
        assert own.endswith(f"@{new}") and published.parents["light"] == pooled.version
        assert HotelModels(s.registry()).get(other) is None  # no examples of its own: nothing to refit on
        shown_cli = run_cli({**env, "COLUMNS": "300"}, "cold-start", "history", "--hotel", new)
        assert own in shown_cli.stdout and "own: 80 labels >= 60" in shown_cli.stdout, shown_cli.stdout

        def priced(hotels: tuple[str, ...]) -> list[dict]:
            with httpx.Client(base_url=server.url, timeout=30.0) as client:
                return [client.post("/v1/price", json=request_body(2, hotel=h)).json() for h in hotels]

        deadline = time.monotonic() + 30.0  # the follower polls the generation every 200 ms; a bound, not a test
        mine, theirs, fleet = priced((new, other, "h0"))
        while mine["model_version"] != own and time.monotonic() < deadline:
            time.sleep(0.3)
            mine, theirs, fleet = priced((new, other, "h0"))
        assert (mine["model_version"], mine["tier"], mine["rule_ids"][-1]) == (own, "light", "cold_start:own")
        assert (theirs["model_version"], theirs["rule_ids"][-2:]) == (pooled.version, [NO_REFIT, "cold_start:own"])
        assert (fleet["model_version"], fleet["rule_ids"][-1]) == (pooled.version, "cold_start:own")
        assert NO_REFIT not in fleet["rule_ids"]  # a mature hotel: the pooled models are its own
        shown = httpx.get(f"{server.url}/healthz", timeout=10.0).json()["hotel_models"]
        assert shown["hotels"][new]["light"] == own and other not in shown["hotels"] and shown["errors"] == {}
        server.proc.kill()  # SIGKILL: the published refit is on disk, not in the process
        server.proc.wait(30)
        server = start_serve(env, tmp_path / "serve.log")
        mine, theirs = priced((new, other))
        assert (mine["model_version"], theirs["model_version"]) == (own, pooled.version)
    finally:
        if server.proc.poll() is None:
            server.terminate()
