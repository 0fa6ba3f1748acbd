"""Control plane on Kafka: several ``pricestream serve`` replicas follow ``control.v1`` published by commands.

Three replicas, each with its own state directory (no shared registry manifest or rollout file),
read bundles from one shared model store. A promotion, a rollout stage change and an abort,
each published by a ``pricestream`` command, reach every replica; the time from the broker's
acknowledgement (printed by the command) to the first decision showing the change on each
replica is printed, not asserted. A fourth replica started afterwards serves what the others
serve, from the topic alone; a bundle whose bytes differ from its record's sha256 is refused
and the replicas keep serving the model they had.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from delivery import DeliveryConfig, assign_arm
from feedback.registry import ModelRegistry
from infra.config import StackConfig
from pricestream.cli import app
from pricestream.settings import Settings
from tests.integration.serve_helpers import STAY_DATE, Server, free_port, seed_models, stack_env, start_serve

pytestmark = pytest.mark.integration

WAIT_S = 60.0
"""Bound on waiting for a change to show (a loaded 2-core host); a bound on waiting, not an assertion."""
_PUBLISHED = re.compile(r"published\s+as\s+control\s+v(\d+)\s+at\s+(\S+)")


_TAKEN: set[int] = set()


def _port() -> int:
    """A port the OS hands out as free, not handed out before (replicas start side by side).

    Not a fixed range: ports in the ephemeral range are taken by outgoing connections at any time.
    """
    while (port := free_port()) in _TAKEN:
        pass
    _TAKEN.add(port)
    return port


def _copy_version(registry: ModelRegistry, source: Path, root: Path, version: str) -> str:
    """Register the bytes of ``source`` under a new version (same model, new name: prices stay comparable)."""
    bundle = root / version
    shutil.copytree(source, bundle)
    meta = json.loads((bundle / "meta.json").read_text())
    meta["version"] = version
    (bundle / "meta.json").write_text(json.dumps(meta))
    return registry.register(bundle, tier="light")


def _command(env: dict[str, str], *args: str) -> tuple[int, float]:
    """Run ``pricestream ARGS`` in this process (as ``env`` says); (control version, ack time) it printed last.

    In process rather than as a child: the command is the same, the interpreter start-up (seconds on a
    loaded host) is saved.
    """
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("PRICESTREAM_")}
    result = CliRunner().invoke(app, list(args), env={**unset, **env})
    assert result.exit_code == 0, f"{args}: {result.output} {result.exception!r}"
    found = _PUBLISHED.findall(result.output)
    assert found, result.output
    version, at = found[-1]
    return int(version), datetime.fromisoformat(at).timestamp()


def _price(client: httpx.Client, server: Server, guest: str) -> dict:
    body = {"hotel_id": "h1", "room_type": "std", "stay_date": STAY_DATE, "nights": 2, "guest_key": guest}
    r = client.post(f"{server.url}/v1/price", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def _reach(servers: list[Server], since: float, seen: Callable[[dict], bool], *, guest: str) -> list[float]:
    """Seconds from ``since`` to each server's first decision for which ``seen`` holds (requests round robin)."""
    reached: dict[int, float] = {}
    deadline = time.monotonic() + WAIT_S
    with httpx.Client(timeout=30.0) as client:
        while len(reached) < len(servers) and time.monotonic() < deadline:
            for i, server in enumerate(servers):
                if i not in reached and seen(_price(client, server, guest)):
                    reached[i] = time.time() - since
    assert len(reached) == len(servers), f"only replicas {sorted(reached)} showed the change in {WAIT_S}s"
    return [reached[i] for i in range(len(servers))]


def _in_effect(servers: list[Server], kind: str, version: int, since: float) -> list[float]:
    """Seconds from ``since`` to when each replica's follower had record ``version`` of ``kind`` in effect."""
    out = []
    for server in servers:
        plane = _health(server)["control_plane"]
        assert plane["versions"][kind] >= version
        out.append(plane["in_effect_at"][kind] - since)
    return out


def _health(server: Server) -> dict:
    return httpx.get(f"{server.url}/healthz", timeout=10.0).json()


