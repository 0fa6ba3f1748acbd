"""The pipeline on a secure stack, one principal per process (``secure_stack``: SASL/SCRAM + ACLs, Redis users).

Every process of ``pricestream run`` runs as a :class:`~pricestream.deployment.Deployment` process
under its own principal: the feature job (``features``; it writes Redis itself as the ``writer``
user), ``serve`` (``scorer``, Redis user ``scorer``), the offline writer, labels, sampler, trainer and
monitor (each checks its access with the broker at start and must report ``/healthz`` ok). An
inventory event sent by the SDK as ``producer`` must come back as the ``rooms_left`` feature of a
served decision. A service started with another principal is refused, naming it.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from events.admin import create_topics
from events.models import InventoryEvent
from events.producer import Producer
from infra.config import StackConfig
from pricestream.deployment import Deployment, free_ports, settings_env
from pricestream.settings import Settings
from pricestream.supervision import executable
from tests.integration._http_serve import free_port

pytestmark = pytest.mark.integration

SKIP: frozenset[str] = frozenset()
READY_S = 240.0
FEATURE_WAIT_S = 120.0
"""Bounds on waiting (JVM start on a loaded 2-core host), not performance figures."""
HOTEL, STAY = f"hsec{uuid.uuid4().hex[:6]}", datetime.now(tz=UTC).date() + timedelta(days=30)


def _settings(stack: StackConfig, state_dir: Path) -> Settings:
    pw = stack.redis_passwords
    return Settings(
        state_dir=state_dir, cache_dir=stack.cache_dir, kafka_port=stack.kafka_port,
        kafka_controller_port=stack.kafka_controller_port, redis_port=stack.redis_port, secure=True,
        kafka_passwords=stack.kafka_passwords, redis_admin_password=pw["admin"],
        redis_scorer_password=pw["scorer"], redis_writer_password=pw["writer"],
        feast_project=stack.feature_project, topic_prefix=f"t{uuid.uuid4().hex[:8]}-", http_port=free_port(),
        ops_base_port=free_ports("127.0.0.1", 6), bootstrap_rows=200, grace_s=15.0,
        job_idle_timeout_ms=1000,
    )


@pytest.fixture(scope="module")
def deployment(secure_stack: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    from feedback.registry import ModelRegistry
    from pricestream.wiring import BootstrapModels, ensure_models

    s = _settings(secure_stack, tmp_path_factory.mktemp("secure-loop"))
    create_topics(s.kafka())  # as the admin (no principal given): services may not create topics
    ensure_models(ModelRegistry(s.registry()), seed=7, rows=200,
                  models=BootstrapModels(light_trees=5, heavy_members=2, heavy_trees=5))
    run = Deployment(s, skip=SKIP)
    run.start()  # applies the services' ACLs on this prefix, as the admin
    try:
        run.wait_ready(timeout_s=READY_S)
        yield run
    finally:
        run.stop()


def _price(run: Deployment) -> dict:
    body = {"hotel_id": HOTEL, "room_type": "std", "stay_date": STAY.isoformat(), "nights": 1,
            "event_time": datetime.now(tz=UTC).isoformat()}
    response = httpx.post(f"{run.base_url}/v1/price", json=body, timeout=30.0)
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_an_event_from_the_producer_principal_is_priced_with_features_read_as_the_scorer(
    deployment: Deployment,
) -> None:
    s = deployment.settings
    producer_login = s.acting_as("producer").kafka()
    assert producer_login.sasl_username == "producer"
    event = InventoryEvent(hotel_id=HOTEL, room_type="std", stay_date=STAY, rooms_left=7, capacity=40)
    with Producer(producer_login, topic="behaviour.events") as producer:
        producer.send(event)
    assert producer.stats.delivered == 1, producer.stats.errors

    deadline = time.monotonic() + FEATURE_WAIT_S
    decision = _price(deployment)
    while decision["features"].get("rooms_left") != 7.0 and time.monotonic() < deadline:
        time.sleep(1.0)
        decision = _price(deployment)
    logs = s.state_dir / "run" / "logs"
    assert decision["features"].get("rooms_left") == 7.0, (decision, [
        (p.name, p.read_text()[-1500:]) for p in sorted(logs.glob("*.err"))])
    assert decision["features"].get("capacity") == 40.0
    assert decision["degraded"] is False  # the scorer's Redis user read the hash the writer's user wrote


def test_a_service_started_with_another_principal_is_refused_naming_what_it_lacks(deployment: Deployment) -> None:
    env = {**settings_env(deployment.settings), "PRICESTREAM_KAFKA_PRINCIPAL": "scorer", "PRICESTREAM_OPS_PORT": "0"}
    done = subprocess.run([executable(), "services", "run", "trainer"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    prefix = deployment.settings.topic_prefix
    assert f"kafka principal 'scorer' (service trainer): topic '{prefix}training.examples" in done.stderr
    assert "TOPIC_AUTHORIZATION_FAILED" in done.stderr
    assert next(iter(deployment.settings.kafka_passwords.values())).get_secret_value() not in done.stderr
