"""Overhead of progressive delivery on the serving path, against a bare call in the same run.

Measures, per call: ``choose_arm`` in the canary and blend stages, shadow submission
(``ShadowRunner.run``), a Thompson ``weights()`` refresh, ``ArmSet.current()`` and an
atomic ``rollback()``/``switch()``; each against the same bare pricing stand-in.
Prints p50/p99 in microseconds and the p50 ratio to the bare call.

Run: ``.venv/bin/python bench/delivery_overhead.py [--n 20000]``
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from delivery import ArmSet, DeliveryConfig, Evidence, RolloutController, ShadowRunner, ThompsonBlend

_GRID = np.linspace(80.0, 220.0, 64)
_BLOCK = 1_000


def bare_call(key: str) -> float:
    """Stand-in for an inline price: a small vectorised revenue argmax over a price grid."""
    demand = 1.0 / (1.0 + np.exp((_GRID - 120.0 - len(key)) / 15.0))
    return float(_GRID[int(np.argmax(_GRID * demand))])


def measure(fn: Callable[[int], object], n: int) -> np.ndarray:
    """Per-call wall time in microseconds."""
    out = np.empty(n)
    for i in range(n):
        t0 = time.perf_counter_ns()
        fn(i)
        out[i] = (time.perf_counter_ns() - t0) / 1_000.0
    return out


def _drain(shadow: ShadowRunner[str, float], logged: list[object]) -> None:
    while len(logged) < shadow.submitted:
        time.sleep(0.001)


def _controller(stage: str, root: Path) -> RolloutController:
    ctl = RolloutController(DeliveryConfig(state_path=root / f"{stage}.json"))
    ctl.start("v2")
    same = [100.0] * 64
    ok = Evidence(
        incumbent_prices=same,
        candidate_prices=same,
        incumbent_booked=[0.0, 1.0] * 2_000,
        candidate_booked=[1.0] * 4_000,
        incumbent_revenue=[50.0] * 64,
        candidate_revenue=[60.0] * 64,
        candidate_latency_ms=[1.0] * 64,
    )
    ctl.advance(ok)
    if stage == "blend":
        ctl.advance(ok)
    return ctl


def main(n: int) -> None:
    keys = [f"guest-{i}" for i in range(n)]
    root = Path(tempfile.mkdtemp(prefix="delivery-bench-"))
    canary, blend_ctl = _controller("canary", root), _controller("blend", root)
    arms: ArmSet[Callable[[str], float]] = ArmSet(bare_call, candidate=bare_call)
    blend = ThompsonBlend(seed=0)
    for i in range(1_000):
        blend.record_decision(str(i), "candidate" if i % 2 else "incumbent")
        blend.reward(str(i), float(i % 3 == 0))
    logged: list[object] = []
    shadow = ShadowRunner(bare_call, on_result=logged.append, max_workers=1, max_pending=1_024)

    def flip(i: int) -> float:
        (arms.switch if i % 2 else arms.rollback)()
        return arms.current()(keys[i])

    cases: dict[str, Callable[[int], object]] = {
        "bare call": lambda i: bare_call(keys[i]),
        "canary choose_arm + call": lambda i: (canary.choose_arm(keys[i]), bare_call(keys[i])),
        "blend choose_arm + call": lambda i: (blend_ctl.choose_arm(keys[i]), bare_call(keys[i])),
        "arms.current() + call": lambda i: arms.current()(keys[i]),
        "switch/rollback + call": flip,
        "shadow.run (submit) + call": lambda i: shadow.run(keys[i], bare_call),
        "thompson weights() (4000 draws)": lambda i: blend.weights(),
    }
    for fn in cases.values():  # warm-up
        measure(fn, min(n, 500))
    _drain(shadow, logged)
    # interleave blocks of every case so that load from other processes hits all cases alike
    blocks: dict[str, list[np.ndarray]] = {name: [] for name in cases}
    rounds = max(1, n // _BLOCK)
    for _ in range(rounds):
        for name, fn in cases.items():
            blocks[name].append(measure(fn, _BLOCK if "weights" not in name else _BLOCK // 20))
            _drain(shadow, logged)  # the shadow worker must not steal the GIL from the next case
    rows = {name: np.concatenate(parts) for name, parts in blocks.items()}
    shadow.close()
    base = float(np.percentile(rows["bare call"], 50))
    print(f"n={rounds * _BLOCK}  (times in microseconds; ratio = p50 / bare p50)")
    print(f"{'case':34s} {'p50':>9s} {'p99':>9s} {'ratio':>7s}")
    for name, t in rows.items():
        p50, p99 = np.percentile(t, [50, 99])
        print(f"{name:34s} {p50:9.2f} {p99:9.2f} {p50 / base:7.2f}x")
    print(f"shadow: submitted={shadow.submitted} dropped={shadow.dropped} logged={len(logged)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000)
    main(parser.parse_args().n)
