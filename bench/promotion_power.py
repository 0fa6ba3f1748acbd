"""How many decisions a +3% candidate needs: the information-theoretic ceiling, and the shipped gate against it.

The per-request outcome is a booking draw times the request's value if booked (price minus the DP's bid price,
x rooms x nights): ``Y = B * W``, ``B ~ Bernoulli(p)``. Its pool is a simulated week at ``--hotels`` hotels
(``bench/loop.planted_pool``: the offers at static prices, the truth's ``p`` and ``W``). A candidate books with
probability ``p * (1 + lift)``, so its net value per request is ``lift`` above the incumbent's.

1. **Ceiling.** The best fixed-sample test there is for ``lift`` > 0: one look, variance known, alpha one-sided,
   the week's decisions split evenly (the split that minimises the variance of a difference of means). Its power
   is ``Phi(lift * mu / sigma * sqrt(N / 4) - z_alpha)``; printed with the decisions it needs for 90%, and checked
   by simulation (Bernoulli draws from the pool). Two bounds beyond any realisable test are printed too: the
   incumbent's mean known exactly (all traffic on the candidate), and a perfect covariate (``p * W`` of every
   request known, so only the booking draw is noise); and the test that the goal's pair needs at least (tell
   +3% from -3%, a distance of 6%).
2. **The shipped gate** (:func:`delivery.sequential.decide`, the function ``net_value_gate`` runs, with the shipped
   settings), looking after every batch, ``--trials`` candidates per lift: promoted, aborted, decisions to promote;
   plain and regression adjusted on the covariate a rollout logs (the incumbent's expected net value of each
   request: its predicted booking probability, here the truth's with ``--model-noise`` log-odds noise, x ``W``).

    .venv/bin/python bench/promotion_power.py [--trials 200] [--hotels 4] [--pool /tmp/pool.npy]
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from scipy import stats

from delivery.sequential import CoMoments, Moments, SequentialConfig, decide

LIFT = 0.03
ALPHA_ORACLE = 0.01
POWER_GOAL = 0.9


def load_pool(args: argparse.Namespace, say: Callable[[str], None]) -> np.ndarray:
    """(offers x [p, W]) of a week at ``args.hotels`` hotels (cached in ``args.pool`` when given)."""
    if args.pool is not None and Path(args.pool).exists():
        return np.asarray(np.load(args.pool))
    from loop import planted_pool  # bench/loop.py: builds the DP oracle (a few minutes)

    say(f"building the pool: a week of offers at {args.hotels} {args.preset} hotels and the DP's bid prices")
    ns = argparse.Namespace(planted_preset=args.preset, planted_hotels=args.hotels, market_seed=args.market_seed)
    pool, _ = planted_pool(ns)
    if args.pool is not None:
        np.save(args.pool, pool)
    return pool


def moments(pool: np.ndarray) -> dict[str, float]:
    """Exact mean and variance of ``Y = B W`` over the pool, and the parts of the variance."""
    p, w = pool[:, 0], pool[:, 1]
    mu = float(np.mean(p * w))
    var = float(np.mean(p * w * w) - mu * mu)
    within = float(np.mean(p * (1 - p) * w * w))  # the booking draw's noise: no covariate removes it
    return {"n": float(len(pool)), "p": float(p.mean()), "mu": mu, "var": var, "within": within,
            "cv": math.sqrt(var) / mu}


def oracle_power(delta: float, var: float, n_total: float, *, arms: int = 2) -> float:
    """Power of the one-look known-variance z test (one-sided ``ALPHA_ORACLE``) with ``n_total`` decisions.

    ``arms=2``: split evenly, each mean estimated; ``arms=1``: the incumbent's mean known, all on the candidate.
    """
    se = math.sqrt(var * (4.0 if arms == 2 else 1.0) / n_total)
    return float(stats.norm.cdf(delta / se - stats.norm.ppf(1 - ALPHA_ORACLE)))


def oracle_needed(delta: float, var: float, *, arms: int = 2) -> float:
    """Decisions for ``POWER_GOAL`` power in :func:`oracle_power`."""
    z = stats.norm.ppf(1 - ALPHA_ORACLE) + stats.norm.ppf(POWER_GOAL)
    return z * z * var * (4.0 if arms == 2 else 1.0) / (delta * delta)


def draw(rng: np.random.Generator, pool: np.ndarray, n: int, lift: float,
         share: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` requests: (to candidate?, outcome, row index into the pool)."""
    idx = rng.integers(0, len(pool), n)
    p, w = pool[idx, 0], pool[idx, 1]
    to_cand = rng.random(n) < share
    booked = rng.random(n) < np.minimum(p * np.where(to_cand, 1.0 + lift, 1.0), 1.0)
    return to_cand, booked * w, idx


