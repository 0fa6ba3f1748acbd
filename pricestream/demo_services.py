"""How the demo talks to the deployed services: price over HTTP, move a rollout on, wait for the services.

Everything here acts as the outside world does: ``POST /v1/price`` to ``serve``, the
``pricestream rollout advance`` command, the processes' ``/healthz`` and ``/metrics``, and
what the services wrote (Kafka topics, the model registry, the rollout state).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from events.models import PricingRequest, dumps
from pricestream.demo_setup import DemoRun
from pricestream.deployment import DeploymentError

Progress = Callable[[str], None]
FEATURES_WAIT_S = 240.0  # the first phase includes the Flink job's first records
_FEATURES_SETTLED_S = 8.0  # the feature reader idle (lag 0, nothing new) this long: the job caught up
_FEEDBACK_SETTLED_S = 4.0
_FEEDBACK_WAIT_S = 180.0
_FOLLOW_WAIT_S = 10.0  # serve follows the rollout file within its follow interval (200 ms)
_GATE_WORDS = ("pass ", "wait ", "FAIL ")  # how ``rollout advance`` prints each gate's result


@dataclass
class LoopLog:
    """What the loop did during the run, as the services and commands reported it."""

    rollouts: list[str] = field(default_factory=list)
    """Every rollout step ("v3: canary -> blend"), each followed by its gates' evidence lines."""
    promotions: int = 0
    steps: int = 0
    """Rollout advances attempted (a gate that waits or fails counts too)."""
    weights: list[tuple[datetime, dict[str, float]]] = field(default_factory=list)
    """The candidate's traffic weight after every step, at the simulated time of the step."""

    def weigh(self, run: DemoRun, at: datetime) -> None:
        """Note the rollout's weights now (simulated time ``at``)."""
        from delivery import StateStore

        state = StateStore(run.settings.rollout()).load()
        if state is not None and state.version is not None:
            w = state.candidate_weight
            self.weights.append((at, {"incumbent": 1.0 - w, "candidate": w}))


def price(run: DemoRun, request: PricingRequest) -> dict[str, Any]:
    """``POST /v1/price`` to serve: the decision as its JSON body.

    Raises:
        DeploymentError: serve answered with an error (its status and body are in the message).
    """
    resp = run.http.post("/v1/price", content=dumps(request), headers={"content-type": "application/json"})
    if resp.status_code != 200:
        msg = f"serve answered {resp.status_code} to a valid request: {resp.text[:300]}"
        raise DeploymentError(msg)
    body: dict[str, Any] = resp.json()
    return body


def advance_rollout(run: DemoRun, log: LoopLog, *, seed: int, when: datetime) -> None:
    """Move a live rollout one stage on by command, gated on a seeded simulator replay of both models
    (``pricestream rollout advance V --source replay``); then wait until serve follows it.

    ``when`` (the simulated time) is written with the step; the gates' own lines follow it indented.
    """
    from delivery import StateStore
    from delivery.stages import LIVE_STAGES

    state = StateStore(run.settings.rollout()).load()
    if state is None or state.stage not in LIVE_STAGES or state.version is None:
        return
    done = run.deployment.cli("rollout", "advance", state.version, "--source", "replay", "--seed", str(seed))
    after = StateStore(run.settings.rollout()).load()
    stage = after.stage.value if after is not None else "?"
    log.steps += 1
    outcome = "" if done.returncode == 0 else " (aborted)"
    log.rollouts.append(f"{state.version}: {state.stage.value} -> {stage}{outcome} at {when:%Y-%m-%d %H:%M}")
    gates = [line.strip() for line in (done.stdout + done.stderr).splitlines() if line.strip().startswith(_GATE_WORDS)]
    log.rollouts += [f"    gate {line[:200]}" for line in gates]
    if stage == "full" and state.stage.value != "full":
        log.promotions += 1
    log.weigh(run, when)
    _await_serving_stage(run, stage)


def _await_serving_stage(run: DemoRun, stage: str) -> None:
    """Until serve's ``/healthz`` shows the rollout in ``stage`` (it follows the state file, no restart)."""
    deadline = time.monotonic() + _FOLLOW_WAIT_S
    while time.monotonic() < deadline:
        body = run.deployment.health("serve")
        if (body.get("rollout") or {}).get("stage") == stage:
            return
        time.sleep(0.1)


