"""The stream services as an operator runs them: separate OS processes started by their commands.

One shared run (the stack, one topic prefix, one producer): ``labels``, ``sampler``, ``trainer`` and
``online-writer`` are started by ``pricestream services run NAME``; while decisions, bookings and
feature rows flow, each is SIGTERMed in turn (it must exit 0) and restarted by its command, and
the online writer is SIGKILLed once and restarted. A poison record sits on each service's input.

Then: every decision has exactly one label (counted by decision id and revision), every label
exactly one training example (the ``random`` sampler with ``c = 1`` selects all), the trainer's
checkpointed buffer holds every example once, Redis holds the newest version of every feature
key, each poison record is in its ``<topic>.dlq`` with the five headers, and ``/healthz`` and
``/metrics`` answered for every service.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
import xmlrpc.client
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
import redis

from events.admin import create_topics
from events.config import KafkaConfig
from events.consumer import DLQ_HEADERS
from events.models import BookingEvent, OutcomeLabel, PricingDecision, SearchEvent, TrainingExample, parse_event
from events.producer import Producer
from features.config import FeaturesConfig
from features.layout import version_field
from features.offline_writer import read_features_v1
from features.online_writer import row_key
from feedback.services.kafka_io import drain
from infra.config import StackConfig
from tests.integration._features_helpers import drop_project_keys, make_row

pytestmark = pytest.mark.integration

T0 = datetime(2026, 3, 1, tzinfo=UTC)
STAY = date(2026, 6, 20)
HOTELS = 4
MIN_WAVES = 6
PER_WAVE = 40  # decisions per wave; every other one is booked
ROW_KEYS = 24  # feature keys (hotels) of the online writer; each gets one version per wave
VIEW = "hotel_stats"
GRACE_S = 20.0
DONE_WITHIN_S = 240.0  # a bound for "caught up", not a performance figure: failing it means something stalled
EXE = str(Path(sys.executable).with_name("pricestream"))
POISON = {
    "behaviour.events": b'{"event_type": "booking", "hotel_id": "h1", "room_type": "std", '
                        b'"stay_date": "2026-06-20", "price_paid": 10, "event_time": 1e20}',
    "pricing.decisions": b"not json at all",
    "feedback.labels": b'{"event_type": "label", "event_time": 1e20}',
    "training.examples": b"\xff\xfe\x00",
    "features.v1": b'{"view": "stay_99d"}',
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_LAUNCHED: list[subprocess.Popen[bytes]] = []
"""Every process a test started: whatever a failing test leaves running is ended at teardown."""


@pytest.fixture(autouse=True)
def _end_leftovers() -> Iterator[None]:
    yield
    while _LAUNCHED:
        proc = _LAUNCHED.pop()
        if proc.poll() is None:
            proc.terminate()  # 'run' passes it on to supervisord, which stops its programs
            try:
                proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)


class Service:
    """One ``pricestream services run NAME`` process (restartable), its logs and its ops port."""

    def __init__(self, name: str, env: dict[str, str], logs: Path) -> None:
        self.name = name
        self.port = _free_port()
        self.env = {**env, "PRICESTREAM_OPS_PORT": str(self.port)}
        self.logs = logs
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        out = (self.logs / f"{self.name}.{self.starts}.out").open("wb")
        errs = (self.logs / f"{self.name}.{self.starts}.err").open("wb")
        self.proc = subprocess.Popen([EXE, "services", "run", self.name], env=self.env, stdout=out, stderr=errs)
        _LAUNCHED.append(self.proc)

    def healthz(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2) as resp:
            return json.loads(resp.read())

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=2) as resp:
            return resp.read().decode()

    def wait_ready(self, timeout_s: float = 120.0) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc is not None and self.proc.poll() is None, self.tail()
            try:
                return _health(self.port)[1]  # any answer, ok or degraded
            except OSError:
                time.sleep(0.3)
        msg = f"{self.name} never answered /healthz\n{self.tail()}"
        raise AssertionError(msg)

    def stop(self, sig: signal.Signals) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=GRACE_S + 30)

    def tail(self) -> str:
        path = self.logs / f"{self.name}.{self.starts}.err"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""


def _decision(i: int) -> PricingDecision:
    return PricingDecision(
        hotel_id=f"h{i % HOTELS}", room_type="std", stay_date=STAY, event_time=T0 + timedelta(minutes=i),
        request_id=uuid.uuid4(), price=100.0 + i % 7, tier="light", complexity=0.2, latency_ms=1.0,
        expected_booking_prob=0.4, features={"occupancy": 0.5},
    )


def _produce(kafka: KafkaConfig, faults_done: threading.Event, produced: threading.Event, booked: set[str],
             counts: Counter[str]) -> None:
    """Waves of decisions, bookings and feature rows until the faults are over (at least ``MIN_WAVES``), then a
    far-future event that closes every label window."""
    with Producer(kafka, topic="pricing.decisions") as decisions, \
            Producer(kafka, topic="behaviour.events") as behaviour, Producer(kafka, topic="features.v1") as rows:
        while counts["waves"] < MIN_WAVES or not faults_done.is_set():
            wave = counts["waves"]
            for j in range(PER_WAVE):
                d = _decision(wave * PER_WAVE + j)
                decisions.send(d)
                if j % 2 == 0:
                    behaviour.send(BookingEvent(hotel_id=d.hotel_id, room_type="std", stay_date=STAY,
                                                event_time=d.event_time + timedelta(minutes=10), price_paid=d.price,
                                                decision_id=d.decision_id))
                    booked.add(str(d.decision_id))
            for h in range(ROW_KEYS):
                row = make_row(VIEW, f"h{h}", version=wave + 1)
                rows.send_raw(row.hotel_id.encode(), row.to_json())
            for p in (decisions, behaviour, rows):
                p.flush()
            counts["decisions"] += PER_WAVE
            counts["waves"] += 1
            time.sleep(1.0)  # keep the stream flowing while the services are stopped and restarted
        behaviour.send(SearchEvent(hotel_id="h0", room_type="std", stay_date=STAY, event_time=T0 + timedelta(days=30)))
    produced.set()


@pytest.fixture
def run_env(stack: StackConfig, tmp_path: Path) -> tuple[KafkaConfig, dict[str, str], FeaturesConfig]:
    prefix = f"ops{uuid.uuid4().hex[:8]}-"
    kafka = KafkaConfig(bootstrap_servers=stack.kafka_bootstrap, topic_prefix=prefix)
    create_topics(kafka)
    project = f"ops{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ, "PRICESTREAM_TOPIC_PREFIX": prefix, "PRICESTREAM_STATE_DIR": str(tmp_path / "state"),
        "PRICESTREAM_FEAST_PROJECT": project, "PRICESTREAM_GRACE_S": str(GRACE_S), "PRICESTREAM_LOG_EVERY_S": "2",
        "PRICESTREAM_SERVICE_BATCH": "50", "PRICESTREAM_LABEL_HORIZON_HOURS": "1",
        "PRICESTREAM_SAMPLER_STRATEGY": "random", "PRICESTREAM_TRAINER_TRAIN_EVERY": "1000000",
        "PRICESTREAM_KAFKA_PORT": str(stack.kafka_port), "PRICESTREAM_REDIS_PORT": str(stack.redis_port),
    }
    features = FeaturesConfig(project=project, state_dir=tmp_path, redis_url=stack.redis_url, kafka=kafka,
                              offline_root=tmp_path / "state" / "data" / "offline")  # where the services write
    yield kafka, env, features
    drop_project_keys(features)


def test_sigterm_each_service_mid_stream_loses_and_duplicates_nothing(
    run_env: tuple[KafkaConfig, dict[str, str], FeaturesConfig], tmp_path: Path
) -> None:
    kafka, env, features = run_env
    logs = Path(os.environ.get("PRICESTREAM_TEST_LOGS", tmp_path / "logs"))  # keep them somewhere to read
    logs.mkdir(parents=True, exist_ok=True)
    names = ("labels", "sampler", "trainer", "online-writer", "offline-writer", "monitor")
    services = {name: Service(name, env, logs) for name in names}
    for svc in services.values():
        svc.start()
    health = {name: svc.wait_ready() for name, svc in services.items()}
    assert all(h["status"] == "ok" for h in health.values()), health
    assert health["online-writer"]["dependencies"] == {"kafka": "ok", "redis": "ok"}

    for topic, value in POISON.items():
        with Producer(kafka, topic=topic) as poison:
            poison.send_raw(b"poison", value)
    # each service dead-letters its poison and goes on answering (labels reads two inputs)
    expected_dead = {"labels": 2, "sampler": 1, "trainer": 1, "online-writer": 1, "offline-writer": 1, "monitor": 1}
    deadline = time.monotonic() + 60
    while {n: services[n].healthz()["dead_lettered"] for n in services} != expected_dead:
        assert time.monotonic() < deadline, {n: services[n].healthz() for n in services}
        time.sleep(0.5)
    first_metrics = services["labels"].metrics()
    booked: set[str] = set()
    counts: Counter[str] = Counter()
    produced, faults_done = threading.Event(), threading.Event()
    producer = threading.Thread(target=_produce, args=(kafka, faults_done, produced, booked, counts), daemon=True)
    producer.start()

    exits: dict[str, list[int]] = {name: [] for name in services}
    for name in ("labels", "sampler", "trainer", "online-writer"):
        time.sleep(2.0)  # let it take a few batches of the stream first
        exits[name].append(services[name].stop(signal.SIGTERM))
        services[name].start()
        services[name].wait_ready()
    time.sleep(2.0)
    killed = services["online-writer"].stop(signal.SIGKILL)
    services["online-writer"].start()
    services["online-writer"].wait_ready()
    faults_done.set()
    producer.join(timeout=120)
    assert produced.is_set()

    expected = counts["decisions"]
    deadline = time.monotonic() + DONE_WITHIN_S
    while time.monotonic() < deadline:
        health = [svc.healthz() for svc in services.values()]
        lags = [h["lag_total"] for h in health]
        n_examples = len(drain(kafka, "training.examples", idle_s=0.5)) - 1  # the poison is one
        if n_examples >= expected and not any(lags) and all(h["assigned"] for h in health):
            break
        print(f"waiting: {n_examples} of {expected} examples, lags {lags}")
        time.sleep(2.0)
    metrics = {name: svc.metrics() for name, svc in services.items()}
    for name, svc in services.items():
        exits[name].append(svc.stop(signal.SIGTERM))

    # clean stops: every SIGTERM ended in exit 0; the SIGKILL is the one -9
    faulted = ("labels", "sampler", "trainer", "online-writer")
    assert exits == {name: [0, 0] if name in faulted else [0] for name in services}, {
        n: s.tail() for n, s in services.items()}
    assert killed == -signal.SIGKILL

    # labels: one per decision, no duplicate (decision, revision), the right outcome
    labels = [parse_event(m.value() or b"") for m in drain(kafka, "feedback.labels") if m.key() != b"poison"]
    labels = [lab for lab in labels if isinstance(lab, OutcomeLabel)]
    by_id = Counter((str(lab.decision_id), lab.revision) for lab in labels)
    assert max(by_id.values()) == 1
    assert len({d for d, _ in by_id}) == expected == counts["waves"] * PER_WAVE
    assert {str(lab.decision_id) for lab in labels if lab.label == 1} == booked

    # training examples: the random sampler (c = 1) selects every label exactly once
    examples = [parse_event(m.value() or b"") for m in drain(kafka, "training.examples") if m.key() != b"poison"]
    examples = [x for x in examples if isinstance(x, TrainingExample)]
    assert Counter(str(x.event_id) for x in examples).most_common(1)[0][1] == 1
    assert Counter((str(x.decision_id), x.event_time) for x in examples) == Counter(
        (str(lab.decision_id), lab.event_time) for lab in labels)

    # the trainer's checkpointed state holds each example once (its SIGTERM restart lost and replayed nothing)
    with open(Path(env["PRICESTREAM_STATE_DIR"]) / "data/services/trainer/0/trainer.ckpt", "rb") as fh:
        state = pickle.load(fh)  # noqa: S301 - the trainer's own checkpoint
    buffered = Counter((row["decision_id"], row["event_time"]) for row in state["buffer"])
    assert buffered == Counter((str(x.decision_id), x.event_time) for x in examples)

    # online writer, at-least-once through a SIGTERM and a SIGKILL: the newest version of every key is in Redis
    host, port, db = features.redis_host_port_db
    client = redis.Redis(host=host, port=port, db=db)
    newest = [make_row(VIEW, f"h{h}", version=counts["waves"]) for h in range(ROW_KEYS)]
    versions = [client.hget(row_key(r, features.project), version_field(VIEW)) for r in newest]
    client.close()
    assert versions == [str(counts["waves"]).encode()] * ROW_KEYS

    # each poison record is in its DLQ, once, with the five headers naming where it came from
    readers = {"pricing.decisions": 2, "features.v1": 2}  # labels + monitor, online + offline writer
    for topic, value in POISON.items():
        dlq = drain(kafka, f"{topic}.dlq", idle_s=1.0)
        assert [m.value() for m in dlq] == [value] * readers.get(topic, 1), topic
        for msg in dlq:
            headers = {k: (v or b"").decode() for k, v in msg.headers() or []}
            assert set(DLQ_HEADERS) <= set(headers)
            assert headers["source_topic"] == kafka.topic(topic) and headers["source_offset"].isdigit()
            assert headers["error_class"] and headers["error_message"]

    # the offline writer (not stopped mid-stream) holds every row once; the monitor saw every decision
    assert len(read_features_v1(features.offline)) == counts["waves"] * ROW_KEYS
    summary = json.loads((logs / "monitor.1.out").read_text().strip().splitlines()[-1])
    assert summary["monitored"] == expected

    # /metrics counted the dead letters (first labels process) and the lag (last ones)
    assert 'pricestream_stream_dead_letters_total{service="labels",topic="behaviour.events"} 1.0' in first_metrics
    assert 'pricestream_stream_dead_letters_total{service="labels",topic="pricing.decisions"} 1.0' in first_metrics
    for name in services:
        assert f'pricestream_stream_healthy{{service="{name}"}} 1.0' in metrics[name]
    assert 'pricestream_stream_consumer_lag{service="sampler",topic="feedback.labels"} 0.0' in metrics["sampler"]


def _free_block(n: int) -> int:
    """A base port with ``n`` free ports after it."""
    for _ in range(50):
        base = _free_port()
        if base + n < 65535 and all(_port_free(base + i) for i in range(n)):
            return base
    raise AssertionError("no block of free ports")  # noqa: EM101 - a test helper


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _supervisor_rpc(sock: Path) -> xmlrpc.client.ServerProxy:
    from supervisor.xmlrpc import SupervisorTransport

    return xmlrpc.client.ServerProxy("http://127.0.0.1", transport=SupervisorTransport(None, None, f"unix://{sock}"))


def test_pricestream_run_starts_every_service_restarts_a_crashed_one_and_stops_all_cleanly(
    run_env: tuple[KafkaConfig, dict[str, str], FeaturesConfig], tmp_path: Path
) -> None:
    from pricestream.supervision import probe

    _, env, _ = run_env
    base, http = _free_block(6), _free_port()
    # the job is left out, so the Python online writer runs (it is not started when the job writes Redis)
    env = {**env, "PRICESTREAM_OPS_BASE_PORT": str(base), "PRICESTREAM_HTTP_PORT": str(http),
           "PRICESTREAM_BOOTSTRAP_ROWS": "200", "PRICESTREAM_GRACE_S": "15", "PRICESTREAM_JOB_WRITES_ONLINE": "false"}
    proc = subprocess.Popen([EXE, "run", "--without", "features", "--refresh", "1"], env=env,
                            stdout=subprocess.PIPE, stderr=(tmp_path / "run.err").open("wb"))
    _LAUNCHED.append(proc)  # a killed 'run' leaves supervisord behind: it is in its own session
    urls = [f"http://127.0.0.1:{base + i}/healthz" for i in range(6)] + [f"http://127.0.0.1:{http}/healthz"]
    deadline = time.monotonic() + 240
    verdicts: list[str] = []
    while time.monotonic() < deadline and proc.poll() is None:
        verdicts = [probe(url)[0] for url in urls]
        if verdicts == ["ok"] * len(urls):
            break
        time.sleep(1.0)
    assert verdicts == ["ok"] * len(urls), (verdicts, (tmp_path / "run.err").read_text()[-2000:])

    # a crashed service is started again by supervisord (its own command), and answers again
    rpc = _supervisor_rpc(Path(env["PRICESTREAM_STATE_DIR"]) / "run" / "supervisor.sock")
    before = rpc.supervisor.getProcessInfo("labels")["pid"]
    os.kill(before, signal.SIGKILL)
    deadline = time.monotonic() + 120
    info = rpc.supervisor.getProcessInfo("labels")
    while not (info["statename"] == "RUNNING" and info["pid"] != before and probe(urls[2])[0] == "ok"):
        assert time.monotonic() < deadline, info
        time.sleep(0.5)
        info = rpc.supervisor.getProcessInfo("labels")

    proc.send_signal(signal.SIGTERM)
    stdout, _ = proc.communicate(timeout=180)
    text = stdout.decode()
    assert proc.returncode == 0, (text, (tmp_path / "run.err").read_text()[-2000:])
    stopped = dict(item.rsplit(" ", 1) for item in text.split("processes: ", 1)[1].strip().split(", "))
    names = {"online-writer", "offline-writer", "serve", "labels", "sampler", "trainer", "monitor"}
    assert stopped == dict.fromkeys(names, "0")
    assert [probe(url)[0] for url in urls] == ["not answering"] * len(urls)  # every process is gone


def _health(port: int) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_online_writer_says_degraded_naming_redis_and_resumes_when_it_returns(
    run_env: tuple[KafkaConfig, dict[str, str], FeaturesConfig], tmp_path: Path
) -> None:
    kafka, env, features = run_env
    redis_port = _free_port()
    svc = Service("online-writer", {**env, "PRICESTREAM_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0"}, tmp_path)
    svc.start()
    svc.wait_ready()
    rows = [make_row(VIEW, f"h{h}", version=7) for h in range(5)]
    with Producer(kafka, topic="features.v1") as producer:
        for row in rows:
            producer.send_raw(row.hotel_id.encode(), row.to_json())
    code, body = _health(svc.port)
    assert (code, body["status"], body["down"]) == (503, "degraded", ["redis"])
    assert body["dependencies"]["kafka"] == "ok" and body["dependencies"]["redis"].startswith("down")

    server = subprocess.Popen([shutil.which("redis-server") or "redis-server", "--port", str(redis_port),
                               "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
    _LAUNCHED.append(server)
    try:
        deadline = time.monotonic() + 60
        while _health(svc.port)[1].get("consumed", 0) < len(rows):  # the kept batch is retried, then committed
            assert time.monotonic() < deadline, _health(svc.port)
            time.sleep(0.5)
        code, body = _health(svc.port)
        assert (code, body["status"], body["down"]) == (200, "ok", [])
        client = redis.Redis(port=redis_port)
        versions = [client.hget(row_key(r, features.project), version_field(VIEW)) for r in rows]
        client.close()
        assert versions == [b"7"] * len(rows)
        assert svc.stop(signal.SIGTERM) == 0
    finally:
        server.terminate()
        server.wait(timeout=30)
