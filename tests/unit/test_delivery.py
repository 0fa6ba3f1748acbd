from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from delivery import (
    ArmSet,
    DeliveryConfig,
    Evidence,
    RolloutController,
    ShadowRecord,
    ShadowRunner,
    Stage,
    StateStore,
    assign_arm,
)
from routing.errors import RolloutStateError, RoutingInputError, StateFileError


class _Clock:
    def __init__(self) -> None:
        self.t = datetime(2026, 5, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.t += timedelta(seconds=1)
        return self.t


def _good_evidence(n: int = 3_000) -> Evidence:
    rng = np.random.default_rng(5)
    prices = rng.uniform(80, 200, n)
    booked = (rng.uniform(size=n) < 0.3).astype(float)
    # the candidate books clearly more, so the sequential net_value gate promotes it
    candidate_booked = (rng.uniform(size=n) < 0.45).astype(float)
    revenue = booked * prices
    return Evidence(
        incumbent_prices=prices,
        candidate_prices=prices * 1.002,
        incumbent_booked=booked,
        candidate_booked=candidate_booked,
        incumbent_revenue=revenue,
        candidate_revenue=candidate_booked * prices,
        candidate_latency_ms=rng.uniform(1, 10, n),
    )


def _controller(tmp_path: Path, arms: ArmSet[str] | None = None) -> RolloutController:
    cfg = DeliveryConfig(state_path=tmp_path / "state" / "rollout.json", canary_share=0.05)
    return RolloutController(cfg, arms=arms, clock=_Clock())


# --- canary -------------------------------------------------------------------------------


def test_canary_share_over_100k_keys_and_stickiness() -> None:
    arms = [assign_arm(f"guest-{i}", 0.05, salt="v2") for i in range(100_000)]
    share = sum(a == "candidate" for a, _ in arms) / len(arms)
    assert abs(share - 0.05) <= 0.003
    assert {p for a, p in arms if a == "candidate"} == {0.05}
    assert {p for a, p in arms if a == "incumbent"} == {0.95}
    again = [assign_arm(f"guest-{i}", 0.05, salt="v2") for i in range(0, 100_000, 97)]
    assert again == arms[::97]


def test_canary_salt_reshuffles_and_share_growth_keeps_candidates() -> None:
    keys = [f"k{i}" for i in range(5_000)]
    small = {k for k in keys if assign_arm(k, 0.05, salt="a")[0] == "candidate"}
    large = {k for k in keys if assign_arm(k, 0.20, salt="a")[0] == "candidate"}
    other_salt = {k for k in keys if assign_arm(k, 0.05, salt="b")[0] == "candidate"}
    assert small <= large
    assert len(small & other_salt) < len(small) / 2
    with pytest.raises(RoutingInputError, match="share"):
        assign_arm("k", 1.5)


# --- arms ---------------------------------------------------------------------------------


def test_rollback_swaps_back_while_threads_call_current() -> None:
    arms: ArmSet[str] = ArmSet("v1", candidate="v2")
    stop = threading.Event()
    seen: list[set[str]] = [set() for _ in range(4)]
    errors: list[BaseException] = []

    def reader(i: int) -> None:
        try:
            while not stop.is_set():
                seen[i].add(arms.current().upper())  # an in-flight call on the object it got
        except BaseException as exc:  # noqa: BLE001 - the test records any failure
            errors.append(exc)

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for _ in range(200):
        arms.switch()
        assert arms.current() == "v2" and arms.active_arm == "candidate"
        time.sleep(0)
        arms.rollback()
        assert arms.current() == "v1" and arms.active_arm == "incumbent"
        time.sleep(0)
    stop.set()
    for t in threads:
        t.join()
    assert errors == []
    assert set().union(*seen) <= {"V1", "V2"}
    assert arms.current() == "v1" and arms.candidate == "v2"


def test_switch_without_candidate_is_refused() -> None:
    with pytest.raises(RolloutStateError, match="load_candidate"):
        ArmSet("v1").switch()


# --- shadow -------------------------------------------------------------------------------


def test_shadow_returns_incumbent_and_logs_slow_candidate_later() -> None:
    logged: list[ShadowRecord[int, str]] = []
    done = threading.Event()
    release = threading.Event()

    def slow_candidate(x: int) -> str:
        time.sleep(0.2)
        release.wait(5)
        return f"candidate-{x}"

    def on_result(rec: ShadowRecord[int, str]) -> None:
        logged.append(rec)
        done.set()

    with ShadowRunner(slow_candidate, on_result=on_result, latency_budget_ms=50.0) as shadow:
        answer = shadow.run(7, lambda x: f"incumbent-{x}")
        assert answer == "incumbent-7"
        assert logged == []  # the response came back before the candidate answered
        release.set()
        assert done.wait(5)
    rec = logged[0]
    assert (rec.request, rec.incumbent, rec.candidate, rec.error) == (7, "incumbent-7", "candidate-7", None)
    assert rec.late is True and rec.latency_ms >= 200.0
    assert shadow.submitted == 1 and shadow.dropped == 0


def test_shadow_drops_when_full_and_logs_candidate_errors() -> None:
    gate = threading.Event()
    logged: list[ShadowRecord[int, int]] = []

    def candidate(x: int) -> int:
        gate.wait(5)
        if x == 2:
            msg = "boom"
            raise ZeroDivisionError(msg)
        return x

    with ShadowRunner(candidate, on_result=logged.append, max_workers=1, max_pending=2) as shadow:
        results = [shadow.run(i, lambda x: -x) for i in range(5)]
        assert results == [0, -1, -2, -3, -4]
        assert shadow.dropped == 3
        gate.set()
    assert sorted(r.request for r in logged) == [0, 1]
    with ShadowRunner(candidate, on_result=logged.append) as shadow:
        shadow.run(2, lambda x: x)
    assert logged[-1].error == "ZeroDivisionError: boom" and shadow.failed == 1
    with pytest.raises(RolloutStateError, match="closed"):
        shadow.submit(1, 1)


# --- state and controller -----------------------------------------------------------------


def test_full_rollout_persists_history_and_propensities(tmp_path: Path) -> None:
    arms: ArmSet[str] = ArmSet("v1", candidate="v2")
    ctl = _controller(tmp_path, arms)
    ctl.start("v2", incumbent_version="v1", reason="nightly retrain")
    assert ctl.choose_arm("g") == ("incumbent", 1.0)
    assert ctl.advance(_good_evidence()).stage == Stage.CANARY
    arm, p = ctl.choose_arm("g")
    assert p == (0.05 if arm == "candidate" else 0.95)
    assert ctl.advance(_good_evidence()).stage == Stage.BLEND
    assert ctl.status().candidate_weight == 0.2
    for i in range(300):
        ctl.record_decision(f"d{i}", "candidate" if i % 2 else "incumbent")
    for i in range(300):
        ctl.reward(f"d{i}", 0.6 if i % 2 else 0.2)
    weight = ctl.update_weights(reason="hourly")
    assert weight == 0.95
    arm, p = ctl.choose_arm("g")
    assert p == (0.95 if arm == "candidate" else pytest.approx(0.05))
    result = ctl.advance(_good_evidence())
    assert result.advanced and result.stage == Stage.FULL
    assert ctl.choose_arm("g") == ("candidate", 1.0) and arms.current() == "v2"
    saved = json.loads((tmp_path / "state" / "rollout.json").read_text())
    kinds = [(h["kind"], h["to_stage"]) for h in saved["history"]]
    assert kinds == [
        ("stage", "shadow"),
        ("stage", "canary"),
        ("stage", "blend"),
        ("weight", "blend"),
        ("stage", "full"),
    ]
    assert "nightly retrain" in saved["history"][0]["reason"]
    assert "hourly" in saved["history"][3]["reason"] and "P(candidate better)" in saved["history"][3]["reason"]
    # a restarted controller resumes from the file
    restarted_arms: ArmSet[str] = ArmSet("v1", candidate="v2")
    assert _controller(tmp_path, restarted_arms).status().stage == Stage.FULL
    assert restarted_arms.current() == "v2"


def test_failed_gate_aborts_and_rolls_back(tmp_path: Path) -> None:
    arms: ArmSet[str] = ArmSet("v1", candidate="v2")
    ctl = _controller(tmp_path, arms)
    ctl.start("v2")
    bad = _good_evidence()
    prices = np.asarray(bad.incumbent_prices)
    flipped = Evidence(incumbent_prices=prices, candidate_prices=prices * 1.5, candidate_latency_ms=[1.0] * 100)
    result = ctl.advance(flipped)
    assert not result.advanced and result.stage == Stage.ABORTED
    assert "flip_rate" in result.message and ctl.status().stage == Stage.ABORTED
    assert ctl.choose_arm("g") == ("incumbent", 1.0) and arms.current() == "v1"
    assert "flip_rate" in ctl.status().history[-1].reason
    with pytest.raises(RolloutStateError, match="no rollout to abort"):
        ctl.abort("again")
    assert ctl.start("v3").stage == Stage.SHADOW  # a new rollout may start after an abort


def test_operator_abort_after_full_rolls_back(tmp_path: Path) -> None:
    arms: ArmSet[str] = ArmSet("v1", candidate="v2")
    ctl = _controller(tmp_path, arms)
    ctl.start("v2")
    for _ in range(3):
        ctl.advance(_good_evidence())
    assert arms.current() == "v2"
    ctl.abort("revenue alarm")
    assert arms.current() == "v1" and ctl.status().history[-1].reason == "revenue alarm"


def test_lifecycle_errors(tmp_path: Path) -> None:
    ctl = _controller(tmp_path)
    with pytest.raises(RolloutStateError, match="advance works from"):
        ctl.advance(_good_evidence())
    ctl.start("v2")
    with pytest.raises(RolloutStateError, match="abort it first"):
        ctl.start("v3")
    with pytest.raises(RolloutStateError, match="blend"):
        ctl.update_weights()


def test_corrupt_state_file_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "rollout.json"
    path.write_text("{not json")
    with pytest.raises(StateFileError, match="rollout.json"):
        StateStore(path).load()
    assert list(tmp_path.iterdir()) == [path]  # no temp files left behind by saves


def test_the_shadow_gates_limits_are_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """PRICESTREAM_ROLLOUT_* reach the gates: a candidate moving a fifth of prices by 3% fails the default flip gate
    (1%, at most 10% flipped) and passes one whose flip is a move beyond the demo's 5% band, a quarter allowed."""
    from delivery.gates import flip_rate_gate
    from pricestream.settings import Settings

    incumbent = np.full(200, 100.0)
    candidate = incumbent.copy()
    candidate[:40] *= 1.03
    monkeypatch.setenv("PRICESTREAM_STATE_DIR", str(tmp_path))
    default = Settings().delivery().limits
    assert not flip_rate_gate(incumbent, candidate, limits=default).passed
    monkeypatch.setenv("PRICESTREAM_ROLLOUT_FLIP_THRESHOLD", "0.05")
    monkeypatch.setenv("PRICESTREAM_ROLLOUT_MAX_FLIP_RATE", "0.25")
    monkeypatch.setenv("PRICESTREAM_ROLLOUT_MAX_KS", "0.2")
    monkeypatch.setenv("PRICESTREAM_ROLLOUT_MAX_MEAN_SHIFT", "0.04")
    limits = Settings().delivery().limits
    got = (limits.flip_threshold, limits.max_flip_rate, limits.max_ks, limits.max_mean_shift)
    assert got == (0.05, 0.25, 0.2, 0.04)
    assert flip_rate_gate(incumbent, candidate, limits=limits).passed
    candidate[:60] = 106.0  # 30% now moved beyond the band
    assert not flip_rate_gate(incumbent, candidate, limits=limits).passed
    monkeypatch.setenv("PRICESTREAM_ROLLOUT_MAX_FLIP_RATE", "1.5")
    with pytest.raises(ValueError, match="rollout_max_flip_rate"):
        Settings()
