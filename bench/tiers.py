"""Tier economics on the market simulator: compute per decision, revenue under the truth, router calibration.

1. Train a light and a heavy bundle on ``market.training_frame`` of a seeded
   market; the rules get the market's base rate per room type (the default ladders).
2. Sample ``--offers`` offers (the way shoppers arrive) and price every one with the real
   :class:`~pricing.scorer.Scorer` forced into each tier (thresholds that send everything
   to the rules, the light or the heavy model), measuring the thread CPU time of each
   decision, plus the all-heavy *policy* (rules bounds + heavy quote, no light model and no
   complexity score). Revenue of a price is ``Market.expected_revenue`` under the truth.
3. On the first half of the offers: sweep the cost/revenue curve (``routing.curve``) for a
   few rules shares, pick the point saving most compute within ``--max-loss`` revenue, and
   calibrate a :class:`~routing.router.TieredRouter` to those shares (its thresholds).
4. On the held-out half: run the scorer with the calibrated thresholds and report the
   realised share per tier, CPU per decision and revenue against the all-heavy policy.

A routed heavy decision costs light + heavy (the light quote's uncertainty feeds the heavy
routing), so savings are against the measured all-heavy policy, not the curve's heavy tier.
Writes the curve to ``reports/router_curve.png``.

    .venv/bin/python bench/tiers.py [--offers 4000] [--hotels 20] [--quick] [--max-loss 0.01]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import yaml

from events.catalog import ALL_FEATURES
from events.models import CHANNELS, PricingDecision, PricingRequest
from market import Market, MarketConfig, training_frame
from pricestream.demo import market_rule_spec
from pricing.feature_source import FeatureRead
from pricing.models import DemandModelConfig
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from pricing.tiers import load_pricer
from pricing.training import train_bundle
from routing.calibration import Thresholds, TierShares, tier_shares
from routing.curve import CurvePoint, TierCosts, cost_revenue_curve, plot_curve
from routing.router import TieredRouter

ROOT = Path(__file__).resolve().parents[1]
PLOT = ROOT / "reports" / "router_curve.png"
FORCED = {
    "rules": Thresholds(rules_below=1.0, heavy_above=1.0),
    "light": Thresholds(rules_below=0.0, heavy_above=1.0),
    "heavy": Thresholds(rules_below=0.0, heavy_above=0.0),
}
RULES_SHARES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
BAND = (0.6, 1.6)
"""Price band per room type as multiples of its base rate (hotels spread ~25% around it, so
the band leaves the models room on either side of every hotel's own level)."""
QUICK_HEAVY = DemandModelConfig(n_members=3, num_trees=80, num_leaves=31, bootstrap=True)


class _Slot:
    """A feature source that answers with the features set for the next request (one offer at a time)."""

    def __init__(self) -> None:
        self.current = FeatureRead({}, None, None)

    def read(self, hotel_id: str, room_type: str, stay_date: date) -> FeatureRead:
        del hotel_id, room_type, stay_date
        return self.current


@dataclass
class Offers:
    requests: list[PricingRequest]
    reads: list[FeatureRead]


@dataclass
class TierRun:
    prices: np.ndarray
    revenue: np.ndarray
    cpu_us: np.ndarray
    tiers: np.ndarray
    scores: np.ndarray


def market_rules(market: Market, *, band: tuple[float, float] | None = BAND) -> RuleSet:
    """The default rule file with each hotel's base rate per room type and, with ``band``, a price band.

    The base rate is the room's reference price, the same ``base_rate`` the training frames carry.
    """
    spec = market_rule_spec(market, band=band, drop_kinds=frozenset({"closed_dates"}))  # a renovation is not the market
    spec["default_base_rate"] = market.config.base_prices[market.config.room_types[0]]
    return RuleSet.from_yaml(yaml.safe_dump(spec))


def offers_from(frame: pd.DataFrame) -> Offers:
    """Requests and the streaming features the scorer would read, from a simulator frame."""
    requests, reads = [], []
    features = frame[list(ALL_FEATURES)].astype(float)
    for i, row in enumerate(frame.itertuples(index=False)):
        at: datetime = row.event_time.to_pydatetime()
        requests.append(PricingRequest(hotel_id=row.hotel_id, room_type=row.room_type, stay_date=row.stay_date,
                                       nights=int(row.nights), channel=CHANNELS[int(row.channel_code)],  # type: ignore[arg-type]
                                       event_time=at))
        values = {k: None if v != v else float(v) for k, v in features.iloc[i].items()}
        reads.append(FeatureRead(values, 1, at))
    return Offers(requests, reads)


def run_scorer(scorer: Scorer, offers: Offers, market: Market) -> TierRun:
    """Price every offer with ``scorer`` (thread CPU per decision); revenue under the truth."""
    slot = cast(_Slot, scorer.feature_source)
    decisions: list[PricingDecision] = []
    cpu = np.empty(len(offers.requests))
    for i, (request, read) in enumerate(zip(offers.requests, offers.reads, strict=True)):
        slot.current = read
        t0 = time.thread_time_ns()
        decisions.append(scorer.price(request))
        cpu[i] = (time.thread_time_ns() - t0) / 1000.0
    prices = np.array([d.price for d in decisions])
    return TierRun(prices, revenue(market, offers, prices), cpu, np.array([d.tier for d in decisions]),
                   np.array([d.complexity for d in decisions]))


def revenue(market: Market, offers: Offers, prices: np.ndarray) -> np.ndarray:
    """Expected revenue of each offer at its price under the market's truth (channel-aware)."""
    return np.array([market.expected_revenue(r.hotel_id, r.room_type, r.stay_date, r.request_time, float(p),
                                             channel=r.channel) for r, p in zip(offers.requests, prices, strict=True)])


def oracle_revenue(market: Market, offers: Offers) -> np.ndarray:
    """Expected revenue at the truth's revenue-maximising price of each offer (a myopic upper reference)."""
    best = [market.optimal_price(r.hotel_id, r.room_type, r.stay_date, r.request_time, channel=r.channel)
            for r in offers.requests]
    return revenue(market, offers, np.array(best))


def sweep(runs: dict[str, TierRun], idx: np.ndarray, costs: TierCosts, heavy_policy_us: float,
          steps: int) -> list[tuple[float, CurvePoint]]:
    """Curve points for each rules share; ``compute_saved`` re-based on the all-heavy policy's CPU."""
    scores = runs["light"].scores[idx]  # score after the light quote: what the heavy routing sees
    rev = {t: runs[t].revenue[idx] for t in ("rules", "light", "heavy")}
    out = []
    for share in RULES_SHARES:
        for p in cost_revenue_curve(scores, rev, costs=costs, rules_share=share, steps=steps):
            saved = 1.0 - p.compute_cost / (heavy_policy_us * len(idx))
            out.append((share, p.model_copy(update={"compute_saved": saved})))
    return out


def train(market: Market, out: Path, *, n: int, quick: bool, seed: int) -> tuple[Path, Path]:
    frame = training_frame(market, n=n, seed=seed)
    light = train_bundle(frame, out / "light", tier="light", seed=seed)
    heavy = train_bundle(frame, out / "heavy", tier="heavy", seed=seed, config=QUICK_HEAVY if quick else None)
    return light.path, heavy.path


def _scorer(rules: RuleSet, light: Any, heavy: Any | None, thresholds: Thresholds) -> Scorer:
    return Scorer(ScorerConfig(deadline_ms=1e6), rules=rules, feature_source=_Slot(), light=light, heavy=heavy,
                  router=TieredRouter(thresholds))


def _pct(x: float) -> str:
    return f"{100 * x:6.2f}%"


def _report_curve(points: list[tuple[float, CurvePoint]], best: tuple[float, CurvePoint]) -> None:
    print(f"\n{'rules':>7}{'heavy':>8}{'heavy_above':>13}{'compute saved':>15}{'revenue lost':>14}")
    for share, p in points:
        if share in (0.0, best[0]) and round(p.heavy_share * 20) % 2 == 0:
            mark = "  <- best" if p is best[1] else ""
            print(f"{_pct(share):>7}{_pct(p.heavy_share):>8}{p.heavy_above:>13.3f}"
                  f"{_pct(p.compute_saved):>15}{_pct(p.revenue_lost):>14}{mark}")


def evaluate(market: Market, rules: RuleSet, light: Any, heavy: Any, args: argparse.Namespace) -> None:
    """Steps 2-4 of the module docstring; prints the tables and writes the plot."""
    offers = offers_from(training_frame(market, n=args.offers, seed=args.seed + 101))
    warm = Offers(offers.requests[:100], offers.reads[:100])
    runs: dict[str, TierRun] = {}
    for tier, th in FORCED.items():
        run_scorer(_scorer(rules, light, heavy, th), warm, market)
        runs[tier] = run_scorer(_scorer(rules, light, heavy, th), offers, market)
    # the all-heavy policy: the same scorer with the heavy model as its only model, always consulted
    policy = run_scorer(_scorer(rules, heavy, None, FORCED["light"]), offers, market)
    policy_cpu = policy.cpu_us
    cost = {t: float(np.mean(runs[t].cpu_us)) for t in runs}
    print(f"offers {args.offers}, hotels {args.hotels}; mean thread CPU per decision (us): "
          f"rules {cost['rules']:.0f}, light {cost['light']:.0f}, routed heavy (light+heavy) {cost['heavy']:.0f}, "
          f"all-heavy policy {policy_cpu.mean():.0f}")
    print(f"revenue under truth per offer: rules {runs['rules'].revenue.mean():.2f}, "
          f"light {runs['light'].revenue.mean():.2f}, heavy {runs['heavy'].revenue.mean():.2f}, "
          f"all-heavy policy {policy.revenue.mean():.2f}, truth's optimum {oracle_revenue(market, offers).mean():.2f}")

    n = len(offers.requests)
    calib, held = np.arange(0, n // 2), np.arange(n // 2, n)
    costs = TierCosts(rules=cost["rules"], light=cost["light"], heavy=cost["heavy"])
    points = sweep(runs, calib, costs, float(policy_cpu[calib].mean()), args.steps)
    ok = [sp for sp in points if sp[1].revenue_lost <= args.max_loss]
    best = max(ok, key=lambda sp: (sp[1].compute_saved, -sp[1].revenue_lost))
    _report_curve(points, best)
    plot_curve([p for s, p in points if s == best[0]], PLOT, max_revenue_loss=args.max_loss)

    shares = TierShares(rules=best[1].rules_share, heavy=best[1].heavy_share,
                        light=1.0 - best[1].rules_share - best[1].heavy_share)
    router = TieredRouter(min_samples=min(1_000, len(calib)))
    for s in runs["light"].scores[calib]:
        router.learn_one(float(s))
    th = router.calibrate(shares)
    print(f"\ncalibrated on {len(calib)} offers for shares {shares.model_dump()}: thresholds {th.model_dump()}")
    print(f"shares of the calibration scores under them: {tier_shares(runs['light'].scores[calib], th)}")

    held_offers = Offers([offers.requests[i] for i in held], [offers.reads[i] for i in held])
    routed = run_scorer(_scorer(rules, light, heavy, th), held_offers, market)
    realised = {t: float(np.mean(routed.tiers == t)) for t in ("rules", "light", "heavy")}
    saved = 1.0 - routed.cpu_us.sum() / policy_cpu[held].sum()
    lost = 1.0 - routed.revenue.sum() / policy.revenue[held].sum()
    print(f"held-out {len(held)} offers, routed scorer: shares {realised}; CPU/decision by tier (us) "
          f"{ {t: round(float(routed.cpu_us[routed.tiers == t].mean()), 1) for t in realised if realised[t]} }")
    print(f"held-out vs all-heavy policy: compute saved {_pct(saved)}, revenue lost {_pct(lost)} "
          f"(goal: >= 73% saved, <= {_pct(args.max_loss)} lost)")
    print(f"curve written to {PLOT}")



def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--offers", type=int, default=4_000)
    parser.add_argument("--hotels", type=int, default=20)
    parser.add_argument("--train-rows", type=int, default=30_000)
    parser.add_argument("--max-loss", type=float, default=0.01)
    parser.add_argument("--steps", type=int, default=41)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="smaller heavy model")
    parser.add_argument("--no-band", action="store_true", help="only the default global bounds")
    args = parser.parse_args(argv)
    market = Market(MarketConfig(hotels=args.hotels, seed=args.seed))
    rules = market_rules(market, band=None if args.no_band else BAND)
    with tempfile.TemporaryDirectory() as tmp:
        light_dir, heavy_dir = train(market, Path(tmp), n=args.train_rows, quick=args.quick, seed=args.seed)
        evaluate(market, rules, load_pricer(light_dir), load_pricer(heavy_dir), args)


if __name__ == "__main__":
    main()
