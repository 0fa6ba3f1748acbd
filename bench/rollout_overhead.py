"""Decision latency through :class:`delivery.rollout.RolloutScorer` per stage, against the bare scorer, same run.

Both arms are real scorers over the same small light ONNX model (trained here on the
seeded synthetic demand) and an in-memory feature source, so the figures isolate what
the rollout adds: the arm choice, stamping ``arm``/``propensity``, reward bookkeeping, and
in shadow the submission of the candidate to the background pool (whose work competes for
the GIL with the serving thread: that is the tail cost of shadowing in-process). Canary and
blend also price 5% of requests with the other arm in the background (paired gate evidence);
``canary-0pair`` turns that off to show the bookkeeping alone. Modes are
interleaved in blocks so that machine noise hits them alike.

Prints p50/p99 per mode in microseconds and the ratio to the bare scorer.

Run: ``.venv/bin/python bench/rollout_overhead.py [--n 4000]``
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np

from delivery import DeliveryConfig, Evidence, GateLimits, Stage
from delivery.rollout import RolloutScorer
from events.catalog import ALL_FEATURES
from events.models import PricingRequest
from market.synthetic import training_frame
from pricing.feature_source import MemoryFeatureSource
from pricing.models import DemandModelConfig
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from pricing.tiers import load_pricer
from pricing.training import train_bundle
from routing.router import Thresholds, TieredRouter

T0 = datetime(2026, 11, 30, 9, tzinfo=UTC)
_BLOCK = 200


def _source() -> MemoryFeatureSource:
    rng = np.random.default_rng(0)
    source = MemoryFeatureSource()
    for h in range(20):
        for d in range(10):
            values = {n: float(rng.gamma(2.0, 3.0)) for n in ALL_FEATURES} | {"occupancy": float(rng.uniform())}
            source.put(f"h{h}", "std", date(2026, 12, 10) + timedelta(days=d), values, version=1, event_time=T0)
    return source


def _requests(n: int) -> list[PricingRequest]:
    first = date(2026, 12, 10)
    return [PricingRequest(hotel_id=f"h{i % 20}", room_type="std", stay_date=first + timedelta(days=i % 10),
                           event_time=T0, guest_key=f"g{i}") for i in range(n)]


def _rollout(stage: Stage, make: object, root: Path, *, pair_share: float = 0.05) -> RolloutScorer:
    limits = GateLimits(max_p99_latency_ms=1e9, min_samples=1)
    cfg = DeliveryConfig(state_path=root / f"{stage.value}-{pair_share}.json", limits=limits,
                         shadow_max_pending=10_000)
    rollout = RolloutScorer(make(), config=cfg, pair_share=pair_share)  # type: ignore[operator]
    rollout.start(make(), version="v2")  # type: ignore[operator]
    same = [100.0] * 40
    ok = Evidence(incumbent_prices=same, candidate_prices=same, incumbent_booked=[0.0] * 40,
                  candidate_booked=[1.0] * 40, incumbent_revenue=[50.0] * 40, candidate_revenue=[90.0] * 40,
                  candidate_latency_ms=[1.0] * 40)
    while rollout.controller.status().stage != stage:
        rollout.controller.advance(ok)
    return rollout


def main(n: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="rollout-bench-"))
    info = train_bundle(training_frame(2000, seed=0), root / "light", tier="light", config=DemandModelConfig())
    light, source = load_pricer(info.path), _source()
    rules = RuleSet.from_yaml("min_price: 20\nmax_price: 2000\ndefault_base_rate: 150\n")

    def make() -> Scorer:
        return Scorer(ScorerConfig(stale_after_s=None, deadline_ms=10_000.0), rules=rules, feature_source=source,
                      light=light, heavy=None, router=TieredRouter(thresholds=Thresholds(rules_below=0.0,
                                                                                          heavy_above=1.0)))

    modes = {"no rollout": make()} | {s.value: _rollout(s, make, root) for s in (Stage.SHADOW, Stage.CANARY,
                                                                                  Stage.BLEND)}
    modes["canary-0pair"] = _rollout(Stage.CANARY, make, root, pair_share=0.0)
    requests = _requests(n)
    times: dict[str, list[float]] = {m: [] for m in modes}
    for start in range(0, n, _BLOCK):
        for name, target in modes.items():
            for r in requests[start:start + _BLOCK]:
                t0 = time.perf_counter_ns()
                target.price(r)
                times[name].append((time.perf_counter_ns() - t0) / 1_000.0)
    for target in modes.values():
        if isinstance(target, RolloutScorer):
            target.drain()
            target.close()
    base = np.asarray(times["no rollout"])
    b50, b99 = np.percentile(base, [50, 99])
    print(f"decision latency, {n} requests per mode, interleaved blocks of {_BLOCK} (microseconds)")
    print(f"{'mode':<12}{'p50':>10}{'p99':>10}{'p50 ratio':>12}{'p99 ratio':>12}")
    for name, values in times.items():
        p50, p99 = np.percentile(values, [50, 99])
        print(f"{name:<12}{p50:>10.0f}{p99:>10.0f}{p50 / b50:>12.2f}{p99 / b99:>12.2f}")
    shadow = modes["shadow"]
    if isinstance(shadow, RolloutScorer):
        counts = {k: shadow.stats.value("pricestream_rollout_shadow_total", outcome=k)
                  for k in ("logged", "late", "dropped")}
        print(f"shadow candidate pricings: {counts}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4_000, help="requests per mode")
    main(parser.parse_args().n)
