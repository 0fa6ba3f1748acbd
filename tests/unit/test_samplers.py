from __future__ import annotations

import random
import statistics
import uuid
from datetime import UTC, date, datetime, timedelta

import pytest

from events.models import OutcomeLabel
from feedback.errors import FeedbackConfigError, FeedbackError
from feedback.fisher import FisherSampler
from feedback.samplers import (
    Candidate,
    CommitteeSampler,
    MarginSampler,
    RandomSampler,
    SamplerConfig,
    UncertaintySampler,
)

T0 = datetime(2026, 6, 1, tzinfo=UTC)


def pool(n: int, *, seed: int = 0, minutes: int = 0) -> list[Candidate]:
    rng = random.Random(seed)
    return [Candidate(key=str(i), event_time=T0 + timedelta(minutes=minutes), prob=rng.random()) for i in range(n)]


def mixed_pool() -> list[Candidate]:
    uncertain = [Candidate(key=f"u{i}", event_time=T0, prob=0.45 + 0.001 * i) for i in range(100)]
    certain = [Candidate(key=f"c{i}", event_time=T0, prob=0.001 if i % 2 else 0.999) for i in range(100)]
    return uncertain + certain


@pytest.mark.parametrize("measure", ["std", "linear", "entropy"])
def test_batch_prefers_uncertain_and_meets_budget_exactly(measure) -> None:
    sampler = UncertaintySampler(SamplerConfig(budget_per_period=20, seed=3), measure=measure)
    chosen = sampler.select(mixed_pool())
    assert len(chosen) == 20
    assert sum(s.candidate.key.startswith("u") for s in chosen) >= 16
    assert all(s.weight == pytest.approx(1 / s.selection_prob) for s in chosen)


def test_random_sampler_does_not_prefer_uncertain() -> None:
    picks = []
    for seed in range(20):
        chosen = RandomSampler(SamplerConfig(budget_per_period=20, seed=seed)).select(mixed_pool())
        picks.append(sum(s.candidate.key.startswith("u") for s in chosen))
    assert 7 <= statistics.mean(picks) <= 13


@pytest.mark.parametrize("budget", [None, 15])
def test_batch_weights_are_unbiased(budget: int | None) -> None:
    candidates = pool(60)
    totals = []
    for seed in range(1500):
        sampler = UncertaintySampler(SamplerConfig(c=1.5, budget_per_period=budget, seed=seed))
        totals.append(sum(s.weight for s in sampler.select(candidates)))
    mean, se = statistics.mean(totals), statistics.stdev(totals) / len(totals) ** 0.5
    assert abs(mean - 60) < 4 * se
    assert se < 3.0  # the estimate is informative, not just noisy


def test_streaming_weights_are_unbiased_when_budget_does_not_bind() -> None:
    candidates = pool(80, seed=5)
    totals = []
    for seed in range(1500):
        sampler = MarginSampler(SamplerConfig(c=0.8, seed=seed))
        totals.append(sum(s.weight for c in candidates if (s := sampler.offer_one(c)) is not None))
    mean, se = statistics.mean(totals), statistics.stdev(totals) / len(totals) ** 0.5
    assert abs(mean - 80) < 4 * se


def test_streaming_budget_caps_each_period() -> None:
    sampler = UncertaintySampler(SamplerConfig(c=100.0, budget_per_period=30, period=timedelta(hours=1)))
    first = [s for c in pool(200) if (s := sampler.offer_one(c)) is not None]
    second = [s for c in pool(200, minutes=61) if (s := sampler.offer_one(c)) is not None]
    assert len(first) == 30 and len(second) == 30
    assert sampler.stats["budget_dropped"] == 2 * 170
    assert sampler.stats["offered"] == 400


def test_same_seed_same_selection() -> None:
    a = [s.candidate.key for s in UncertaintySampler(SamplerConfig(seed=9, budget_per_period=10)).select(pool(100))]
    b = [s.candidate.key for s in UncertaintySampler(SamplerConfig(seed=9, budget_per_period=10)).select(pool(100))]
    assert a == b and len(a) == 10


def test_uncertainty_measures() -> None:
    half, edge = Candidate(key="a", event_time=T0, prob=0.5), Candidate(key="b", event_time=T0, prob=0.1)
    assert [UncertaintySampler(measure=m).informativeness(half) for m in ("std", "linear", "entropy")] == [1, 1, 1]
    assert UncertaintySampler(measure="std").informativeness(edge) == pytest.approx(0.6)
    assert UncertaintySampler(measure="linear").informativeness(edge) == pytest.approx(0.2)
    assert UncertaintySampler(measure="entropy").informativeness(edge) == pytest.approx(0.469, abs=1e-3)
    assert UncertaintySampler().informativeness(Candidate(key="c", event_time=T0)) == 1.0
    with pytest.raises(FeedbackConfigError, match="measure"):
        UncertaintySampler(measure="gini")  # type: ignore[arg-type]