def _wait_health(servers: list[Server], ok: Callable[[dict], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not all(ok(_health(s)) for s in servers):
        assert time.monotonic() < deadline, [_health(s).get("control_plane") for s in servers]
        time.sleep(0.2)


@pytest.fixture(scope="module")
def fleet(stack: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("control")
    operator = stack_env(stack, root / "operator", PRICESTREAM_CONTROL_PLANE="kafka",
                         PRICESTREAM_CANARY_SHARE="0.9", PRICESTREAM_DEADLINE_MS="5000")
    seed_models(operator)
    registry = ModelRegistry(Settings(state_dir=Path(operator["PRICESTREAM_STATE_DIR"])).registry())
    live = registry.current("light")
    assert live is not None
    names = ("light-v2", "light-v3", "light-bad")
    versions = {v: _copy_version(registry, live.path, root / "bundles", v) for v in names}
    _command(operator, "models", "publish")

    def replica(name: str, port: int | None = None) -> Server:
        env = stack_env(stack, root / name, PRICESTREAM_CONTROL_PLANE="kafka", PRICESTREAM_DEADLINE_MS="5000",
                        PRICESTREAM_TOPIC_PREFIX=operator["PRICESTREAM_TOPIC_PREFIX"],
                        PRICESTREAM_FEAST_PROJECT=operator["PRICESTREAM_FEAST_PROJECT"],
                        PRICESTREAM_MODEL_STORE=str(registry.root), PRICESTREAM_HTTP_PORT=str(port or _port()))
        return start_serve(env, root / f"{name}.log")

    servers: list[Server] = []
    names, ports = ("r0", "r1", "r2"), [_port() for _ in range(3)]
    with ThreadPoolExecutor(3) as pool:  # three replicas start side by side, as a deployment's would
        futures = [pool.submit(replica, name, port) for name, port in zip(names, ports, strict=True)]
    failed = [e for f in futures if (e := f.exception()) is not None]
    servers.extend(f.result() for f in futures if f.exception() is None)
    if failed:  # leave no replica running behind a failed start
        for server in servers:
            server.terminate()
        raise failed[0]
    assert len({s.proc.pid for s in servers}) == 3 and all(s.proc.poll() is None for s in servers)
    fleet = {"operator": operator, "servers": servers, "replica": replica, "live": live.version, **versions}
    yield fleet
    for server in fleet["servers"]:
        if server.proc.poll() is None:
            server.terminate()


def test_promotion_stage_change_and_abort_reach_every_replica_and_a_late_one_catches_up(
    fleet: dict[str, Any], tmp_path: Path,
) -> None:
    operator, servers = fleet["operator"], fleet["servers"]
    with httpx.Client(timeout=30.0) as client:
        before = [_price(client, s, "g-any") for s in servers]
    assert {(d["tier"], d["model_version"]) for d in before} == {("light", fleet["live"])}
    # no replica has a registry of its own: they serve what the control topic names
    assert all(ModelRegistry(Path(s.env["PRICESTREAM_STATE_DIR"]) / "data" / "registry").list() == [] for s in servers)

    figures: dict[str, tuple[list[float], list[float]]] = {}
    v, at = _command(operator, "models", "promote", fleet["light-v2"])
    figures["promotion"] = (_reach(servers, at, lambda d: d["model_version"] == fleet["light-v2"], guest="g-any"),
                            _in_effect(servers, "registry", v, at))

    _command(operator, "rollout", "start", fleet["light-v3"])
    _wait_health(servers, lambda h: h["rollout"]["stage"] == "shadow" and h["rollout"]["standby_loaded"])
    evidence = tmp_path / "evidence.json"  # identical paired prices and fast candidate latencies: gates pass
    evidence.write_text(json.dumps({"incumbent_prices": [100.0] * 40, "candidate_prices": [100.0] * 40,
                                    "candidate_latency_ms": [1.0] * 40}))
    # in the 90% canary, a guest the candidate arm serves (the arm is a salted hash of the guest key)
    salt = f"{DeliveryConfig(state_path=tmp_path / 'unused.json').salt}:{fleet['light-v3']}"
    guest = next(g for g in (f"g{i}" for i in range(100)) if assign_arm(g, 0.9, salt)[0] == "candidate")
    v, at = _command(operator, "rollout", "advance", fleet["light-v3"], "--evidence", str(evidence))
    candidate = ("candidate", fleet["light-v3"])
    figures["stage"] = (_reach(servers, at, lambda d: (d["arm"], d["model_version"]) == candidate, guest=guest),
                        _in_effect(servers, "rollout", v, at))

    v, at = _command(operator, "rollout", "abort", fleet["light-v3"])
    figures["abort"] = (_reach(servers, at, lambda d: d["arm"] == "incumbent", guest=guest),
                        _in_effect(servers, "rollout", v, at))
    print("\ncontrol plane, seconds from the broker's ack to [each replica's first decision showing it] "
          "[the replica's follower having applied it]:")
    for name, (decided, applied) in figures.items():
        print(f"  {name}: {[round(x, 3) for x in decided]} {[round(x, 3) for x in applied]}")
    print(f"  worst first decision {max(x for d, _ in figures.values() for x in d):.3f} s")

    late = fleet["replica"]("r3")  # started after every change: it reads the topic alone
    fleet["servers"].append(late)
    with httpx.Client(timeout=30.0) as client:
        answers = [_price(client, s, guest) for s in fleet["servers"]]
    assert {(d["arm"], d["model_version"]) for d in answers} == {("incumbent", fleet["light-v2"])}
    states = [_health(s) for s in fleet["servers"]]
    assert {h["rollout"]["stage"] for h in states} == {"aborted"}
    assert len({json.dumps(h["control_plane"]["versions"], sort_keys=True) for h in states}) == 1


def test_a_bundle_whose_bytes_differ_from_its_sha256_is_refused_and_the_previous_model_serves(
    fleet: dict[str, Any],
) -> None:
    servers = fleet["servers"]
    with httpx.Client(timeout=30.0) as client:
        serving = {_price(client, s, "g-any")["model_version"] for s in servers}
    assert len(serving) == 1
    store = Path(servers[0].env["PRICESTREAM_MODEL_STORE"])
    onnx = next((store / "light" / fleet["light-bad"]).glob("*.onnx"))
    onnx.write_bytes(onnx.read_bytes()[:-16] + b"\0" * 16)  # the store's copy no longer has its recorded bytes
    refused = [_health(s)["control_plane"]["refused"] for s in servers]
    _command(fleet["operator"], "models", "promote", fleet["light-bad"])
    for server, before in zip(servers, refused, strict=True):
        _wait_health([server], lambda h, n=before: h["control_plane"]["refused"] > n)
    with httpx.Client(timeout=30.0) as client:
        after = [_price(client, s, "g-any") for s in servers]
    assert {d["model_version"] for d in after} == serving
    health = [_health(s)["control_plane"] for s in servers]
    assert [h["refused"] for h in health] == [r + 1 for r in refused]
    assert all("onnx_sha256" in h["last_error"] and fleet["light-bad"] in h["last_error"] for h in health)
