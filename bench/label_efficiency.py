"""Label efficiency of active sampling vs random sampling.

A stream of labelled offers arrives in periods; each period a sampler may
select ``per_period`` of them for training (the rest are never labelled for
the model). The active strategy is :class:`UncertaintySampler` (``measure="std"``), fed the
current model's probability. The learner is a weighted logistic regression (Newton) refitted
after every period on everything selected so far, with the samplers'
importance weights. The figure of merit is the number of labels a strategy
needs to reach the log-loss that random sampling reaches with its full budget
(test log-loss on a fresh sample, curves averaged over seeds).

Two data sets:

* ``synthetic``: steep logistic demand (slope 6 on a linear score in 8
  features), where most offers are near-certain and the boundary matters;
* ``simulator``: offers from :func:`events.simulator.frames.training_frame`
  (the market's true booking probability, mostly 5-30%).

Writes ``reports/label_efficiency.png`` and prints the figures.

Usage: ``.venv/bin/python bench/label_efficiency.py [--seeds 5] [--data synthetic simulator]``
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from feedback.samplers import Candidate, RandomSampler, Sampler, SamplerConfig, UncertaintySampler

T0 = datetime(2026, 1, 1, tzinfo=UTC)
# Per data set: ridge of the learner and random labels before sampling starts, the same for both strategies.
# The simulator's 37 sparse, heavy-tailed features overfit without a strong ridge and a larger cold-start set.
SETTINGS: dict[str, tuple[float, int]] = {"synthetic": (1e-2, 50), "simulator": (10.0, 200)}
FLOOR = 0.01  # lowest selection probability: keeps weights <= 100 while spending ~20% of a 5% budget on it
REPORT = Path(__file__).resolve().parents[1] / "reports" / "label_efficiency.png"


def synthetic(n: int, seed: int, *, slope: float = 6.0, dim: int = 8) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    beta = np.random.default_rng(7).normal(size=dim)
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, dim))
    p = 1 / (1 + np.exp(-(slope * (x @ beta) / np.linalg.norm(beta) + 0.5)))
    return x, (rng.random(n) < p).astype(float), p


def simulator(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from events.catalog import ALL_FEATURES, REQUEST_FEATURES
    from events.simulator.config import MarketConfig
    from events.simulator.frames import training_frame
    from events.simulator.market import Market

    frame = training_frame(Market(MarketConfig(hotels=5, seed=4)), n=n, seed=seed)
    cols = [c for c in (*ALL_FEATURES, *REQUEST_FEATURES) if c in frame.columns]
    x = frame[cols].to_numpy(dtype=float, na_value=np.nan)
    x = np.column_stack([x, np.log(frame["price"].to_numpy(dtype=float))])
    return x, frame["booked"].to_numpy(dtype=float), frame["true_prob"].to_numpy(dtype=float)


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
    need: dict[str, float]
    final: dict[str, float]
    curves: dict[str, list[tuple[int, float]]]

    @property
    def saving(self) -> float:
        return 1 - self.need["uncertainty"] / self.need["random"]


def run(name: str, seeds: int, *, n_stream: int, chunk: int, per_period: int) -> Result:
    data = synthetic if name == "synthetic" else simulator
    x, y, _ = data(n_stream, 1)
    xt, yt, pt = data(n_stream // 2, 2)
    x, xt = standardise(x, xt)
    l2, init = SETTINGS[name]
    mean_curves: dict[str, list[tuple[int, float]]] = {}
    for strategy, cls, c in (("random", RandomSampler, 1.0), ("uncertainty", UncertaintySampler, 4.0)):
        runs = []
        for seed in range(seeds):
            cfg = SamplerConfig(c=c, floor=FLOOR, budget_per_period=per_period, period=timedelta(days=1), seed=seed)
            runs.append(curve(cls(cfg), x, y, xt, yt, seed=seed, chunk=chunk, init=init, l2=l2))
        counts = [n for n, _ in runs[0]]
        losses = np.mean([[v for _, v in r] for r in runs], axis=0)
        mean_curves[strategy] = list(zip(counts, losses.tolist(), strict=True))
    target = mean_curves["random"][-1][1]
    need = {k: labels_to_reach(v, target) for k, v in mean_curves.items()}
    final = {k: v[-1][1] for k, v in mean_curves.items()}
    return Result(name, log_loss(yt, pt), target, need, final, mean_curves)


def plot(results: list[Result], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4.2), squeeze=False)
    for ax, res in zip(axes[0], results, strict=True):
        for strategy, points in res.curves.items():
            n, v = zip(*points, strict=True)
            ax.plot(n, np.asarray(v) - res.bayes, label=strategy)
        ax.axhline(res.target - res.bayes, color="grey", ls=":", label="random, full budget")
        ax.set_yscale("log")
        ax.set_xlabel("labels used")
        ax.set_ylabel("test log-loss above Bayes")
        saved = f"{res.saving:.0%} fewer labels" if np.isfinite(res.saving) else "target not reached"
        ax.set_title(f"{res.name}: uncertainty sampling, {saved}")
        ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


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
    print(f"{'data':<10} {'bayes':>7} {'target':>7} {'random':>7} {'active':>7} {'fewer':>6}  excess@full rnd/act")
    for r in results:
        active = f"{r.need['uncertainty']:7.0f}" if np.isfinite(r.need["uncertainty"]) else "  never"
        fewer = f"{r.saving:6.0%}" if np.isfinite(r.saving) else "   n/a"
        excess = f"{r.final['random'] - r.bayes:.4f}/{r.final['uncertainty'] - r.bayes:.4f}"
        print(f"{r.name:<10} {r.bayes:7.4f} {r.target:7.4f} {r.need['random']:7.0f} {active} {fewer}  {excess}")
    plot(results, args.out)
    print(f"learning curves: {args.out}")


if __name__ == "__main__":
    main()