def simulated_oracle_power(rng: np.random.Generator, pool: np.ndarray, m: dict[str, float], n_total: int,
                           trials: int, *, lift: float = LIFT) -> float:
    """Share of ``trials`` in which the one-look known-variance z test rejects for a ``lift`` candidate."""
    z_alpha = stats.norm.ppf(1 - ALPHA_ORACLE)
    wins = 0
    for _ in range(trials):
        to_cand, y, _ = draw(rng, pool, n_total, lift, 0.5)
        nc, ni = int(to_cand.sum()), int((~to_cand).sum())
        se = math.sqrt(m["var"] * (1 / nc + 1 / ni))
        wins += (y[to_cand].mean() - y[~to_cand].mean()) / se > z_alpha
    return wins / trials


def covariate(pool: np.ndarray, noise: float, seed: int) -> np.ndarray:
    """The incumbent's expected net value per offer: ``W`` x the truth's ``p`` with log-odds noise ``noise``."""
    p = np.clip(pool[:, 0], 1e-6, 1 - 1e-6)
    logit = np.log(p / (1 - p)) + np.random.default_rng(seed).normal(0.0, noise, len(p))
    return pool[:, 1] / (1.0 + np.exp(-logit))


def _arm(values: np.ndarray, cov: np.ndarray | None) -> Moments | CoMoments:
    return Moments.of(values) if cov is None else CoMoments.of(values, cov)


