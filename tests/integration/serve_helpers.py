"""A real ``pricestream serve`` process on the session stack: start, wait, price over HTTP, read decisions."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from infra.config import StackConfig

PRICESTREAM = str(Path(sys.executable).with_name("pricestream"))
READY_WAIT_S = 180.0
"""Start-up bound (model loading on a loaded 2-core host); a bound on waiting, not an assertion."""


def free_port() -> int:
    """A port for a server about to start, outside the ephemeral range (:func:`infra.flink_cluster.free_port`)."""
    from infra.flink_cluster import free_port as listen_port

    return listen_port()


def stack_env(stack: StackConfig, state_dir: Path, **extra: str) -> dict[str, str]:
    """Environment of one private deployment: own state dir, topic prefix and HTTP port on the session stack."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRICESTREAM_")}
    env.update({
        "PRICESTREAM_STATE_DIR": str(state_dir),
        "PRICESTREAM_KAFKA_BOOTSTRAP": stack.kafka_bootstrap,
        "PRICESTREAM_REDIS_URL": stack.redis_url,
        "PRICESTREAM_TOPIC_PREFIX": f"t{uuid.uuid4().hex[:10]}-",
        "PRICESTREAM_HTTP_PORT": str(free_port()),
        "PRICESTREAM_BOOTSTRAP_ROWS": "300",
        "PRICESTREAM_FEAST_PROJECT": f"t{uuid.uuid4().hex[:8]}",
    })
    env.update(extra)
    return env


def seed_models(env: dict[str, str]) -> None:
    """Train and promote a tiny bootstrap pair into the deployment's registry (so serve starts in seconds)."""
    from feedback.registry import ModelRegistry
    from pricestream.settings import Settings
    from pricestream.wiring import BootstrapModels, ensure_models

    s = Settings(state_dir=Path(env["PRICESTREAM_STATE_DIR"]))
    ensure_models(ModelRegistry(s.registry()), seed=7, rows=300,
                  models=BootstrapModels(light_trees=5, heavy_members=2, heavy_trees=5))


@dataclass
class Server:
    env: dict[str, str]
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.env['PRICESTREAM_HTTP_PORT']}"

    def terminate(self, timeout_s: float = 60.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout_s)


FLEET = tuple(f"h{i}" for i in range(5))
"""The hotels of :func:`request_body`: a fleet that traded before this deployment (cold start stage ``own``)."""


def seed_mature(env: dict[str, str], hotels: Sequence[str]) -> None:
    """Record ``hotels`` as mature in the deployment's cold-start history (as serve does for a hotel whose
    behaviour is in the feature store at its first request), so the models price them from the first request."""
    from datetime import UTC, datetime

    import redis

    from delivery.cold_start import RedisHistoryStore, history_prefix

    client = redis.Redis.from_url(env["PRICESTREAM_REDIS_URL"])
    store = RedisHistoryStore(client, prefix=history_prefix(env["PRICESTREAM_FEAST_PROJECT"]))  # type: ignore[arg-type]
    for hotel in hotels:
        store.first_seen(hotel, datetime.now(tz=UTC), mature=lambda: True)
    client.close()


def start_serve(env: dict[str, str], log: Path, *, mature: Sequence[str] = FLEET) -> Server:
    """``pricestream serve`` as its own OS process (``mature``: hotels with history); returns once it answers."""
    seed_mature(env, mature)
    proc = subprocess.Popen([PRICESTREAM, "serve"], env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT)
    server = Server(env, proc, log)
    deadline = time.monotonic() + READY_WAIT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            msg = f"serve exited with {proc.returncode}: {log.read_text()[-2000:]}"
            raise RuntimeError(msg)
        try:
            if httpx.get(f"{server.url}/healthz", timeout=2.0).status_code in (200, 503):
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    proc.kill()
    msg = f"serve not ready after {READY_WAIT_S}s: {log.read_text()[-2000:]}"
    raise RuntimeError(msg)


STAY_DATE = (datetime.now(tz=UTC).date() + timedelta(days=45)).isoformat()
"""The stay night the tests price: 45 days after today (a request's stay may not be in the past)."""


def request_body(i: int, *, hotel: str | None = None) -> dict[str, Any]:
    return {"request_id": str(uuid.uuid4()), "hotel_id": hotel or f"h{i % 5}", "room_type": "std",
            "stay_date": STAY_DATE, "nights": 1 + i % 3, "guest_key": f"g{i}"}


def read_topic(env: dict[str, str], topic: str, *, expect: int | None = None, wait_s: float = 60.0) -> list[dict]:
    """Every record of a (prefixed) topic, read to its high watermarks; waits for ``expect`` records."""
    from confluent_kafka import Consumer, TopicPartition

    name = env["PRICESTREAM_TOPIC_PREFIX"] + topic
    consumer = Consumer({"bootstrap.servers": env["PRICESTREAM_KAFKA_BOOTSTRAP"], "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    deadline = time.monotonic() + wait_s
    try:
        while True:
            records = list(_read_all(consumer, name, TopicPartition))
            if expect is None or len(records) >= expect or time.monotonic() > deadline:
                return records
            time.sleep(0.5)
    finally:
        consumer.close()


def _read_all(consumer: Any, name: str, partition_cls: Any) -> Iterator[dict]:
    meta = consumer.list_topics(name, timeout=10).topics[name]
    parts = [partition_cls(name, p, 0) for p in meta.partitions]
    ends = {p.partition: consumer.get_watermark_offsets(p, timeout=10)[1] for p in parts}
    consumer.assign(parts)
    left = {p: end for p, end in ends.items() if end > 0}
    while left:
        msg = consumer.poll(5.0)
        if msg is None:
            break
        if msg.error():
            continue
        yield json.loads(msg.value())
        if msg.offset() + 1 >= left.get(msg.partition(), 0):
            left.pop(msg.partition(), None)
    consumer.unassign()


def run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PRICESTREAM, *args], env=env, capture_output=True, text=True, timeout=300, check=False)
