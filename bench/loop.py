"""The pricing loop in process on markets that change, and planted candidates through the sequential gate.

**Scenarios** (:mod:`market.scenarios`). For each preset, scenario and seed, the same shoppers are priced by

* ``frozen``: pricestream's scorer with the bootstrap models (trained on the unchanged market before the change),
  never updated;
* ``loop``: the same scorer learning from its own outcomes with the code the trainer service runs: every decision
  joined to its outcome (``bench/learning.LabelJoin``, the label service's join; every decision labelled, weight 1),
  every ``train_every`` labels the trainer's update (:class:`feedback.services.trainer_update.BatchUpdater`: the
  poisoning guard, then the guarded update judged on the newest labels, recency weights) per tier, into a model
  registry; an accepted version is promoted and swapped in (``trainer_promotion=swap``, the shipped default). No
  setting is tuned per scenario;
* ``retrained``: models trained on the changed market's own data over the run: what learning could reach;
* ``dp``: the DP oracle.

Per week each policy's expected revenue and expected revenue net of the rooms' value (the DP's bid price at the
offer) are summed over its offers under the truth (``market.evaluate.NetValueRecorder``), and printed as shares of
the DP's. The last line gives, per scenario, the share of the frozen-to-retrained gap (net of the rooms' value)
that the loop recovered over the first 2 and 4 weeks, and its worst week against frozen.

**Planted candidates**: per-request outcomes of a simulated week at ``--planted-hotels`` hotels (the offers, their
true booking probability and their value if booked: price minus the DP's bid price, x rooms x nights), resampled;
a candidate books with probability x (1 + lift), so its true net value per request is ``lift`` above the
incumbent's. Each trial runs the rollout's canary (``canary_share``) and blend (``blend_initial_weight``) stages,
each judged after every simulated hour by the sequential gate (:func:`delivery.sequential.decide`, the function
``net_value_gate`` calls, with the shipped settings, regression adjusted on the incumbent's expected net value of
each request, ``--model-noise`` log-odds from the truth). Printed: the share promoted within one simulated week, and
up to ``--max-decisions``, the share promoted and the median decisions needed. Why a week cannot be enough at 4
hotels (the best one-look test on these outcomes needs about 170 weeks for a +3% effect): ``bench/promotion_power.py``.

    .venv/bin/python bench/loop.py [--weeks 8] [--seeds 5] [--presets city resort] [--hotels 1] [--trials 200]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from learning import LabelJoin
from revenue import history, pricers, request_of, scorer, train
from stream_features import AtRequestTime, StreamFeatures

from delivery.stages import DeliveryConfig
from feedback.continued import GuardConfig
from feedback.poisoning import PoisonGuard
from feedback.registry import ModelRegistry
from feedback.services.trainer_service import TrainerServiceConfig
from feedback.services.trainer_update import BatchUpdater, Snapshot
from market import DPOracle, Market, static_policy, training_frame
from market.compare import WARMUP_DAYS, run_window
from market.evaluate import NetValueRecorder, offer_value
from market.presets import preset
from market.scenarios import NAMES, Scenario, scenario
from market.shoppers import Offer, Policy
from pricing.cold_start import label_row

POLICIES = ("frozen", "loop", "retrained", "dp")
LIFTS = (0.03, 0.0, -0.03)
HOUR = timedelta(hours=1)
TRAIN_EVERY = TrainerServiceConfig(state_dir=Path("."), registry_root=Path(".")).train_every
"""The trainer service's default: labels between two updates."""