def gate_trial(rng: np.random.Generator, pool: np.ndarray, cov: np.ndarray | None, lift: float, *,
               shares: tuple[float, ...], per_hour: int, max_decisions: int,
               config: SequentialConfig) -> tuple[str, int]:
    """One candidate through stages of candidate share ``shares``, each a test of its own that must promote.

    The gate looks after every simulated hour, and once traffic is long past a week after every 2% more
    decisions (fewer looks only make an always-valid test more cautious). Returns (verdict, decisions):
    ``promote``, ``abort`` or ``wait`` (still undecided at ``max_decisions``).
    """
    decisions = 0
    for share in shares:
        inc: Moments | CoMoments = _arm(np.empty(0), None if cov is None else np.empty(0))
        cand = inc
        while True:
            n = max(per_hour, decisions // 50)
            to_cand, y, idx = draw(rng, pool, n, lift, share)
            x = None if cov is None else cov[idx]
            inc = inc.merge(_arm(y[~to_cand], None if x is None else x[~to_cand]))  # type: ignore[arg-type]
            cand = cand.merge(_arm(y[to_cand], None if x is None else x[to_cand]))  # type: ignore[arg-type]
            decisions += n
            verdict = decide(inc, cand, config=config).verdict
            if verdict in ("abort", "inconclusive"):
                return "abort", decisions
            if verdict == "promote":
                break
            if decisions >= max_decisions:
                return "wait", decisions
    return "promote", decisions


def gate_figures(args: argparse.Namespace, pool: np.ndarray, cov: np.ndarray | None, shares: tuple[float, ...],
                 per_week: int, say: Callable[[str], None], *,
                 margin: float = 0.0) -> dict[float, tuple[float, float, float, float]]:
    """Per lift: (share promoted within a week, share promoted by ``--max-decisions``, share aborted, median
    decisions to promote), with the shipped gate settings and non-inferiority ``margin``."""
    config = SequentialConfig(margin=margin)
    per_hour = max(per_week // (7 * 24), 1)
    out = {}
    for lift in (LIFT, 0.0, -LIFT):
        rng = np.random.default_rng([args.market_seed, int(round(lift * 1000)) + 100])
        runs = [gate_trial(rng, pool, cov, lift, shares=shares, per_hour=per_hour, max_decisions=args.max_decisions,
                           config=config) for _ in range(args.trials)]
        promoted = [n for v, n in runs if v == "promote"]
        week = sum(n <= per_week for n in promoted) / len(runs)
        out[lift] = (week, len(promoted) / len(runs), sum(v == "abort" for v, _ in runs) / len(runs),
                     float(np.median(promoted)) if promoted else math.nan)
        say(f"  {'adjusted' if cov is not None else 'plain   '} margin {margin:g} split "
            f"{'/'.join(f'{s:g}' for s in shares)} "
            f"lift {lift:+.0%}: within a week {week:.1%}, promoted {out[lift][1]:.1%}, aborted {out[lift][2]:.1%} "
            f"(of {args.trials}, to {args.max_decisions:,} decisions), median decisions to promote "
            f"{out[lift][3]:,.0f} ({out[lift][3] / per_week:.0f} weeks)")
    return out


def ceiling(args: argparse.Namespace, pool: np.ndarray, say: Callable[[str], None]) -> dict[str, float]:
    """Part 1 of the module docstring; returns the figures."""
    m = moments(pool)
    n, delta = m["n"], LIFT * m["mu"]
    say(f"pool: {n:,.0f} decisions a week at {args.hotels} {args.preset} hotels, booking probability "
        f"{m['p']:.3f}, net value per request mean {m['mu']:.2f} sd {math.sqrt(m['var']):.2f} (cv {m['cv']:.2f}); "
        f"the booking draw holds {m['within'] / m['var']:.1%} of the variance, the requests' differences "
        f"{1 - m['within'] / m['var']:.1%} (the most any covariate can remove)")
    fig = {"per_week": n, "power": oracle_power(delta, m["var"], n), "needed": oracle_needed(delta, m["var"]),
           "power_one": oracle_power(delta, m["var"], n, arms=1), "needed_one": oracle_needed(delta, m["var"], arms=1),
           "power_cov": oracle_power(delta, m["within"], n), "needed_cov": oracle_needed(delta, m["within"]),
           "power_pair": oracle_power(2 * delta, m["var"], n), "needed_pair": oracle_needed(2 * delta, m["var"])}
    say(f"ceiling, one look, known variance, alpha {ALPHA_ORACLE:g} one-sided, +{LIFT:.0%}: power in a week "
        f"{fig['power']:.1%} (two arms, even split); {fig['needed']:,.0f} decisions for {POWER_GOAL:.0%} "
        f"({fig['needed'] / n:.0f} weeks at {args.hotels} hotels)")
    say(f"  telling +{LIFT:.0%} from -{LIFT:.0%} (the goal's pair: promote one, never the other): power in a week "
        f"{fig['power_pair']:.1%}; {fig['needed_pair']:,.0f} decisions for {POWER_GOAL:.0%} "
        f"({fig['needed_pair'] / n:.0f} weeks)")
    say(f"  beyond any realisable test: incumbent mean known {fig['power_one']:.1%} "
        f"({fig['needed_one']:,.0f} for {POWER_GOAL:.0%}); perfect covariate {fig['power_cov']:.1%} "
        f"({fig['needed_cov']:,.0f} for {POWER_GOAL:.0%})")
    rng = np.random.default_rng([args.market_seed, 7])
    fig["sim_week"] = simulated_oracle_power(rng, pool, m, int(n), args.oracle_trials)
    fig["sim_needed"] = simulated_oracle_power(rng, pool, m, int(fig["needed"]), args.oracle_trials_large)
    say(f"  by simulation (Bernoulli draws from the pool): {fig['sim_week']:.1%} of {args.oracle_trials} trials "
        f"in a week; {fig['sim_needed']:.1%} of {args.oracle_trials_large} at {fig['needed']:,.0f} decisions")
    return fig


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--hotels", type=int, default=4)
    parser.add_argument("--preset", default="city")
    parser.add_argument("--market-seed", type=int, default=0)
    parser.add_argument("--pool", type=Path, default=None, help="cache of the pool (.npy), read when it exists")
    parser.add_argument("--model-noise", type=float, default=0.5, help="log-odds noise of the logged prediction")
    parser.add_argument("--max-decisions", type=int, default=4_000_000)
    parser.add_argument("--oracle-trials", type=int, default=4_000)
    parser.add_argument("--oracle-trials-large", type=int, default=200)
    parser.add_argument("--margins", nargs="+", type=float, default=[0.0, 0.03],
                        help="non-inferiority margins of the adjusted gate (the plain one runs at 0)")
    parser.add_argument("--splits", nargs="+", default=["0.5", "0.05,0.2"],
                        help="candidate shares of the stages, comma separated per design (0.05,0.2: canary, blend)")
    args = parser.parse_args(argv)

    def say(line: str) -> None:
        print(f"[{datetime.now(tz=UTC):%H:%M:%S}] {line}", flush=True)

    say(f"load average {' '.join(f'{x:.2f}' for x in __import__('os').getloadavg())}")
    pool = load_pool(args, say)
    fig = ceiling(args, pool, say)
    cov = covariate(pool, args.model_noise, args.market_seed)
    for split in args.splits:
        shares = tuple(float(s) for s in split.split(","))
        gate_figures(args, pool, None, shares, int(fig["per_week"]), say)
        for margin in args.margins:
            gate_figures(args, pool, cov, shares, int(fig["per_week"]), say, margin=margin)
    say(f"load average {' '.join(f'{x:.2f}' for x in __import__('os').getloadavg())}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
