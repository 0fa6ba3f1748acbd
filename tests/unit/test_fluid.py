"""The fluid LP bound: above the exact DP on single-night markets, above every policy on a multi-night one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from market import DPOracle, Market, oracle_policy, static_policy
from market.compare import run_window
from market.dp import solve as dp_solve
from market.errors import SimulatorError
from market.fluid import (
    HOLD_LEADS,
    Classes,
    Holding,
    dual,
    dual_held,
    fluid_bound,
    hold_share,
    market_classes,
    solve,
    solve_held,
)
from market.presets import preset


def _random_market(rng: np.random.Generator) -> dict[str, np.ndarray | int]:
    periods, classes, k_max = int(rng.integers(1, 9)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
    return {
        "capacity": int(rng.integers(1, 6)),
        "lam": rng.dirichlet(np.ones(classes + 1), periods)[:, :classes],
        "a": rng.normal(8.0, 2.0, (periods, classes)),
        "b": rng.uniform(1.3, 4.0, classes),
        "intent": rng.uniform(0.2, 1.0, classes),
        "rooms_pmf": rng.dirichlet(np.ones(k_max), classes),
        "nights": rng.uniform(1.0, 3.0, classes),
        "keep": rng.uniform(0.6, 1.0, classes),
    }


def _single_night(spec: dict[str, np.ndarray | int]) -> Classes:
    lam, a, b = (np.asarray(spec[k]) for k in ("lam", "a", "b"))
    pmf = np.asarray(spec["rooms_pmf"])
    rooms = pmf @ np.arange(1, pmf.shape[1] + 1)
    weight = np.asarray(spec["intent"]) * np.asarray(spec["keep"]) * rooms
    periods = lam.shape[0]
    return Classes.single_night(lam=lam.ravel(), a=a.ravel(), b=np.tile(b, periods),
                                weight=np.tile(weight, periods), pay=np.tile(np.asarray(spec["nights"]), periods))


def test_fluid_bound_is_at_least_the_exact_dp_on_100_random_single_night_markets() -> None:
    rng = np.random.default_rng(7)
    binding = 0
    for _ in range(100):
        spec = _random_market(rng)
        exact = float(dp_solve(**spec)[0, -1])  # type: ignore[arg-type]
        classes = _single_night(spec)
        cap = np.array([float(spec["capacity"])])  # type: ignore[arg-type]
        bound = solve(cap, classes)
        unconstrained = dual(np.zeros(1), cap, classes)[0]
        assert bound.value >= exact * (1.0 - 1e-9)
        assert bound.value <= unconstrained * (1.0 + 1e-12)
        binding += bound.value < unconstrained * 0.999
    assert binding > 10  # capacity binds in many of them: the bound is not just the myopic sum


def test_held_bound_is_at_least_the_dp_whose_cancellations_never_free_a_room_on_100_random_markets() -> None:
    """Cancelled rooms held to the end is a policy of the real market (never resell them): below the held bound."""
    rng = np.random.default_rng(11)
    binding = 0
    for _ in range(100):
        spec = _random_market(rng)
        periods, n_cls = np.asarray(spec["lam"]).shape
        exact = float(dp_solve(**spec, consume=np.ones(n_cls))[0, -1])  # type: ignore[arg-type]
        base = _single_night(spec)
        lead_hi = np.repeat(np.arange(periods, 0, -1, dtype=float) * 3.0, n_cls)  # period t: 3 (T - t - 1) .. 3 (T - t)
        keep = np.tile(np.asarray(spec["keep"]), periods)
        classes = Classes(**{**base.__dict__, "lead_lo": lead_hi - 3.0, "lead_hi": lead_hi,
                             "cancel_odds": (1.0 - keep) / keep})
        cap = np.full((1, len(HOLD_LEADS)), float(spec["capacity"]))  # type: ignore[arg-type]
        held = solve_held(Holding.of(classes, cap), classes)
        free = solve(cap[:, 0], classes)
        assert exact * (1.0 - 1e-9) <= held.value <= free.value * (1.0 + 1e-12)
        assert dual_held(np.full(cap.size, 30.0), Holding.of(classes, cap), classes)[0] >= held.value - 1e-9
        binding += held.value < dual(np.zeros(1), cap[:, 0], classes)[0] * 0.999
    assert binding >= 10  # capacity binds in many of them (the tightening itself: the cases below)


def test_held_bound_on_a_hand_solved_case() -> None:
    # one room; bookings 30-40 days ahead, one cancelled per kept (odds 1): 30 days ahead a canceller booked
    # 40 days ahead still holds with (30 / 40 - 0.05) / 0.9 = 7/9, so 4 q(p) (1 + 7/9) <= 1 and revenue p / (16/9)
    assert hold_share(np.array([30.0]), np.array([40.0]))[0] == pytest.approx(7.0 / 9.0)
    one = Classes.single_night(lam=np.array([4.0]), a=np.array([2 * np.log(100.0)]), b=np.array([2.0]),
                               lead_lo=np.array([30.0]), lead_hi=np.array([40.0]), cancel_odds=np.array([1.0]))
    held = solve_held(Holding.of(one, np.full((1, len(HOLD_LEADS)), 1.0)), one)
    q = 9.0 / 64.0
    assert held.value == pytest.approx(100.0 * np.sqrt(1.0 / q - 1.0) * 9.0 / 16.0, rel=1e-4)
    with pytest.raises(SimulatorError, match="capacity"):
        Holding.of(one, np.ones((1, 2)))
    with pytest.raises(SimulatorError, match="lead_lo"):
        Holding.of(Classes.single_night(lam=np.array([4.0]), a=np.array([1.0]), b=np.array([2.0])), np.ones((1, 7)))


def test_fluid_bound_on_a_hand_solved_case_and_the_dual_is_a_bound_anywhere() -> None:
    # one room, 4 shoppers with q(p) = 1 / (1 + (p / 100)^2): sell 4 q(p) = 1, p = 100 sqrt(3)
    one = Classes.single_night(lam=np.array([4.0]), a=np.array([2 * np.log(100.0)]), b=np.array([2.0]))
    best = solve(np.array([1.0]), one)
    assert best.value == pytest.approx(100.0 * np.sqrt(3.0), rel=1e-5)
    # the bid at which p* is the best response: q + (p - bid) q' = 0, bid = p (1 - 1 / (b (1 - q))) = p / 3
    assert best.bids[0] == pytest.approx(100.0 * np.sqrt(3.0) / 3.0, rel=5e-3)  # g is flat near its minimum
    for pi in (0.0, 50.0, 300.0):
        assert dual(np.array([pi]), np.array([1.0]), one)[0] >= best.value - 1e-9


def test_a_stay_uses_every_night_it_covers() -> None:
    # two nights with one room each; one class of 2-night stays, one of 1-night stays on night 1
    two = Classes(lam=np.array([4.0, 4.0]), a=np.full(2, 2 * np.log(100.0)), b=np.full(2, 2.0), weight=np.ones(2),
                  pay=np.array([2.0, 1.0]), first=np.array([0, 1]), span=np.array([2, 1]), lo=np.zeros(2),
                  hi=np.full(2, np.inf))
    both = solve(np.array([1.0, 1.0]), two).value
    alone = solve(np.array([1.0, 1.0]), Classes(**{**two.__dict__, "lam": np.array([4.0, 0.0])})).value
    assert alone == pytest.approx(2 * 100.0 * np.sqrt(3.0), rel=1e-5)  # the 2-night stay alone
    assert both < alone + 100.0 * np.sqrt(3.0)  # night 1's one room cannot serve both classes in full
    with pytest.raises(SimulatorError, match="classes.first/span"):
        solve(np.array([1.0]), two)


def test_the_bound_sees_the_shoppers_the_simulator_draws() -> None:
    """Stay lengths keep their whole mix, and a night's expected shoppers match the simulator's hourly rates."""
    from market.fluid import TAIL, _nights_pmf

    for mean in (1.5, 2.6, 4.5):
        pmf = _nights_pmf(mean)
        assert pmf.sum() >= 1.0 - 2 * TAIL and pmf @ np.arange(1, len(pmf) + 1) == pytest.approx(mean, rel=0.01)
    market = Market(preset("resort", hotels=1, seed=0))
    start = datetime(2026, 5, 1, tzinfo=UTC)
    classes = market_classes(market, 0, 0, start=start, days=8)
    per_night = np.bincount(classes.first, weights=classes.lam, minlength=8) / market.config.view_prob
    for i in (3, 7):  # whole days before check-in: the intra-day cycle averages out
        o = start.date().toordinal() + i
        hours = np.arange(start.timestamp() + 1800.0, market.checkin_ts(o), 3600.0)
        rates = [float(np.sum(np.asarray(market.night_factors(0, 0, o))
                              * market.lead_pdf(np.asarray((market.checkin_ts(o) - t) / 86_400.0))
                              * market.diurnal(t))) for t in hours]
        assert per_night[i] == pytest.approx(sum(rates), rel=0.05)


def test_fluid_bound_is_above_every_simulated_policy_on_a_small_multi_night_market() -> None:
    market = Market(preset("city", hotels=1, seed=2, horizon_days=40))
    start, days, warmup, seeds = datetime(2026, 5, 4, tzinfo=UTC), 10, 3, 4
    dp = DPOracle(market, first_night=start.date(), last_night=(start + timedelta(days=days + 41)).date())
    policies = {"static": static_policy(market), "myopic": oracle_policy(market), "dp": dp.policy()}
    revenue = {name: [run_window(market, p, start=start, days=days, seed=s, warmup_days=warmup).revenue
                      for s in range(seeds)] for name, p in policies.items()}
    bounds = [fluid_bound(market, start=start, days=days, seed=s, warmup_days=warmup) for s in range(seeds)]
    held = [fluid_bound(market, start=start, days=days, seed=s, warmup_days=warmup, held=True) for s in range(seeds)]
    for name, values in revenue.items():
        assert np.mean(values) <= np.mean(held) <= np.mean(bounds), name
    assert max(np.mean(v) for v in revenue.values()) > 0.5 * np.mean(bounds)  # not vacuous
    assert np.mean(held) < np.mean(bounds)  # cancellations holding rooms tighten it
    classes = market_classes(market, 0, 0, start=start, days=days)
    assert classes.span.max() > 1 and set(np.unique(classes.first)) == set(range(days))


def test_cli_prints_the_bound_and_refuses_a_naive_start() -> None:
    from typer.testing import CliRunner

    from pricestream.cli import app

    args = ["market", "bound", "--preset", "city", "--days", "4", "--warmup-days", "1"]
    ok = CliRunner().invoke(app, args)
    assert ok.exit_code == 0, ok.output
    figure = float(ok.output.rsplit("fluid LP bound", 1)[1].strip().replace(",", ""))
    market = Market(preset("city", hotels=1, seed=0))
    assert figure == pytest.approx(
        fluid_bound(market, start=datetime(2026, 5, 1, tzinfo=UTC), days=4, seed=0, warmup_days=1), abs=0.5
    )
    tight = CliRunner().invoke(app, [*args, "--held"])
    assert tight.exit_code == 0 and "held fluid LP bound" in tight.output, tight.output
    held = float(tight.output.rsplit("held fluid LP bound", 1)[1].strip().replace(",", ""))
    assert held == pytest.approx(
        fluid_bound(market, start=datetime(2026, 5, 1, tzinfo=UTC), days=4, seed=0, warmup_days=1, held=True), abs=0.5
    )
    assert held <= figure + 0.5
    bad = CliRunner().invoke(app, [*args, "--start", "2026-05-01T00:00:00"])
    assert bad.exit_code == 1 and "--start" in bad.output and "timezone" in bad.output
