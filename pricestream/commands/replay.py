"""Simulator replays for the CLI: requests with ground truth, priced by each tier, scored by true revenue.

Used by ``router report`` (revenue of every tier on the same requests) and ``rollout advance``
(paired incumbent/candidate prices and outcomes when no evidence file is given). Revenue is the
market truth's expected revenue of the quoted price for that offer, so policies compare on what
they would earn, not on prediction error.

Example:
    >>> from pricing.rules import RuleSet
    >>> rp = ReplayRequests.sample(n=5, seed=1, hotels=2)
    >>> rules = RuleSet.from_yaml("min_price: 20\\nmax_price: 2000\\ndefault_base_rate: 120\\n")
    >>> prices = rp.rules_prices(rules)
    >>> len(prices), bool((rp.true_revenue(prices) >= 0).all())
    (5, True)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from events.catalog import ALL_FEATURES
from events.models import CHANNELS, PricingRequest
from market import Market, MarketConfig, training_frame
from pricing.rules import RuleSet
from routing.complexity import complexity_score, inputs_from

if TYPE_CHECKING:
    from delivery import Evidence
    from feedback.registry import ModelRegistry
    from pricing.tiers import TierPricer

REPLAY_DAYS = 30
"""Width of the simulated time range the replay requests fall into."""


@dataclass(frozen=True)
class Priced:
    """Prices of one pricer over the replay, with latencies (ms) and per-request uncertainties."""

    prices: np.ndarray
    latency_ms: np.ndarray
    uncertainty: np.ndarray


@dataclass(frozen=True)
class ReplayRequests:
    """Simulated requests, the features the stream would show for them, and the market truth."""

    market: Market
    frame: pd.DataFrame
    requests: tuple[PricingRequest, ...]
    features: tuple[dict[str, float | None], ...]

    @classmethod
    def sample(cls, *, n: int, seed: int, hotels: int) -> ReplayRequests:
        """``n`` offers sampled the way shoppers arrive (``market.training_frame``)."""
        market = Market(MarketConfig(hotels=hotels, seed=seed))
        frame = training_frame(market, n=n, seed=seed + 1, days=REPLAY_DAYS)
        requests, feats = [], []
        for row in frame.to_dict("records"):
            event_time = pd.Timestamp(row["event_time"]).to_pydatetime()
            stay = row["stay_date"] if isinstance(row["stay_date"], date) else date.fromisoformat(str(row["stay_date"]))
            requests.append(PricingRequest.model_validate({
                "hotel_id": row["hotel_id"], "room_type": row["room_type"], "stay_date": stay, "event_time": event_time,
                "nights": int(row["nights"]), "channel": CHANNELS[int(row["channel_code"])],
            }))
            feats.append({k: (None if _missing(row[k]) else float(row[k])) for k in ALL_FEATURES})
        return cls(market, frame, tuple(requests), tuple(feats))

    def rules_prices(self, rules: RuleSet) -> np.ndarray:
        """The rules-only price of every request (a deciding rule's price where one fires)."""
        out = []
        for request, feats in zip(self.requests, self.features, strict=True):
            outcome = rules.evaluate(request, feats)
            out.append(outcome.decided_price if outcome.decided_price is not None else outcome.rule_price)
        return np.asarray(out, dtype=float)

    def quote(self, pricer: TierPricer, rules: RuleSet) -> Priced:
        """Quote every request with ``pricer`` (a ``TierPricer``) inside the rules' bounds."""
        prices, latency, spread = [], [], []
        for request, feats in zip(self.requests, self.features, strict=True):
            outcome = rules.evaluate(request, feats)
            t0 = time.perf_counter()
            q = pricer.quote(
                request, feats, floor=outcome.floor, ceiling=outcome.ceiling, rule_price=outcome.rule_price
            )
            latency.append((time.perf_counter() - t0) * 1000.0)
            price = outcome.decided_price if outcome.decided_price is not None else outcome.clamp(q.price)
            prices.append(price)
            spread.append(q.uncertainty if math.isfinite(q.uncertainty) else 0.0)
        return Priced(np.asarray(prices), np.asarray(latency), np.asarray(spread))

    def complexity(self, light_uncertainty: np.ndarray) -> np.ndarray:
        """The scorer's complexity score of every request, given the light model's uncertainty."""
        out = []
        for request, feats, u in zip(self.requests, self.features, light_uncertainty, strict=True):
            inputs = inputs_from(request, feats, feature_time=request.event_time, hotel_seen=30,
                                 light_uncertainty=float(min(max(u, 0.0), 1.0)))
            out.append(complexity_score(inputs))
        return np.asarray(out, dtype=float)

    def true_revenue(self, prices: np.ndarray) -> np.ndarray:
        """Expected revenue of each request at ``prices`` under the market truth."""
        return np.asarray([
            self.market.expected_revenue(r.hotel_id, r.room_type, r.stay_date, r.event_time, float(p),
                                         channel=r.channel)
            for r, p in zip(self.requests, prices, strict=True)
        ])

    def sample_booked(self, prices: np.ndarray, *, seed: int) -> np.ndarray:
        """0/1 outcomes drawn from the truth's booking probability at ``prices`` (seeded)."""
        rng = np.random.default_rng(seed)
        revenue = self.true_revenue(prices)
        prob = np.clip(revenue / np.asarray(prices), 0.0, 1.0)  # revenue per view = price x p(book)
        return (rng.random(len(prob)) < prob).astype(float)


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def replay_evidence(registry: ModelRegistry, rules: RuleSet, version: str, incumbent: str, *, n: int,
                    seed: int, hotels: int = 8) -> Evidence:
    """Gate evidence for a rollout of ``version`` against ``incumbent``: both price the same ``n`` simulated
    requests; outcomes are drawn from the market truth on two disjoint halves, as a canary split would see."""
    from delivery import Evidence
    from pricing.tiers import load_pricer

    replay = ReplayRequests.sample(n=n, seed=seed, hotels=hotels)
    inc = replay.quote(load_pricer(registry.show(incumbent).path), rules)
    cand = replay.quote(load_pricer(registry.show(version).path), rules)
    half = n // 2
    return Evidence(
        incumbent_prices=inc.prices,
        candidate_prices=cand.prices,
        candidate_latency_ms=cand.latency_ms,
        incumbent_booked=replay.sample_booked(inc.prices, seed=seed)[:half],
        candidate_booked=replay.sample_booked(cand.prices, seed=seed + 1)[half:],
        incumbent_revenue=replay.true_revenue(inc.prices)[:half],
        candidate_revenue=replay.true_revenue(cand.prices)[half:],
    )