def test_margin_uses_revenue_gap() -> None:
    sampler = MarginSampler(margin_scale=0.2)
    close = Candidate(key="a", event_time=T0, revenues=(100.0, 98.0, 50.0))
    clear = Candidate(key="b", event_time=T0, revenues=(100.0, 60.0))
    assert sampler.informativeness(close) == pytest.approx(0.9)
    assert sampler.informativeness(clear) == 0.0
    assert sampler.informativeness(Candidate(key="c", event_time=T0, prob=0.75)) == pytest.approx(0.5)


def test_committee_disagreement() -> None:
    std = CommitteeSampler(method="std")
    assert std.informativeness(Candidate(key="a", event_time=T0, committee=(0.1, 0.9))) == pytest.approx(0.8)
    assert std.informativeness(Candidate(key="b", event_time=T0, committee=(0.3, 0.3, 0.3))) == 0.0
    votes = CommitteeSampler(method="vote_entropy")
    assert votes.informativeness(Candidate(key="c", event_time=T0, committee=(0.2, 0.7))) == pytest.approx(1.0)
    assert votes.informativeness(Candidate(key="d", event_time=T0, committee=(0.6, 0.7))) == 0.0
    members = CommitteeSampler(members=(lambda f: 0.2, lambda f: 0.6))
    assert members.informativeness(Candidate(key="e", event_time=T0)) == pytest.approx(0.4)
    with pytest.raises(FeedbackConfigError, match="method"):
        CommitteeSampler(method="kl")  # type: ignore[arg-type]


def test_to_training_example_keeps_weight() -> None:
    label = OutcomeLabel(
        hotel_id="h1", room_type="std", stay_date=date(2026, 7, 1), event_time=T0, decision_id=uuid.uuid4(),
        label=1, price=80.0, tier="heavy", predicted_prob=0.5, features={"occupancy": 0.5},
    )
    [sel] = UncertaintySampler(SamplerConfig(c=1.0)).select([Candidate.from_label(label)])
    ex = sel.to_training_example()
    assert (ex.weight, ex.selection_prob, ex.strategy, ex.label) == (1.0, 1.0, "uncertainty", 1)
    assert ex.features == {"occupancy": 0.5} and sel.candidate.features == {"occupancy": 0.5, "price": 80.0}
    with pytest.raises(FeedbackError, match="payload"):
        UncertaintySampler().select([Candidate(key="x", event_time=T0, prob=0.5)])[0].to_training_example()


def priced_pool(n_common: int, n_rare: int, *, prob: float = 0.15) -> list[Candidate]:
    """Same booking probability everywhere; a few offers at an unusual price for the room."""
    common = [Candidate(key=f"c{i}", event_time=T0, prob=prob, features={"price": 95.0 + i % 11})
              for i in range(n_common)]
    rare = [Candidate(key=f"r{i}", event_time=T0, prob=prob, features={"price": 300.0 + i}) for i in range(n_rare)]
    return common + rare


def test_fisher_prefers_high_leverage_and_meets_budget_exactly() -> None:
    rare_picks = []
    for seed in range(20):
        chosen = FisherSampler(SamplerConfig(budget_per_period=20, seed=seed), columns=["price"]).select(
            priced_pool(180, 20)
        )
        assert len(chosen) == 20
        assert all(s.weight == pytest.approx(1 / s.selection_prob) and s.strategy == "fisher" for s in chosen)
        rare_picks.append(sum(s.candidate.key.startswith("r") for s in chosen))
    # leverage 10 vs 1.1: g three times higher, so 60 of 240 units of selection mass (5 picks; random: 2)
    assert statistics.mean(rare_picks) >= 4.0


def test_fisher_weighs_outcome_variance_at_equal_leverage() -> None:
    sampler = FisherSampler(columns=["price"])
    sampler.observe(priced_pool(50, 0))
    same = {"price": 100.0}
    low, high = (Candidate(key=k, event_time=T0, prob=p, features=same) for k, p in (("a", 0.02), ("b", 0.3)))
    assert sampler.score(high) / sampler.score(low) == pytest.approx((0.3 * 0.7 / (0.02 * 0.98)) ** 0.5)
    assert sampler.informativeness(Candidate(key="u", event_time=T0, prob=None)) == 1.0


def test_fisher_weights_are_unbiased_when_the_budget_binds() -> None:
    candidates = priced_pool(50, 10)
    totals = [
        sum(s.weight for s in FisherSampler(SamplerConfig(budget_per_period=12, seed=seed), columns=["price"])
            .select(candidates))
        for seed in range(600)
    ]
    mean, se = statistics.mean(totals), statistics.stdev(totals) / len(totals) ** 0.5
    assert abs(mean - 60) < 4 * se and se < 2.0


def test_fisher_efficiency_and_config() -> None:
    flat = FisherSampler(columns=["price"])
    same = [Candidate(key=str(i), event_time=T0, prob=0.2, features={"price": 100.0}) for i in range(30)]
    flat.observe(same)
    assert flat.efficiency(same) == pytest.approx(1.0)  # nothing to gain over random
    skewed = FisherSampler(columns=["price"])
    skewed.observe(priced_pool(180, 20))
    assert skewed.efficiency(priced_pool(180, 20)) == pytest.approx(0.8, abs=0.05)  # (1.2)^2 / 1.8
    with pytest.raises(FeedbackConfigError, match="columns/embed"):
        FisherSampler()
