"""The closed-loop demo on a secure stack, one principal per process (``secure_stack``: SASL/SCRAM + ACLs, Redis users).

``run_demo`` (what ``pricestream demo`` runs) on the secure stack, small (two closed nights, three
hotels, a 30-day booking window, a guarded update every 20 examples): its events are produced by the
SDK as ``producer``; every process of ``pricestream run``
runs under its own principal: the feature job (``features``; it writes Redis itself as the ``writer``
user), ``serve`` (``scorer``, Redis user ``scorer``), the offline writer, labels, sampler, trainer and
monitor (each checks its access with the broker at start). The demo's own Feast project is granted
to the Redis users when the deployment starts. The loop must close: decisions priced on features
the job wrote, labels, training examples and a guarded update, the audit log intact and verified
against the ``audit.heads`` topic by the ``auditor`` principal. A service or the feature job started
with another principal is refused, naming what it lacks.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from audit.verify import verify
from infra.config import StackConfig
from pricestream.demo import DemoReport, run_demo
from pricestream.deployment import DEPLOYMENT_FILE, free_ports, settings_env
from pricestream.settings import Settings
from pricestream.supervision import executable
from tests.integration._http_serve import free_port

pytestmark = [pytest.mark.integration, pytest.mark.flink]

PRINCIPALS = {"features": "features", "offline-writer": "offline-writer", "serve": "scorer", "labels": "labels",
              "sampler": "sampler", "trainer": "trainer", "monitor": "monitor"}
"""Each program of the deployment and the Kafka principal it must run as."""


def _settings(stack: StackConfig, state_dir: Path) -> Settings:
    pw = stack.redis_passwords
    return Settings(
        state_dir=state_dir, cache_dir=stack.cache_dir, kafka_port=stack.kafka_port,
        kafka_controller_port=stack.kafka_controller_port, redis_port=stack.redis_port, secure=True,
        kafka_passwords=stack.kafka_passwords, redis_admin_password=pw["admin"],
        redis_scorer_password=pw["scorer"], redis_writer_password=pw["writer"],
        http_port=free_port(), ops_base_port=free_ports("127.0.0.1", 6), grace_s=15.0,
        audit_key=f"secure-loop-{uuid.uuid4().hex}",
    )


@pytest.fixture(scope="module")
def demo(secure_stack: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, DemoReport]:
    """The demo's run once on the secure stack: the settings of its deployment and its report."""
    home = _settings(secure_stack, tmp_path_factory.mktemp("secure-demo"))
    # the trainer updates every TRAIN_EVERY (150) examples by default; one day of three or four hotels gives
    # the sampler's 120-160 (failed twice so), so the loop here updates every 60: two or more rounds a run
    report = run_demo(home, nights=2, hotels=3, window_days=30, seed=11, train_every=20)
    recorded = json.loads((home.data_dir / DEPLOYMENT_FILE).read_text())["settings"]
    assert report.state_dir is not None
    run = home.model_copy(update={"state_dir": report.state_dir, "topic_prefix": recorded["topic_prefix"],
                                  "feast_project": recorded["feast_project"]})
    return run, report


def test_the_demo_loop_closes_with_one_principal_per_process(demo: tuple[Settings, DemoReport]) -> None:
    run, report = demo
    assert report.unclean == {}
    conf = (run.state_dir / "run" / "supervisord.conf").read_text()
    for program, principal in PRINCIPALS.items():
        section = conf.split(f"[program:{program}]", 1)[1].split("[program:", 1)[0]
        assert f"PRICESTREAM_KAFKA_PRINCIPAL=\"{principal}\"" in section or \
            f"PRICESTREAM_KAFKA_PRINCIPAL={principal}" in section, (program, section[:600])
    assert next(iter(run.kafka_passwords.values())).get_secret_value() not in conf  # names only, never a secret

    audit = run.audit()
    audited = verify(audit, key=run.audit_key)
    assert audited.ok and audited.entries == report.decisions > 0
    entries = [json.loads(line) for line in audit.read_text().splitlines()]
    priced = [e for e in entries if e["decision"]["feature_version"] is not None and not e["decision"]["degraded"]]
    # the scorer's Redis user read hashes the job wrote as the writer user, from the producer's events
    assert len(priced) > len(entries) // 2, (len(priced), len(entries))
    assert report.labels > 0 and 0 < report.training_examples <= report.labels
    # the trainer read training.examples as itself (its runtime's progress lines count what it consumed); an
    # update it attempted is registered, rejected with a reason, or skipped for too few unseen labels to hold out
    logs = (run.state_dir / "run" / "logs" / "trainer.err").read_text().splitlines()
    consumed = max(json.loads(line).get("consumed", 0) for line in logs if line.startswith("{"))
    assert 0 < consumed <= report.training_examples, (consumed, report.training_examples)
    assert all(reason for reason in report.rejections)


def test_audit_verify_checks_the_run_against_the_anchors_topic_as_the_auditor(
    demo: tuple[Settings, DemoReport],
) -> None:
    run, _ = demo
    done = subprocess.run([executable(), "audit", "verify"], env=settings_env(run), capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "last intact entry" in done.stdout


def test_a_service_started_with_another_principal_is_refused_naming_what_it_lacks(
    demo: tuple[Settings, DemoReport],
) -> None:
    run, _ = demo
    env = {**settings_env(run), "PRICESTREAM_KAFKA_PRINCIPAL": "scorer", "PRICESTREAM_OPS_PORT": "0"}
    done = subprocess.run([executable(), "services", "run", "trainer"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"kafka principal 'scorer' (service trainer): topic '{run.topic_prefix}training.examples" in done.stderr
    assert "TOPIC_AUTHORIZATION_FAILED" in done.stderr
    assert next(iter(run.kafka_passwords.values())).get_secret_value() not in done.stderr


def test_the_feature_job_started_with_another_principal_is_refused_before_its_jvm(
    demo: tuple[Settings, DemoReport],
) -> None:
    run, _ = demo
    env = {**settings_env(run), "PRICESTREAM_KAFKA_PRINCIPAL": "scorer"}
    done = subprocess.run([executable(), "jobs", "run", "features"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"kafka principal 'scorer' (service features): topic '{run.topic_prefix}behaviour.events" in done.stderr
    assert "TOPIC_AUTHORIZATION_FAILED" in done.stderr
    assert "no checkpoint restored" not in done.stderr  # stopped before the job was set up
