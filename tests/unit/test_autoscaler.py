"""The forecasting autoscaler: the seed's thresholds, N+1 on a replayed trace, scale-out ahead of a ramp."""

from __future__ import annotations

import numpy as np
import pytest

from infra.autoscale_replay import ForecastPolicy, diurnal_trace, replay
from infra.autoscaler import LoadForecaster, TierPolicy, decide

LIGHT = TierPolicy(name="light", deployment="pricing-light", replica_rps=100.0)


def test_the_seed_thresholds_decide_out_in_and_hold() -> None:
    assert decide(LIGHT, replicas=4, load=200.0, forecast_peak=280.0).action == "hold"  # 1.4x: not a ramp
    out = decide(LIGHT, replicas=4, load=200.0, forecast_peak=400.0)
    assert (out.action, out.desired) == ("out", 7) and "forecast peak 400" in out.reason  # ceil(400/70) + 1
    assert decide(LIGHT, replicas=10, load=250.0, forecast_peak=260.0).action == "in"  # 25% of capacity
    assert decide(LIGHT, replicas=10, load=350.0, forecast_peak=350.0).action == "hold"  # 35%: not under 30%
    cooling = decide(LIGHT, replicas=10, load=100.0, forecast_peak=100.0, since_change=2)
    assert cooling.action == "hold" and "cooling down" in cooling.reason
    heavy = TierPolicy(name="heavy", deployment="heavy", replica_rps=20.0, fixed=2)
    assert decide(heavy, replicas=2, load=500.0, forecast_peak=900.0).desired == 2
    assert decide(heavy, replicas=1, load=0.0, forecast_peak=0.0).desired == 2


def test_the_lag_to_drain_counts_as_load() -> None:
    assert LIGHT.load(100.0, lag=6_000.0) == pytest.approx(200.0)  # 6,000 records to drain within 60 s
    with pytest.raises(ValueError, match="min_replicas"):
        TierPolicy(name="x", deployment="x", replica_rps=1.0, min_replicas=1)


def test_replicas_never_fall_below_n_plus_one_on_the_diurnal_trace() -> None:
    trace = diurnal_trace(days=2, seed=11)
    tiny = LIGHT.model_copy(update={"replica_rps": 2_000.0})  # a load that one replica could carry alone
    for tier in (LIGHT, tiny):
        result = replay(trace, ForecastPolicy(tier))
        assert min(result.replicas) >= 2
        assert min(result.ready) >= 2
    assert min(replay(trace, ForecastPolicy(tiny)).replicas) == 2  # the floor binds, it is not only loose


def test_the_forecaster_scales_out_ahead_of_a_ramp() -> None:
    # ten replicas at 30% after a busy hour, then a promotion: +60 req/s per minute
    loads = np.concatenate([300.0 + np.random.default_rng(3).normal(0.0, 5.0, 60), 300.0 + 60.0 * np.arange(1, 21)])
    forecaster, replicas = LoadForecaster(horizon=5), 10
    first = None
    for minute, load in enumerate(loads):
        forecaster.learn_one(float(load))
        decision = decide(LIGHT, replicas=replicas, load=float(load), forecast_peak=forecaster.peak(), since_change=0)
        if decision.action == "out":
            first = (minute, decision)
            break
    assert first is not None
    minute, decision = first
    assert minute >= 60 and decision.reason.startswith("forecast peak")
    assert LIGHT.needed(loads[minute]) <= replicas  # the load alone did not need more yet: this is ahead of it
    assert loads[minute] / (replicas * LIGHT.replica_rps) < 0.6 * 1.1  # and a CPU HPA at 60% would not act yet
    # the reactive rule acts later on the same ramp: when the load itself needs more than ten replicas
    assert minute < next(m for m, v in enumerate(loads) if LIGHT.needed(v) > replicas)


def test_a_diverged_forecast_falls_back_to_the_last_load() -> None:
    forecaster = LoadForecaster(horizon=5)
    for value in [100.0] * 40 + [1e12]:
        forecaster.learn_one(value)
    assert all(np.isfinite(forecaster.forecast()))