def await_feedback(run: DemoRun, log: LoopLog, say: Progress, *, when: datetime) -> None:
    """Until the label, sampler and trainer services have caught up (lag 0, nothing new); note a new rollout."""
    names = ("labels", "sampler", "trainer")
    if not run.deployment.caught_up(names, settle_s=_FEEDBACK_SETTLED_S, timeout_s=_FEEDBACK_WAIT_S):
        say(f"the feedback services did not catch up within {_FEEDBACK_WAIT_S:.0f} s; the run goes on")
    from delivery import Stage, StateStore

    state = StateStore(run.settings.rollout()).load()  # the trainer starts a rollout of what passed its guard
    started = f"{state.version}: trainer update passed its guard -> shadow" if state is not None else ""
    if state is not None and state.stage == Stage.SHADOW and not any(r.startswith(started) for r in log.rollouts):
        log.rollouts.append(f"{started} at {when:%Y-%m-%d %H:%M}")
        log.weigh(run, when)


def _feature_reader(run: DemoRun) -> str:
    """The service whose progress on ``features.v1`` tells the phase's features are out of the job.

    The online writer when it runs; when the job writes Redis itself (the default), the offline
    writer: the job sends a row to Redis within its sink's flush interval of sending it to the topic.
    """
    return "offline-writer" if run.settings.job_writes_online else "online-writer"


def consumed_features(run: DemoRun) -> int:
    """Feature rows :func:`_feature_reader` has consumed so far (its ``/healthz``)."""
    return int(run.deployment.health(_feature_reader(run)).get("consumed") or 0)


def await_features(run: DemoRun, before: int, say: Progress, *, wait_s: float = FEATURES_WAIT_S) -> None:
    """Wait (bounded) until the phase's features are in the online store: the next phase is priced on them.

    Caught up means the feature reader consumed rows since ``before`` and then nothing new, at lag 0,
    for ``_FEATURES_SETTLED_S``.
    """
    say("waiting for the feature job to bring the phase's features to the online store")
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and consumed_features(run) <= before:
        time.sleep(1.0)
    left = max(deadline - time.monotonic(), _FEATURES_SETTLED_S * 2)
    if not run.deployment.caught_up((_feature_reader(run),), settle_s=_FEATURES_SETTLED_S, timeout_s=left):
        say(f"no features arrived within {wait_s:.0f} s; the next phase is priced without new ones")


def serving(run: DemoRun) -> str:
    """The light model version the registry serves now."""
    current = run.registry.current("light")
    return current.version if current else "-"


def monitor_drift_alerts(run: DemoRun) -> dict[str, float]:
    """Feature -> drift alerts the monitor service has counted (its ``/metrics``); empty if it reported none."""
    import urllib.request

    url = next((p.ops_url for p in run.deployment.programs if p.name == "monitor"), None)
    if url is None:
        return {}
    base = url.rsplit("/", 1)[0] if url.endswith("healthz") else url
    try:
        with urllib.request.urlopen(f"{base.rstrip('/')}/metrics", timeout=5.0) as resp:
            text = resp.read().decode("utf-8", "replace")
    except OSError:
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        if "drift_alerts_total{" in line and not line.startswith("#"):
            feature = line.split('feature="', 1)[1].split('"', 1)[0]
            out[feature] = float(line.rsplit(" ", 1)[1])
    return {k: v for k, v in out.items() if v > 0}


def tally(run: DemoRun) -> dict[str, Any]:
    """Labels and training examples as Kafka holds them (committed, by id), model versions (oldest first),
    the trainer's updates among them (those with a parent), its rejections and its skipped attempts (reasons)."""
    from feedback.services.trainer_service import REJECTIONS, SKIPPED
    from pricestream.commands.monitoring import read_records

    kafka = run.settings.kafka()
    labels = {(r.get("decision_id"), r.get("revision")) for r in read_records(kafka, "feedback.labels")
              if isinstance(r, dict) and r.get("event_type") == "label"}
    examples = {r.get("event_id") for r in read_records(kafka, "training.examples")
                if isinstance(r, dict) and r.get("event_type") == "training_example"}
    entries = sorted(run.registry.list(), key=lambda e: e.created_at)
    return {"labels": len(labels), "training_examples": len(examples),
            "model_versions": [e.version for e in entries], "rejections": _reasons(run.registry.root / REJECTIONS),
            "skipped": _reasons(run.registry.root / SKIPPED),
            "updates": [e.version for e in entries if e.parent is not None]}



def _reasons(log: Path) -> list[str]:
    """The ``reason`` of each line of a trainer's JSON-lines log (rejections, skipped attempts); none if absent."""
    if not log.exists():
        return []
    reasons = []
    for line in log.read_text(encoding="utf-8").splitlines():
        try:  # a trainer killed mid-append leaves a torn last line: it names no reason
            record = json.loads(line)
        except ValueError:
            continue
        reasons.append(str(record.get("reason") or "?") if isinstance(record, dict) else "?")
    return reasons