"""Forecasting autoscaler against a reactive CPU autoscaler, replayed on one load trace.

The trace (``infra.autoscale_replay.diurnal_trace``): ``--days`` of one load per minute with a
daily cycle (250 -> 1,200 req/s), 4% noise, three sudden spikes a day (x2-3 within a minute,
5-20 minutes) and one promotion ramp a day (+80-150% over 20 minutes). Both policies run the
light tier (100 req/s per replica, p99 objective 200 ms, a replica serves 3 minutes after it is
asked for) on the same simulated cluster:

* ``forecast``: ``pricestream autoscale``'s decision (``infra.autoscaler.decide``) on the online
  forecast of the next 5 minutes (river's Holt linear trend; ``--forecaster snarimax`` for river's
  SNARIMAX), with the N+1 spare; ``forecast-no-spare`` is the same without it (ablation);
* ``reactive-cpu``: Kubernetes' HPA rule on CPU at a 60% target (scale down after 5 minutes).

Prints minutes above the objective and replica-minutes for each, the ratios against the reactive
policy, the forecasters' 5-minute-ahead error against persistence, and writes ``--png``.

    .venv/bin/python bench/autoscale.py --days 3 --seed 7
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from infra.autoscale_replay import (
    SLO_MS,
    ForecastPolicy,
    ReactiveCpuPolicy,
    ReplayResult,
    diurnal_trace,
    replay,
)
from infra.autoscaler import LoadForecaster, TierPolicy

REPLICA_RPS = 100.0


def forecast_error(trace: np.ndarray, kind: str, horizon: int = 5) -> float:
    """Mean absolute error of the load ``horizon`` minutes ahead (after the warm-up)."""
    forecaster = LoadForecaster(kind, horizon=horizon)  # type: ignore[arg-type]
    errors = []
    for t, load in enumerate(trace[:-horizon]):
        forecaster.learn_one(float(load))
        if t >= 60:
            errors.append(abs(forecaster.forecast()[-1] - trace[t + horizon]))
    return float(np.mean(errors))


def plot(trace: np.ndarray, results: list[ReplayResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hours = np.arange(trace.size) / 60.0
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(12, 7), sharex=True)
    top.plot(hours, trace / REPLICA_RPS, color="0.6", lw=0.8, label="load / replica capacity")
    for r in results:
        top.step(hours, r.replicas, where="post", lw=1.0, label=f"{r.policy} replicas")
    top.set_ylabel("replicas")
    top.legend(loc="upper left", fontsize=8)
    for r in results:
        over = np.asarray(r.latency_ms) > SLO_MS
        bottom.plot(hours, np.cumsum(over), lw=1.2, label=f"{r.policy}: {int(over.sum())} min")
    bottom.set_ylabel(f"minutes above p99 {SLO_MS:.0f} ms (cumulative)")
    bottom.set_xlabel("hours")
    bottom.legend(loc="upper left", fontsize=8)
    fig.suptitle("forecasting autoscaler vs reactive CPU HPA, same trace and cluster model")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--forecaster", choices=("holt", "snarimax"), default="holt")
    parser.add_argument("--png", type=Path, default=Path("reports/autoscale.png"))
    args = parser.parse_args(argv)

    trace = diurnal_trace(days=args.days, seed=args.seed)
    tier = TierPolicy(name="light", deployment="pricing-light", replica_rps=REPLICA_RPS)
    started = time.perf_counter()
    results = [
        replay(trace, ForecastPolicy(tier, kind=args.forecaster)),
        replay(trace, ForecastPolicy(tier.model_copy(update={"spare": 0}), kind=args.forecaster)),
        replay(trace, ReactiveCpuPolicy(tier)),
    ]
    results[1].policy = "forecast-no-spare"
    reactive = results[-1]
    print(f"trace: {trace.size} minutes ({args.days} days, seed {args.seed}), load {trace.min():.0f}-"
          f"{trace.max():.0f} req/s; replay took {time.perf_counter() - started:.1f} s")
    print(f"{'policy':<20}{'min > SLO':>10}{'replica-min':>13}{'min replicas':>14}"
          f"{'SLO ratio':>11}{'cost ratio':>12}")
    for r in results:
        slo_ratio = r.minutes_over_slo / reactive.minutes_over_slo if reactive.minutes_over_slo else float("nan")
        print(f"{r.policy:<20}{r.minutes_over_slo:>10}{r.replica_minutes:>13}{min(r.replicas):>14}"
              f"{slo_ratio:>11.2f}{r.replica_minutes / reactive.replica_minutes:>12.3f}")
    naive = float(np.mean(np.abs(trace[65:] - trace[60:-5])))
    for kind in ("holt", "snarimax"):
        error = forecast_error(trace, kind)
        print(f"5-minute-ahead error, {kind}: {error:.1f} req/s ({error / naive:.2f} x persistence's {naive:.1f})")
    plot(trace, results, args.png)
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
