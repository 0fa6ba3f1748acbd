"""``pricestream simulate`` against a real ``serve``: shoppers priced over HTTP, their events on Kafka, linked."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from events.config import KafkaConfig
from events.consumer import EventConsumer
from infra.config import StackConfig
from tests.integration._http_serve import PRICESTREAM, serve

pytestmark = [pytest.mark.integration]


def test_simulate_prices_shoppers_through_serve_and_a_sigterm_leaves_every_counted_event_on_kafka(
    stack: StackConfig, tmp_path: Path
) -> None:
    prefix = f"t{uuid.uuid4().hex[:10]}-"
    with serve(stack, tmp_path, PRICESTREAM_TOPIC_PREFIX=prefix) as base:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PRICESTREAM_")}
        env.update({"PRICESTREAM_STATE_DIR": str(tmp_path), "PRICESTREAM_KAFKA_BOOTSTRAP": stack.kafka_bootstrap,
                    "PRICESTREAM_REDIS_URL": stack.redis_url, "PRICESTREAM_TOPIC_PREFIX": prefix})
        proc = subprocess.Popen([PRICESTREAM, "simulate", "--market", "city", "--hotels", "2", "--days", "0.25",
                                 "--rate", "40", "--url", base], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(20)
        proc.send_signal(signal.SIGTERM)  # an operator stops it: what it counted is what Kafka holds
        stdout, stderr = proc.communicate(timeout=120)
        done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = re.search(r"priced ([\d,]+) shoppers .* published ([\d,]+) events, ([\d,]+) bookings", done.stdout)
    assert summary is not None, done.stdout
    priced, events, bookings = (int(g.replace(",", "")) for g in summary.groups())
    assert priced > 20 and events > priced
    kafka = KafkaConfig(bootstrap_servers=stack.kafka_bootstrap, topic_prefix=prefix)
    seen = []
    with EventConsumer(kafka, topic="behaviour.events", group_id=f"sim-check-{uuid.uuid4().hex[:6]}") as consumer:
        seen = list(consumer.records(idle_timeout_s=5.0))
    assert len(seen) == events
    booked = [e for e in seen if e.event_type == "booking"]
    assert len(booked) == bookings
    views = [e for e in seen if e.event_type == "view"]
    assert views and all(getattr(v, "decision_id", None) is not None for v in views)  # each view names its decision


def test_simulate_names_an_unreachable_serve(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRICESTREAM_")}
    env["PRICESTREAM_STATE_DIR"] = str(tmp_path)
    done = subprocess.run([PRICESTREAM, "simulate", "--days", "0.05", "--duration", "5", "--url",
                           "http://127.0.0.1:9"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "cannot be reached" in done.stdout + done.stderr and "pricestream run" in done.stdout + done.stderr