# ---------------------------------------------------------------------------------------------- the loop
class Loop:
    """pricestream's scorer learning from its outcomes through the trainer's update (see the module docstring)."""

    def __init__(self, s: Any, source: AtRequestTime, bundles: tuple[Path, Path], frame: Any, capacity: Any,
                 work: Path, seed: int) -> None:
        self.s, self.source, self.capacity = s, source, capacity
        self.registry = ModelRegistry(work / "registry")
        snapshot = Snapshot("bootstrap", frame.drop(columns=["true_prob"], errors="ignore"))
        self.updaters = []
        for tier, bundle in zip(("light", "heavy"), bundles, strict=True):
            self.registry.promote(self.registry.register(bundle, tier=tier, snapshot_id="bootstrap"))
            guard = PoisonGuard(quarantine_dir=work / tier / "quarantine")
            (work / tier).mkdir(parents=True, exist_ok=True)
            self.updaters.append(BatchUpdater(self.registry, snapshot, guard, tier=tier, seed=seed,  # type: ignore[arg-type]
                                              guard_config=GuardConfig(), work_dir=work / tier, auto_promote=True))
        self.rows: list[dict[str, Any]] = []
        self.log: dict[str, list[str]] = defaultdict(list)
        self.join = LabelJoin(self.learn)
        self.week = 0

    def learn(self, request: Any, decision: Any, booked: bool) -> None:
        self.rows.append({**label_row(request, decision, booked), "event_time": request.event_time,
                          "decision_id": str(decision.decision_id), "weight": 1.0})
        if len(self.rows) >= TRAIN_EVERY:
            self.update()

    def update(self) -> None:
        rows, self.rows = self.rows, []
        for updater in self.updaters:
            out = updater.update(rows)
            self.log[f"week {self.week + 1}"].append(f"{updater.tier} {out.stage}: {out.reason[:160]}")
        light, heavy = (self.registry.current(t) for t in ("light", "heavy"))
        if light is not None and heavy is not None:
            new_light, new_heavy = pricers((light.path, heavy.path), capacity=self.capacity, stays=self.source)
            self.s.swap_models(light=new_light, heavy=new_heavy)

    def policy(self, offer: Offer) -> float:
        self.source.now = offer.at
        request = request_of(offer)
        decision = self.s.price(request)
        self.join.shown(request, decision)
        return decision.price

    def on_event(self, event: Any) -> None:
        self.source.features.add(event)
        if event.event_type == "booking" and self.join.pending:
            self.join.booked(event)


def weekly(market: Market, dp: DPOracle, policy: Policy, *, start: datetime, weeks: int, seed: int,
           on_event: Callable[[Any], None]) -> np.ndarray:
    """(weeks, 2): expected revenue and expected revenue net of the rooms' value of ``policy``'s offers, per week."""
    net = NetValueRecorder(market, policy, dp.bid_price)
    gross = NetValueRecorder(market, net, lambda _offer: 0.0)
    run_window(market, gross, start=start, days=7 * weeks, seed=seed, on_event=on_event)
    out = np.zeros((weeks, 2))
    for rec, col in ((gross, 0), (net, 1)):
        for day, value in rec.net.items():
            week = (day - start.date()).days // 7
            if 0 <= week < weeks:
                out[week, col] += value
    return out


def bench_scenario(name: str, sc: Scenario, args: argparse.Namespace, seed: int,
                   say: Callable[[str], None]) -> dict[str, np.ndarray]:
    base = preset(name, hotels=args.hotels, seed=args.market_seed)
    market, before = sc.market(base), sc.bootstrap_market(base)
    t0 = time.perf_counter()
    dp = DPOracle(market, first_night=(sc.start - timedelta(days=WARMUP_DAYS)).date(),
                  last_night=(sc.start + timedelta(days=7 * args.weeks + market.config.horizon_days + 1)).date())
    rows = args.rows * args.hotels
    frame = training_frame(before, n=rows, seed=seed, start=sc.bootstrap_start, days=sc.bootstrap_days)
    changed = training_frame(market, n=rows, seed=seed, start=sc.start, days=7 * args.weeks)
    capacity = history(market, sc.start, seed=10_000)
    out: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory(prefix="bench-loop-") as tmp:
        work = Path(tmp)
        boot = train(before, start=sc.start, rows=rows, seed=seed, work=work / "boot", frame=frame)
        again = train(market, start=sc.start, rows=rows, seed=seed, work=work / "again", frame=changed)
        say(f"{name} {sc.name} seed {seed}: DP and models ready ({time.perf_counter() - t0:.0f}s)")
        for policy_name in POLICIES:
            t1 = time.perf_counter()
            feats = StreamFeatures()
            source = AtRequestTime(feats)
            on_event: Callable[[Any], None] = feats.add
            loop = None
            if policy_name == "dp":
                policy: Policy = dp.policy()
            else:
                bundles = again if policy_name == "retrained" else boot
                s = scorer(market, source=source, bundles=bundles, capacity=capacity)
                if policy_name == "loop":
                    loop = Loop(s, source, boot, frame, capacity, work / f"loop-{seed}", seed)
                    policy, on_event = _weekly_clock(loop, sc.start), loop.on_event
                else:
                    policy = _scorer_policy(s, source)
            out[policy_name] = weekly(market, dp, policy, start=sc.start, weeks=args.weeks, seed=seed,
                                      on_event=on_event)
            say(f"{name} {sc.name} seed {seed} {policy_name:9s} done ({time.perf_counter() - t1:.0f}s)")
            if loop is not None:
                for week, lines in loop.log.items():
                    for line in lines:
                        say(f"{name} {sc.name} seed {seed} loop {week}: {line}")
    return out


