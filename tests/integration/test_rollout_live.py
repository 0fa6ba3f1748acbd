"""Progressive delivery on a running ``pricestream serve``, driven by ``pricestream rollout`` commands.

The server is its own OS process; the commands are others; the gates read the live
``pricing.decisions`` and ``feedback.labels`` topics (labels published here, as the label
service would, from outcomes decided by the test). Requests flow the whole time.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from events.config import KafkaConfig
from events.models import OutcomeLabel
from events.producer import Producer
from feedback.registry import ModelRegistry
from infra.config import StackConfig
from pricestream.settings import Settings
from tests.integration.serve_helpers import (
    Server,
    read_topic,
    request_body,
    run_cli,
    seed_models,
    stack_env,
    start_serve,
)

pytestmark = pytest.mark.integration

STAGE_REQUESTS = 240
"""Requests per stage: with a 0.4 canary share and a 0.5 pair share, well over 30 samples per gate."""


class Traffic:
    """A client thread pricing requests over HTTP until stopped, keeping every answer."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.answers: list[dict] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        with httpx.Client(base_url=self.url, timeout=30.0) as client:
            while not self._stop.is_set():
                r = client.post("/v1/price", json=request_body(i))
                i += 1
                if r.status_code == 200:
                    self.answers.append(r.json())
                else:
                    self.failures.append(f"{r.status_code} {r.text[:200]}")

    def wait_for(self, n: int) -> list[dict]:
        start = len(self.answers)
        while len(self.answers) < start + n:
            time.sleep(0.05)
        return self.answers[start:]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


@pytest.fixture(scope="module")
def deployment(stack: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str, str]]:
    root = tmp_path_factory.mktemp("rollout")
    # a deadline no loaded host misses: a decision past it falls back to rules, and the price gates would then
    # compare fallbacks (seen once: a 3.2% mean shift between two copies of one model on a host at load 8)
    env = stack_env(stack, root / "state", PRICESTREAM_CANARY_SHARE="0.4", PRICESTREAM_ROLLOUT_PAIR_SHARE="0.5",
                    PRICESTREAM_ROLLOUT_MIN_OUTCOMES="50", PRICESTREAM_ROLLOUT_MIXTURE_SD="0.5",
                    PRICESTREAM_DEADLINE_MS="5000")
    seed_models(env)
    assert run_cli(env, "topics", "create").returncode == 0
    registry = ModelRegistry(Settings(state_dir=Path(env["PRICESTREAM_STATE_DIR"])).registry())
    incumbent = registry.current("light")
    assert incumbent is not None
    bundle = root / "candidate"  # the same model bytes under a new version: the price gates pass on merit
    shutil.copytree(incumbent.path, bundle)
    meta = json.loads((bundle / "meta.json").read_text())
    meta["version"] = "light-candidate"
    (bundle / "meta.json").write_text(json.dumps(meta))
    candidate = registry.register(bundle, tier="light", parent=incumbent.version)
    server = start_serve(env, root / "serve.log")
    yield server, incumbent.version, candidate
    if server.proc.poll() is None:
        server.terminate()


def _label_served(env: dict[str, str], labelled: set[str]) -> int:
    """Publish an outcome for every served decision not labelled yet: the candidate books, the incumbent half."""
    kafka = KafkaConfig(bootstrap_servers=env["PRICESTREAM_KAFKA_BOOTSTRAP"],
                        topic_prefix=env["PRICESTREAM_TOPIC_PREFIX"])
    decisions = read_topic(env, "pricing.decisions")
    n = 0
    with Producer(kafka, topic="feedback.labels") as producer:
        for d in decisions:
            if d["arm"] not in ("incumbent", "candidate") or d["decision_id"] in labelled:
                continue
            labelled.add(d["decision_id"])
            booked = 1 if d["arm"] == "candidate" or n % 2 else 0
            producer.send(OutcomeLabel(hotel_id=d["hotel_id"], room_type=d["room_type"], stay_date=d["stay_date"],
                                       decision_id=d["decision_id"], label=booked, price=d["price"], tier=d["tier"],
                                       model_version=d["model_version"]))
            n += 1
    return n


def test_rollout_by_command_goes_through_every_stage_and_abort_returns_to_the_incumbent(
    deployment: tuple[Server, str, str],
) -> None:
    server, incumbent, candidate = deployment
    env = server.env
    traffic = Traffic(server.url)
    labelled: set[str] = set()
    try:
        traffic.wait_for(20)
        started = run_cli(env, "rollout", "start", candidate)
        assert started.returncode == 0, started.stdout + started.stderr
        stages = []
        for expected in ("canary", "blend", "full"):
            time.sleep(0.5)  # > the follow interval: the server serves the stage it was told
            served = traffic.wait_for(STAGE_REQUESTS)
            stages.append(Counter(a["arm"] for a in served[STAGE_REQUESTS // 2:]))
            _label_served(env, labelled)
            advanced = run_cli(env, "rollout", "advance", candidate)
            assert advanced.returncode == 0, advanced.stdout + advanced.stderr
            assert f"-> {expected}" in advanced.stdout
        time.sleep(0.5)
        stages.append(Counter(a["arm"] for a in traffic.wait_for(60)))
        aborted = run_cli(env, "rollout", "abort", candidate)
        assert aborted.returncode == 0, aborted.stdout + aborted.stderr
        time.sleep(1.0)  # the bound for an abort to take effect on the running server
        after = traffic.wait_for(100)
    finally:
        traffic.stop()
    assert traffic.failures == []  # 0 failed requests through every stage
    shadow, canary, blend, full = stages
    assert set(shadow) == {"incumbent"}
    assert canary["candidate"] > 0 and canary["incumbent"] > canary["candidate"]  # a 40% canary
    assert blend["candidate"] > 0 and blend["incumbent"] > 0
    assert set(full) == {"candidate"}
    assert {(a["arm"], a["propensity"]) for a in after} == {("incumbent", 1.0)}
    light = {a["model_version"] for a in after if a["tier"] == "light"}
    assert light == {incumbent}  # the registry rolled back and the server reloaded the incumbent's model
    decisions = read_topic(env, "pricing.decisions")
    assert {"candidate-shadow"} <= {d["arm"] for d in decisions}

    health = run_cli(env, "router", "health")  # the router's mistakes on this run's labelled decisions
    assert health.returncode == 0, health.stdout + health.stderr
    assert f"{len(labelled)} labelled decisions of" in health.stdout
    assert "false positives" in health.stdout and "false negatives" in health.stdout
