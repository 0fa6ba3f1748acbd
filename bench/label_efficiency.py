"""Label efficiency of active sampling vs random sampling.

A stream of labelled offers arrives in periods; each period a sampler may
select ``per_period`` of them for training (the rest are never labelled for
the model). The active strategies are :class:`FisherSampler` (outcome variance
times leverage under the current model, on the learner's own design) and
:class:`UncertaintySampler` (``measure="std"``), both fed the current model's
probability. Every strategy gets the same budget, the same random cold-start
labels, the same learner and the same seeds: a weighted logistic regression
(Newton, ridge) refitted after every period on everything selected so far, with
the samplers' importance weights ``1 / q``. The figure of merit is the number of
labels a strategy needs to reach the log-loss that random sampling reaches with
its full budget (test log-loss on a fresh sample, curves averaged over seeds).

``bound`` is the most any importance-weighted sampler can save at this budget
for this learner, asymptotically: ``1 - E[g]^2 / E[g^2]`` with ``g`` the Fisher
sampler's score under the true probabilities on the test set
(:meth:`FisherSampler.efficiency`); the excess log-loss of a weighted fit is
``E[g^2 / q] / 2n``, so no ``q`` beats ``q ~ g``.

Two data sets:

* ``synthetic``: steep logistic demand (slope 6 on a linear score in 8
  features), where most offers are near-certain and the boundary matters;
* ``simulator``: offers from :func:`market.frames.training_frame`
  (the market's true booking probability, mostly 5-30%), with the inputs a
  logistic demand model needs: log price relative to the room's base rate and
  to the competitors' median (missing flagged), log base rate, log counts,
  occupancy, lead time, and one-hot stay weekday and channel.

Writes ``reports/label_efficiency.png`` and prints the figures.

Usage: ``.venv/bin/python bench/label_efficiency.py [--seeds 5] [--data synthetic simulator]``
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from feedback.fisher import FisherSampler
from feedback.samplers import Candidate, RandomSampler, Sampler, SamplerConfig, UncertaintySampler

T0 = datetime(2026, 1, 1, tzinfo=UTC)
# Per data set: ridge of the learner and random labels before sampling starts, the same for both strategies.
# The simulator's ~40 inputs need a larger cold-start set; its ridge gave random sampling its lowest final
# log-loss among 0.1, 1, 3, 10, 30, 100, 300, 1000 (the data are noisy: 5-30% booking probabilities).
SETTINGS: dict[str, tuple[float, int]] = {"synthetic": (1e-2, 50), "simulator": (300.0, 200)}
ACTIVE = ("fisher", "uncertainty")
FLOOR = 0.01  # lowest selection probability: keeps weights <= 100 while spending ~20% of a 5% budget on it
REPORT = Path(__file__).resolve().parents[1] / "reports" / "label_efficiency.png"


def synthetic(n: int, seed: int, *, slope: float = 6.0, dim: int = 8) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    beta = np.random.default_rng(7).normal(size=dim)
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, dim))
    p = 1 / (1 + np.exp(-(slope * (x @ beta) / np.linalg.norm(beta) + 0.5)))
    return x, (rng.random(n) < p).astype(float), p


def simulator(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from events.catalog import ALL_FEATURES
    from market.config import MarketConfig
    from market.frames import training_frame
    from market.market import Market

    f = training_frame(Market(MarketConfig(hotels=5, seed=4)), n=n, seed=seed)
    price = f["price"].to_numpy(dtype=float)
    comp = np.log(price / f["comp_rate_median_24h"].to_numpy(dtype=float, na_value=np.nan))
    cols = [np.log(price / f["base_rate"].to_numpy(dtype=float)), np.nan_to_num(comp), np.isnan(comp) * 1.0]
    cols += [np.log(f["base_rate"].to_numpy(dtype=float)), f["occupancy"].to_numpy(dtype=float, na_value=0.0)]
    logged = [c for c in ALL_FEATURES if c not in ("occupancy", "comp_rate_median_24h", "comp_rate_min_24h")]
    for name in (*logged, "lead_time_days", "nights"):
        v = f[name].to_numpy(dtype=float, na_value=np.nan)
        cols.append(np.nan_to_num(np.sign(v) * np.log1p(np.abs(v))))
    cols += [(f["stay_dow"].to_numpy() == d) * 1.0 for d in range(6)]
    cols += [(f["channel_code"].to_numpy() == c) * 1.0 for c in range(5)]
    return np.column_stack(cols), f["booked"].to_numpy(dtype=float), f["true_prob"].to_numpy(dtype=float)


def standardise(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean, std = np.nanmean(train, axis=0), np.nanstd(train, axis=0)
    std[~np.isfinite(std) | (std == 0)] = 1.0
    mean[~np.isfinite(mean)] = 0.0
    def f(a: np.ndarray) -> np.ndarray:
        return np.nan_to_num((a - mean) / std, nan=0.0)
    return f(train), f(test)


def fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, *, l2: float = 1e-2) -> np.ndarray:
    xb = np.column_stack([x, np.ones(len(x))])
    b = np.zeros(xb.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-np.clip(xb @ b, -30, 30)))
        grad = xb.T @ (w * (p - y)) + l2 * b
        hess = (xb * (w * p * (1 - p))[:, None]).T @ xb + l2 * np.eye(len(b))
        step = np.linalg.solve(hess, grad)
        b -= step
        if np.abs(step).max() < 1e-8:
            break
    return b


def predict(b: np.ndarray, x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-np.clip(np.column_stack([x, np.ones(len(x))]) @ b, -30, 30)))


def log_loss(y: np.ndarray, p: np.ndarray) -> float:
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean())


def curve(
    sampler: Sampler,
    x: np.ndarray,
    y: np.ndarray,
    xt: np.ndarray,
    yt: np.ndarray,
    *,
    seed: int,
    chunk: int,
    init: int,
    l2: float,
) -> list[tuple[int, float]]:
    order = np.random.default_rng(seed).permutation(len(y))
    idx, w = list(order[:init]), [1.0] * init  # a small random seed set, as after a cold start
    b = fit(x[idx], y[idx], np.asarray(w), l2=l2)
    points = [(len(idx), log_loss(yt, predict(b, xt)))]
    rest = order[init:]
    for period, start in enumerate(range(0, len(rest), chunk)):
        ids = rest[start : start + chunk]
        probs = predict(b, x[ids])
        at = T0 + timedelta(days=period)
        pool = [Candidate(key=str(i), event_time=at, prob=float(p)) for i, p in zip(ids, probs, strict=True)]
        for sel in sampler.select(pool):
            idx.append(int(sel.candidate.key))
            w.append(sel.weight)
        b = fit(x[idx], y[idx], np.asarray(w), l2=l2)
        points.append((len(idx), log_loss(yt, predict(b, xt))))
    return points


def labels_to_reach(points: list[tuple[int, float]], target: float) -> float:
    """First label count where the curve reaches ``target`` (linear between checkpoints); inf if never."""
    for (n0, v0), (n1, v1) in zip(points, points[1:], strict=False):
        if v1 <= target:
            return n1 if v0 == v1 or v0 <= target else n0 + (n1 - n0) * (v0 - target) / (v0 - v1)
    return float("inf")


@dataclass(frozen=True)
class Result:
    name: str
    bayes: float
    target: float
    bound: float
    need: dict[str, float]
    final: dict[str, float]
    curves: dict[str, list[tuple[int, float]]]

    def saving(self, strategy: str) -> float:
        return 1 - self.need[strategy] / self.need["random"]


def make(strategy: str, cfg: SamplerConfig, x: np.ndarray) -> Sampler:
    if strategy == "random":
        return RandomSampler(cfg)
    if strategy == "uncertainty":
        return UncertaintySampler(cfg.model_copy(update={"c": 4.0}))
    return FisherSampler(cfg, embed=lambda cand: x[int(cand.key)])  # the learner's own design


def bound(x: np.ndarray, p: np.ndarray) -> float:
    """``1 - E[g]^2 / E[g^2]`` under the true probabilities: the best any weighted sampler can save."""
    sampler = FisherSampler(embed=lambda cand: x[int(cand.key)])
    pool = [Candidate(key=str(i), event_time=T0, prob=float(v)) for i, v in enumerate(p)]
    sampler.observe(pool)
    return 1 - sampler.efficiency(pool)


def run(name: str, seeds: int, *, n_stream: int, chunk: int, per_period: int) -> Result:
    data = synthetic if name == "synthetic" else simulator
    x, y, _ = data(n_stream, 1)
    xt, yt, pt = data(n_stream // 2, 2)
    x, xt = standardise(x, xt)
    l2, init = SETTINGS[name]
    mean_curves: dict[str, list[tuple[int, float]]] = {}
    for strategy in ("random", *ACTIVE):
        runs = []
        for seed in range(seeds):
            cfg = SamplerConfig(floor=FLOOR, budget_per_period=per_period, period=timedelta(days=1), seed=seed)
            runs.append(curve(make(strategy, cfg, x), x, y, xt, yt, seed=seed, chunk=chunk, init=init, l2=l2))
        counts = [n for n, _ in runs[0]]
        losses = np.mean([[v for _, v in r] for r in runs], axis=0)
        mean_curves[strategy] = list(zip(counts, losses.tolist(), strict=True))
    target = mean_curves["random"][-1][1]
    need = {k: labels_to_reach(v, target) for k, v in mean_curves.items()}
    final = {k: v[-1][1] for k, v in mean_curves.items()}
    return Result(name, log_loss(yt, pt), target, bound(xt, pt), need, final, mean_curves)


def plot(results: list[Result], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(6.5 * len(results), 4.4), squeeze=False)
    for ax, res in zip(axes[0], results, strict=True):
        for strategy, points in res.curves.items():
            n, v = zip(*points, strict=True)
            saved = "" if strategy == "random" else f" ({_fewer(res, strategy).strip()} fewer)"
            ax.plot(n, np.asarray(v) - res.bayes, label=f"{strategy}{saved}")
        ax.axhline(res.target - res.bayes, color="grey", ls=":", label="random, full budget")
        ax.set_yscale("log")
        ax.set_xlabel("labels used")
        ax.set_ylabel("test log-loss above Bayes")
        ax.set_title(f"{res.name}: labels to reach random's final loss (bound {res.bound:.0%})")
        ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def _fewer(r: Result, strategy: str) -> str:
    return f"{r.saving(strategy):6.0%}" if np.isfinite(r.saving(strategy)) else "   n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--data", nargs="+", default=["synthetic", "simulator"], choices=["synthetic", "simulator"])
    parser.add_argument("--stream", type=int, default=40_000, help="offers in the stream")
    parser.add_argument("--chunk", type=int, default=500, help="offers per period")
    parser.add_argument("--per-period", type=int, default=25, help="labels per period (budget)")
    parser.add_argument("--out", type=Path, default=REPORT)
    args = parser.parse_args()
    results = [
        run(name, args.seeds, n_stream=args.stream, chunk=args.chunk, per_period=args.per_period)
        for name in args.data
    ]
    print("labels needed to reach random sampling's log-loss at its full budget (mean of seeds)")
    head = "".join(f" {s:>8} {'fewer':>6}" for s in ACTIVE)
    print(f"{'data':<10} {'bayes':>7} {'target':>7} {'random':>7}{head} {'bound':>6}  excess@full " + "/".join(
        ("random", *ACTIVE)))
    for r in results:
        cells = "".join(
            (f" {r.need[s]:8.0f}" if np.isfinite(r.need[s]) else "    never") + f" {_fewer(r, s)}" for s in ACTIVE
        )
        excess = "/".join(f"{r.final[s] - r.bayes:.4f}" for s in ("random", *ACTIVE))
        print(f"{r.name:<10} {r.bayes:7.4f} {r.target:7.4f} {r.need['random']:7.0f}{cells} {r.bound:6.0%}  {excess}")
    plot(results, args.out)
    print(f"learning curves: {args.out}")


if __name__ == "__main__":
    main()