def _scorer_policy(s: Any, source: AtRequestTime) -> Policy:
    def policy(offer: Offer) -> float:
        source.now = offer.at
        return float(s.price(request_of(offer)).price)

    return policy


def _weekly_clock(loop: Loop, start: datetime) -> Policy:
    def policy(offer: Offer) -> float:
        loop.week = max((offer.at - start).days // 7, 0)
        return loop.policy(offer)

    return policy


def recovered(per: dict[str, np.ndarray], weeks: int) -> float:
    """Share of the frozen-to-retrained gap (net value) the loop closed over the first ``weeks``."""
    f, loop, r = (per[p][:weeks, 1].sum() for p in ("frozen", "loop", "retrained"))
    return float((loop - f) / (r - f)) if r != f else float("nan")


def report(name: str, sc_name: str, per_seed: list[dict[str, np.ndarray]], weeks: int) -> str:
    print(f"\n{name} / {sc_name}: {len(per_seed)} seed(s); share of the DP per week (revenue | net of rooms' value)",
          flush=True)
    print("policy     " + " ".join(f"{'week ' + str(w + 1):>13s}" for w in range(weeks)) + "        total")
    for p in POLICIES:
        cells = []
        for w in range(weeks + 1):
            sl = slice(w, w + 1) if w < weeks else slice(0, weeks)
            ratio = [float(np.sum(s[p][sl], axis=0)[k] / np.sum(s["dp"][sl], axis=0)[k])
                     for s in per_seed for k in (0, 1)]
            cells.append(f"{np.mean(ratio[0::2]):.3f}|{np.mean(ratio[1::2]):.3f}")
        print(f"{p:10s} " + " ".join(f"{c:>13s}" for c in cells), flush=True)
    two = np.mean([recovered(s, min(2, weeks)) for s in per_seed])
    four = np.mean([recovered(s, min(4, weeks)) for s in per_seed])
    worst = min(float(s["loop"][w, 1] / s["frozen"][w, 1] - 1.0) for s in per_seed for w in range(weeks))
    return f"{sc_name}: recovered after 2 weeks {100 * two:.0f}%, after 4 weeks {100 * four:.0f}%, " \
           f"worst week vs frozen {100 * worst:+.1f}%"


# ------------------------------------------------------------------------------------------ planted candidates
def planted_pool(args: argparse.Namespace) -> tuple[np.ndarray, int]:
    """(offers x [booking probability, value if booked]) of a simulated week at static prices, and offers per week."""
    sc = scenario("stationary")
    market = sc.market(preset(args.planted_preset, hotels=args.planted_hotels, seed=args.market_seed))
    dp = DPOracle(market, first_night=sc.start.date(),
                  last_night=(sc.start + timedelta(days=8 + market.config.horizon_days)).date())
    static = static_policy(market)
    rows: list[tuple[float, float]] = []

    def policy(offer: Offer) -> float:
        price = static(offer)
        rooms_nights = market.seg_weight[market.segment_index(offer.segment)]
        p = offer_value(market, offer, price) / (price * rooms_nights)  # the truth's P(book | price)
        rows.append((p, (price - dp.bid_price(offer)) * rooms_nights))
        return price

    run_window(market, policy, start=sc.start, days=7, seed=args.market_seed, warmup_days=0)
    return np.asarray(rows), len(rows)


def planted(args: argparse.Namespace, say: Callable[[str], None]) -> str:
    """The planted candidates through canary then blend (each stage's own test, the shipped shares and gate),
    regression adjusted on the incumbent's expected net value (``bench/promotion_power.py``, which also prints
    the ceiling that no test beats)."""
    from promotion_power import covariate, gate_trial

    if args.pool is not None and args.pool.exists():
        pool = np.load(args.pool)
    else:
        pool, _ = planted_pool(args)
        if args.pool is not None:
            np.save(args.pool, pool)
    per_week = len(pool)
    per_hour = max(per_week // (7 * 24), 1)
    delivery = DeliveryConfig(state_path=Path("unused"))
    shares = (delivery.canary_share, delivery.blend_initial_weight)
    config = delivery.limits.sequential
    cov = covariate(pool, args.model_noise, args.market_seed)
    say(f"planted: {per_week} offers in a week at {args.planted_hotels} {args.planted_preset} hotels "
        f"({per_hour} an hour); gate alpha {config.alpha}, min {config.min_outcomes} outcomes per arm, "
        f"stages at candidate shares {shares}")
    clauses = []
    for lift in LIFTS:
        rng = np.random.default_rng([args.market_seed, int(round(lift * 1000)) + 100])
        runs = [gate_trial(rng, pool, cov, lift, shares=shares, per_hour=per_hour, max_decisions=args.max_decisions,
                           config=config) for _ in range(args.trials)]
        needed = [n for v, n in runs if v == "promote"]
        week = sum(n <= per_week for n in needed) / len(runs)
        share, aborted = len(needed) / len(runs), sum(v == "abort" for v, _ in runs) / len(runs)
        median = float(np.median(needed)) if needed else float("nan")
        say(f"planted {lift:+.0%}: within a week promoted {week:.1%}; by {args.max_decisions:,} decisions promoted "
            f"{share:.1%}, aborted {aborted:.1%}, median decisions to promote {median:,.0f}")
        words = f"promoted {100 * share:.0f}%" + (f" in {median:,.0f} decisions" if lift > 0 else "")
        clauses.append(f"planted {lift:+.0%}: {words}")
    return "; ".join(clauses)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weeks", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--presets", nargs="+", default=["city", "resort"])
    parser.add_argument("--scenarios", nargs="+", default=list(NAMES), choices=NAMES)
    parser.add_argument("--hotels", type=int, default=1)
    parser.add_argument("--rows", type=int, default=20_000, help="bootstrap training rows per hotel")
    parser.add_argument("--market-seed", type=int, default=0)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--planted-hotels", type=int, default=4)
    parser.add_argument("--planted-preset", default="city")
    parser.add_argument("--max-decisions", type=int, default=4_000_000)
    parser.add_argument("--model-noise", type=float, default=0.5, help="log-odds noise of the logged prediction")
    parser.add_argument("--pool", type=Path, default=None, help="cache of the planted pool (.npy), read if it exists")
    parser.add_argument("--skip-scenarios", action="store_true", help="planted candidates only")
    parser.add_argument("--skip-planted", action="store_true", help="scenarios only")
    args = parser.parse_args(argv)

    def say(line: str) -> None:
        print(f"[{datetime.now(tz=UTC):%H:%M:%S}] {line}", file=sys.stderr, flush=True)

    clauses = []
    if not args.skip_scenarios:
        for name in args.presets:
            for sc_name in args.scenarios:
                sc = scenario(sc_name)
                per_seed = [bench_scenario(name, sc, args, seed, say) for seed in range(args.seeds)]
                clauses.append(f"{name} {report(name, sc_name, per_seed, args.weeks)}")
    if not args.skip_planted:
        clauses.append(planted(args, say))
    print("\n" + "; ".join(clauses))


if __name__ == "__main__":
    main()
