"""The forecasting autoscaler's core: an online load forecaster and the per-tier scaling decision.

Pure logic, no I/O: ``pricestream autoscale`` feeds it the request rate and consumer lag it
reads from the services' ``/metrics`` and applies its decisions through the Kubernetes API;
``bench/autoscale.py`` replays it on a load trace against a reactive CPU policy.

Each minute, per tier:

* :class:`LoadForecaster` learns the load (requests/s, plus the consumer lag to drain) and
  forecasts the next ``horizon`` minutes with an online river model: Holt's linear trend by default
  (level and slope: a ramp is seen to go on), river's SNARIMAX on request (its SGD regressor
  diverged on the bench's spiky trace, and degenerates on a noiseless ramp: see ``docs/scaling.md``);
* :func:`decide` compares the forecast peak and the current load with the tier's capacity:
  **out** when the forecast exceeds ``scale_out_ratio`` (1.5) times the current load and needs
  more replicas than run, or when the current load already needs more; **in**, when the load is
  under ``scale_in_load`` (30%) of capacity, ``scale_in_cooldown`` minutes after the last change,
  straight to the replicas that the load and its forecast need at the target utilisation (cost:
  a replica kept past a spike is paid for every minute); **hold** otherwise. A tier never goes
  below ``min_replicas`` and keeps ``spare`` replicas beyond what the load needs (N+1: one replica
  can fail and the rest carry the load, so a failure does not cascade), and a fixed
  tier (heavy: two) stays at its size. Every decision carries its reason.

Example:
    >>> policy = TierPolicy(name="light", deployment="pricing-light", replica_rps=100.0)
    >>> d = decide(policy, replicas=2, load=80.0, forecast_peak=200.0)
    >>> d.action, d.desired  # 200 req/s at 70% of 100 per replica is 3, plus the N+1 spare
    ('out', 4)
    >>> d.reason
    'forecast peak 200 req/s in 5 min > 1.5 x current 80: 4 replicas at 70% target + 1 spare (capacity 200 -> 400)'
    >>> decide(policy, replicas=5, load=30.0, forecast_peak=35.0).desired
    2
    >>> decide(policy, replicas=2, load=5.0, forecast_peak=5.0).reason
    'hold at 2: the N+1 floor (load 5 req/s is 2% of capacity 200)'
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Action = Literal["out", "in", "hold"]


class TierPolicy(BaseModel):
    """How one serving tier scales.

    Attributes:
        name: the tier (``rules``, ``light``, ``heavy``, ``stream``).
        deployment: its Kubernetes Deployment.
        replica_rps: requests per second one replica serves at full utilisation.
        target_utilisation: the share of a replica's capacity a sized tier aims at (headroom for noise).
        min_replicas: the N+1 floor.
        max_replicas: the ceiling (cost).
        fixed: a tier that always runs exactly this many replicas (the heavy tier: 2).
        scale_out_ratio: scale out when the forecast peak exceeds this multiple of the current load.
        scale_in_load: scale in when the load is under this share of capacity.
        scale_in_cooldown: minutes since the last change before a scale-in (cost-aware, no flapping).
        lag_drain_s: the consumer lag counts as load that must drain within this many seconds.
        spare: replicas kept beyond what the load needs (N+1: a failed replica's load has somewhere to go).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    deployment: str
    replica_rps: float = Field(gt=0)
    target_utilisation: float = Field(default=0.7, gt=0, le=1)
    min_replicas: int = Field(default=2, ge=2)
    max_replicas: int = Field(default=50, ge=2)
    fixed: int | None = Field(default=None, ge=2)
    scale_out_ratio: float = Field(default=1.5, gt=1)
    scale_in_load: float = Field(default=0.3, gt=0, lt=1)
    scale_in_cooldown: int = Field(default=5, ge=0)
    lag_drain_s: float = Field(default=60.0, gt=0)
    spare: int = Field(default=1, ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> TierPolicy:
        if self.min_replicas > self.max_replicas:
            msg = f"field 'min_replicas': got {self.min_replicas}, expected <= max_replicas ({self.max_replicas})"
            raise ValueError(msg)
        return self

    def load(self, rate: float, lag: float = 0.0) -> float:
        """The load to serve: the request rate plus the lag that must drain within ``lag_drain_s``."""
        return max(0.0, rate) + max(0.0, lag) / self.lag_drain_s

    def needed(self, load: float) -> int:
        """Replicas that serve ``load`` at the target utilisation plus the spare, inside the floor and the ceiling."""
        raw = math.ceil(load / (self.replica_rps * self.target_utilisation) - 1e-9) + self.spare
        return min(self.max_replicas, max(self.min_replicas, raw))


@dataclass(frozen=True)
class Decision:
    """What to do with one tier, and why."""

    tier: str
    deployment: str
    action: Action
    current: int
    desired: int
    load: float
    forecast_peak: float
    reason: str


def decide(policy: TierPolicy, *, replicas: int, load: float, forecast_peak: float,
           since_change: int | None = None) -> Decision:
    """Scale out, in or hold ``policy``'s tier (see the module docstring).

    Args:
        policy: the tier's policy.
        replicas: replicas running now.
        load: current load (requests/s, lag included: :meth:`TierPolicy.load`).
        forecast_peak: the highest forecast load over the horizon.
        since_change: minutes since this tier last changed size (``None``: long ago).
    """
    def made(action: Action, desired: int, reason: str) -> Decision:
        return Decision(policy.name, policy.deployment, action, replicas, desired, load, forecast_peak, reason)

    if policy.fixed is not None:
        if replicas != policy.fixed:
            return made("out" if policy.fixed > replicas else "in", policy.fixed,
                        f"a fixed tier of {policy.fixed} replicas (runs {replicas})")
        return made("hold", replicas, f"hold at {replicas}: a fixed tier")
    capacity = replicas * policy.replica_rps
    if replicas < policy.min_replicas:
        return made("out", policy.min_replicas, f"below the N+1 floor of {policy.min_replicas} (runs {replicas})")
    wanted = policy.needed(max(load, forecast_peak))
    if wanted > replicas and forecast_peak > policy.scale_out_ratio * load:
        return made("out", wanted, f"forecast peak {forecast_peak:.0f} req/s in 5 min > {policy.scale_out_ratio:g} x "
                    f"current {load:.0f}: {wanted} replicas at {policy.target_utilisation:.0%} target + "
                    f"{policy.spare} spare (capacity {capacity:.0f} -> {wanted * policy.replica_rps:.0f})")
    now = policy.needed(load)
    if now > replicas:
        return made("out", max(now, wanted), f"load {load:.0f} req/s needs {max(now, wanted)} replicas at "
                    f"{policy.target_utilisation:.0%} target (capacity {capacity:.0f})")
    share = load / capacity if capacity else 0.0
    smaller = max(policy.min_replicas, wanted)  # cost-aware: straight to what the load and its forecast need
    if share < policy.scale_in_load and replicas > policy.min_replicas:
        cooling = since_change is not None and since_change < policy.scale_in_cooldown
        fits = smaller < replicas
        if not cooling and fits:
            return made("in", smaller, f"load {load:.0f} req/s is {share:.0%} of capacity {capacity:.0f} "
                        f"(< {policy.scale_in_load:.0%}) and the forecast peak {forecast_peak:.0f} fits {smaller}")
        why = f"cooling down ({since_change} of {policy.scale_in_cooldown} min)" if cooling else \
            f"the forecast peak {forecast_peak:.0f} needs {policy.needed(forecast_peak)}"
        return made("hold", replicas, f"hold at {replicas}: under {policy.scale_in_load:.0%} load but {why}")
    if replicas == policy.min_replicas and share < policy.scale_in_load:
        return made("hold", replicas, f"hold at {replicas}: the N+1 floor (load {load:.0f} req/s is {share:.0%} "
                    f"of capacity {capacity:.0f})")
    return made("hold", replicas, f"hold at {replicas}: load {load:.0f} req/s is {share:.0%} of capacity "
                f"{capacity:.0f}, forecast peak {forecast_peak:.0f}")


class LoadForecaster:
    """An online forecaster of a tier's load, one observation per step (a minute).

    Args:
        kind: ``holt`` (river's Holt linear trend: level and slope, so it sees a ramp go on) or
            ``snarimax`` (river's SNARIMAX, p=3 d=1 q=1, over a standardised linear regression).
        horizon: steps forecast ahead.

    Example:
        >>> f = LoadForecaster(horizon=5)
        >>> for t in range(120):
        ...     f.learn_one(100.0 + 2.0 * t)  # a ramp of 2 req/s per minute
        >>> round(f.peak(), -1) > 340  # it sees the ramp go on past the last value (338)
        True
    """

    def __init__(self, kind: Literal["snarimax", "holt"] = "holt", *, horizon: int = 5) -> None:
        from river import linear_model, optim, preprocessing, time_series

        self.kind = kind
        self.horizon = horizon
        self.seen = 0
        self._scale: float | None = None
        self._last = 0.0
        self._peak_seen = 0.0
        if kind == "snarimax":
            regressor = preprocessing.StandardScaler() | linear_model.LinearRegression(
                intercept_init=0.0, optimizer=optim.SGD(0.01), intercept_lr=0.0)
            self._model: time_series.base.Forecaster = time_series.SNARIMAX(p=3, d=1, q=1, regressor=regressor)
        elif kind == "holt":
            self._model = time_series.HoltWinters(alpha=HOLT_ALPHA, beta=HOLT_BETA)
        else:
            msg = f"field 'kind': got {kind!r}, expected 'snarimax' or 'holt'"
            raise ValueError(msg)

    def learn_one(self, load: float) -> None:
        """Learn the load of one step."""
        if self._scale is None:  # the model learns values of order one: scale by the first load seen
            self._scale = max(abs(load), 1.0)
        self._model.learn_one(load / self._scale)
        self._last = load
        self.seen += 1

    def forecast(self) -> list[float]:
        """The next ``horizon`` loads (the last one repeated until the model has seen enough steps)."""
        if self.seen < WARMUP_STEPS or self._scale is None:
            return [self._last] * self.horizon
        values = [max(0.0, v * self._scale) for v in self._model.forecast(horizon=self.horizon)]
        self._peak_seen = max(self._peak_seen, self._last)
        if not all(math.isfinite(v) and v <= DIVERGED * self._peak_seen for v in values):
            return [self._last] * self.horizon  # a diverged model (SNARIMAX's SGD on spikes) must not scale a cluster
        return values

    def peak(self) -> float:
        """The highest forecast load over the horizon."""
        return max(self.forecast())


HOLT_ALPHA = 0.8
HOLT_BETA = 0.5
"""Holt's smoothing of level and slope. The seed's rule (forecast > 1.5 x current load) fires only when the
5-minute forecast grows by more than half, so the slope must be learnt within a few minutes of a ramp's start:
with 0.3 / 0.1 a +20%-per-minute promotion ramp was caught by the load itself before the forecast (minute 5
of the ramp), with 0.8 / 0.5 the forecast catches it at minute 2; on the bench's trace both cost the same
replica-minutes within 3%."""
DIVERGED = 4.0
"""A forecast above this multiple of the highest load seen is a diverged model, not a forecast."""
WARMUP_STEPS = 30
"""Steps before the forecast is trusted: level and slope (or SNARIMAX's lags) need a few dozen to settle."""
