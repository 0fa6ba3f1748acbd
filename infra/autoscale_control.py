"""The forecasting autoscaler's adapters: Prometheus ``/metrics`` in, the Kubernetes scale subresource out.

:class:`Controller` runs one step per interval: for each tier it scrapes every ``/metrics`` URL
of the tier's pods, turns the counters into a rate (decisions per second, or stream records per
second) and adds the consumer lag (``pricestream_stream_consumer_lag``) to drain, learns the
load, forecasts it, and :func:`infra.autoscaler.decide` s. With a :class:`KubeScaler` the
decision is applied to the tier's Deployment (``patch_namespaced_deployment_scale``, as
``kubectl scale`` does); without one the controller keeps its own replica count (print mode).

Example:
    >>> from infra.autoscaler import TierPolicy
    >>> text = ('# TYPE pricestream_decisions_total counter\\n'
    ...         'pricestream_decisions_total{tier="light"} 90.0\\n'
    ...         'pricestream_decisions_total{tier="rules"} 10.0\\n'
    ...         'pricestream_stream_consumer_lag{service="s",topic="t"} 600.0\\n')
    >>> parse_sample(text)
    Sample(total=100.0, lag=600.0)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar

import httpx
from prometheus_client.parser import text_string_to_metric_families

from infra.autoscaler import Decision, LoadForecaster, TierPolicy, decide
from infra.errors import InfraError

T = TypeVar("T")

RATE_COUNTERS = ("pricestream_decisions_total", "pricestream_stream_records")
"""Counters whose rate is a tier's load: decisions (HTTP tiers), input records (stream services)."""
LAG_GAUGE = "pricestream_stream_consumer_lag"


class ScaleError(InfraError):
    """Metrics cannot be read, or the Kubernetes API refused a scale (names the target and the reason)."""


class Sample(NamedTuple):
    """Summed rate counters (``total``) and consumer lag of one scrape."""

    total: float
    lag: float


def parse_sample(text: str) -> Sample:
    """The summed rate counters and consumer lag of one Prometheus text exposition."""
    count = lag = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in RATE_COUNTERS or sample.name.removesuffix("_total") in RATE_COUNTERS:
                count += float(sample.value)
            elif sample.name == LAG_GAUGE:
                lag += float(sample.value)
    return Sample(count, lag)


def scrape(urls: Sequence[str], *, timeout_s: float = 5.0) -> Sample:
    """:func:`parse_sample` summed over every pod's ``/metrics``.

    Raises:
        ScaleError: a URL does not answer 200.
    """
    count = lag = 0.0
    for url in urls:
        try:
            r = httpx.get(url, timeout=timeout_s)
        except httpx.HTTPError as exc:
            msg = f"metrics {url}: no answer ({type(exc).__name__})"
            raise ScaleError(msg) from exc
        if r.status_code != 200:
            msg = f"metrics {url}: status {r.status_code}, expected 200"
            raise ScaleError(msg)
        sample = parse_sample(r.text)
        count, lag = count + sample.total, lag + sample.lag
    return Sample(count, lag)


class KubeScaler:
    """Read and set Deployments' replicas through the Kubernetes API (in cluster, else the kubeconfig).

    Args:
        namespace: the Deployments' namespace.
    """

    def __init__(self, namespace: str) -> None:
        from kubernetes import client, config

        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config()
        self.namespace = namespace
        self._apps = client.AppsV1Api()

    def replicas(self, deployment: str) -> int:
        scale = self._call("read", deployment, lambda: self._apps.read_namespaced_deployment_scale(
            deployment, self.namespace))
        return int(scale.spec.replicas or 0)

    def scale(self, deployment: str, replicas: int) -> None:
        self._call("patch", deployment, lambda: self._apps.patch_namespaced_deployment_scale(
            deployment, self.namespace, {"spec": {"replicas": replicas}}))

    def _call(self, verb: str, deployment: str, call: Callable[[], T]) -> T:
        from kubernetes.client.exceptions import ApiException

        try:
            return call()
        except ApiException as exc:
            msg = f"deployment {self.namespace}/{deployment}: {verb} scale refused ({exc.status} {exc.reason})"
            raise ScaleError(msg) from exc


@dataclass
class _TierState:
    policy: TierPolicy
    urls: list[str]
    forecaster: LoadForecaster
    replicas: int
    last: tuple[float, Sample] | None = None
    changed_at: int | None = None


@dataclass
class Controller:
    """One :meth:`step` per interval over every tier (see the module docstring).

    Args:
        tiers: each tier's policy and its pods' ``/metrics`` URLs.
        scaler: applies decisions (``None``: print mode, the controller tracks replicas itself).
        replicas: starting replica counts in print mode (default: each tier's floor).
        clock: seconds (``time.monotonic``).
    """

    tiers: Sequence[tuple[TierPolicy, Sequence[str]]]
    scaler: KubeScaler | None = None
    replicas: Mapping[str, int] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic
    steps: int = 0

    def __post_init__(self) -> None:
        self._state = [_TierState(p, list(urls), LoadForecaster(horizon=5),
                                  int(self.replicas.get(p.name, p.fixed or p.min_replicas)))
                       for p, urls in self.tiers]

    def step(self) -> list[Decision | str]:
        """Decide (and apply) for every tier; a tier whose rate is not known yet gives a line of why."""
        out: list[Decision | str] = []
        for state in self._state:
            try:
                out.append(self._tier_step(state))
            except ScaleError as exc:
                out.append(f"{state.policy.name}: hold, {exc}")
        self.steps += 1
        return out

    def _tier_step(self, state: _TierState) -> Decision | str:
        now, sample = self.clock(), scrape(state.urls)
        previous, state.last = state.last, (now, sample)
        if previous is None or now <= previous[0]:
            return f"{state.policy.name}: first sample ({sample.total:.0f} requests counted), a rate needs two"
        rate = max(0.0, sample.total - previous[1].total) / (now - previous[0])  # a restarted pod resets to 0
        load = state.policy.load(rate, sample.lag)
        state.forecaster.learn_one(load)
        if self.scaler is not None:
            state.replicas = self.scaler.replicas(state.policy.deployment)
        since = None if state.changed_at is None else self.steps - state.changed_at
        decision = decide(state.policy, replicas=state.replicas, load=load, forecast_peak=state.forecaster.peak(),
                          since_change=since)
        if decision.desired != state.replicas:
            if self.scaler is not None:
                self.scaler.scale(state.policy.deployment, decision.desired)
            state.replicas, state.changed_at = decision.desired, self.steps
        return decision


DEFAULT_POLICIES = (
    TierPolicy(name="rules", deployment="pricing-rules", replica_rps=400.0, max_replicas=12),
    TierPolicy(name="light", deployment="pricing-light", replica_rps=100.0, max_replicas=16),
    TierPolicy(name="heavy", deployment="heavy", replica_rps=20.0, fixed=2),
    TierPolicy(name="stream", deployment="serve-stream", replica_rps=500.0, max_replicas=6),
)
"""The tiers of ``infra/k8s``. A replica's capacity here is a starting point, not a measurement: set it per
deployment from a load test of its pods (``--policies`` takes a YAML list of :class:`TierPolicy`)."""
