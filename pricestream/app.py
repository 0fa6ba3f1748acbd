"""The composition root of the serving path: the one place that assembles it.

``pricestream serve`` (HTTP), ``pricestream serve-stream`` (Kafka) and the demo all call
:func:`build_serving_path`; nothing else wires a scorer. The path is::

    Scorer (rules -> router -> light | heavy, from pricestream.wiring.build_scorer)
      -> RolloutScorer (shadow / canary / blend / full, following the rollout state file)
      -> AuditLog (every served decision, durable within settings.audit_flush_interval_s)
      -> DecisionPublisher (pricing.decisions, each decision with its arm and propensity)

A :class:`~pricestream.follower.Follower` thread re-reads, every ``settings.follow_interval_s`` (200 ms), the
three files that other processes write: the rollout state (``pricestream rollout ...``),
the registry's generation (``models promote / rollback``, the trainer; and the generation of the
per-hotel refits the trainer publishes, ``<registry>/hotels/index.json``) and the router
thresholds (drift recalibration). A change takes effect on the next request, no restart.

:meth:`ServingPath.close` stops the follower, finishes the background (shadow) pricings,
then closes the audit log (flush + fsync) and flushes the publisher: the HTTP server calls
it from its shutdown hook, after the last in-flight request was answered.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from pricing.feature_source import MemoryFeatureSource
    >>> from pricestream.wiring import BootstrapModels
    >>> s = Settings(state_dir=Path(tempfile.mkdtemp()), bootstrap_rows=300)
    >>> path = build_serving_path(s, publish="none", feature_source=MemoryFeatureSource(),
    ...                           models=BootstrapModels(light_trees=5, heavy_members=2, heavy_trees=5))
    >>> from datetime import date, datetime, timezone
    >>> from events.models import PricingRequest
    >>> d = path.scorer.price(PricingRequest(hotel_id="h1", room_type="std", stay_date=date(2026, 12, 24),
    ...                                      event_time=datetime(2026, 12, 1, tzinfo=timezone.utc)))
    >>> d.arm, d.propensity
    ('incumbent', 1.0)
    >>> path.close()
    >>> from audit.verify import verify
    >>> verify(s.audit()).entries
    1
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Literal

from audit.log import AuditLog
from delivery import StateStore
from delivery.rollout import RolloutScorer
from events.models import PricingDecision, PricingRequest, dumps
from feedback.registry import ModelRegistry
from pricestream.follower import Follower as Follower
from pricestream.settings import Settings
from pricestream.wiring import BootstrapModels, Progress, build_scorer, pricer_loader
from pricing.exploration import ExplorationConfig
from pricing.feature_source import FeatureSource
from pricing.scorer import Scorer, ScorerConfig
from routing.router import TieredRouter
from routing.threshold_state import ThresholdStore

if TYPE_CHECKING:
    from fastapi import FastAPI

    from delivery.control_plane import ControlState
    from serving.http import ServiceConfig

__all__ = [
    "DecisionPublisher", "Follower", "Publish", "ServingPath", "build_serving_path", "http_app", "promote_trained",
    "serve_http",
]

log = logging.getLogger(__name__)

Publish = Literal["all", "shadow", "none"]
"""What the path publishes to ``pricing.decisions``: every decision (HTTP serving), only the
shadow ones (the stream scorer publishes what it serves itself), or nothing."""


class DecisionPublisher:
    """Publishes decisions to ``pricing.decisions`` (idempotent producer, ``acks=all``), keyed by hotel.

    Args:
        settings: where Kafka is.
        shadow_only: publish only the background (``*-shadow``) decisions.
    """

    def __init__(self, settings: Settings, *, shadow_only: bool = False) -> None:
        from events.producer import Producer

        self.shadow_only = shadow_only
        self.producer = Producer(settings.kafka(), topic="pricing.decisions")

    def __call__(self, request: PricingRequest, decision: PricingDecision) -> None:
        del request
        if self.shadow_only and not decision.arm.endswith("-shadow"):
            return
        self.producer.send_raw(decision.hotel_id.encode(), dumps(decision))

    def close(self, timeout_s: float = 30.0) -> None:
        """Wait until the broker acknowledged every decision sent (raises ``DeliveryError`` if not)."""
        self.producer.flush(timeout_s)


@dataclass
class ServingPath:
    """The assembled serving path: serve through ``scorer``; :meth:`close` once at shutdown."""

    scorer: RolloutScorer
    audit: AuditLog | None
    publisher: DecisionPublisher | None
    follower: Follower
    http_limits: tuple[int, int] = (64_000, 256)
    """The HTTP layer's (largest body in bytes, most requests per batch), from settings."""
    _closed: bool = False

    def close(self) -> None:
        """Stop following, finish background pricings, make the audit durable, flush the publisher."""
        if self._closed:
            return
        self._closed = True
        self.follower.stop()
        self.scorer.close()
        if self.audit is not None:
            self.audit.close()
        if self.publisher is not None:
            self.publisher.close()

    def __enter__(self) -> ServingPath:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def candidate_loader(
    incumbent: Scorer, registry: ModelRegistry | ControlState, *, load_pricer: Callable[[Path], Any] | None = None
) -> Callable[[str], Scorer]:
    """``load(version)``: the incumbent with that version's model in its tier, its own router copy."""

    def load(version: str) -> Scorer:
        from pricing.tiers import load_pricer as plain

        entry = registry.show(version)
        pricer = (load_pricer or plain)(entry.path)
        light, heavy = incumbent.light, incumbent.heavy
        if entry.tier == "light":
            light = pricer
        else:
            heavy = pricer
        return Scorer(incumbent.config, rules=incumbent.rules, feature_source=incumbent.feature_source,
                      light=light, heavy=heavy, router=TieredRouter(incumbent.router.thresholds),
                      stats=incumbent.stats)

    return load


def staged_scorer(settings: Settings, scorer: Scorer) -> Scorer:
    """``scorer`` with the cold-start stage rule in front (``delivery.cold_start``), history in Redis,
    and the per-hotel refits the trainer publishes (``<registry>/hotels``, followed by the :class:`Follower`)."""
    from delivery.cold_start import StagedScorer
    from feedback.hotel_models import HotelModels
    from pricestream.commands.cold_start import cold_start_config, history_store

    hotels = HotelModels(settings.registry()) if settings.cold_start_refit else None
    # a hotel's own heavy refit is not on the remote heavy service (it holds the pooled one): loaded here
    own_models = settings.model_copy(update={"heavy_tier": "local"})
    return StagedScorer(scorer, history=history_store(settings),
                        cold_start=cold_start_config(settings), partial_windows=settings.cold_start_partial_windows,
                        counts_ttl_s=settings.cold_start_counts_ttl_s, explore_transfer=transfer_exploration(settings),
                        hotel_models=hotels, load_pricer=pricer_loader(own_models))


def transfer_exploration(settings: Settings) -> ExplorationConfig | None:
    """How ``serve`` explores a new hotel's prices in stage ``transfer`` (``None``: band 0, as any other hotel)."""
    if settings.cold_start_explore_band <= 0:
        return None
    return ExplorationConfig(band=settings.cold_start_explore_band, arms=settings.cold_start_explore_arms,
                             seed=settings.seed)


def build_serving_path(
    settings: Settings,
    *,
    audit: bool = True,
    publish: Publish = "all",
    feature_source: FeatureSource | None = None,
    config: ScorerConfig | None = None,
    models: BootstrapModels | None = None,
    on_progress: Progress | None = None,
    audit_path: Path | None = None,
) -> ServingPath:
    """Assemble the serving path from settings and start following the rollout, registry and thresholds.

    Args:
        settings: registry, rules, Redis, Kafka, audit and rollout paths, follow interval.
        audit: write served decisions to the audit log (``audit_path``, default ``settings.audit()``).
        publish: which decisions go to ``pricing.decisions`` (see :data:`Publish`).
        feature_source: the online features (Redis through ``settings.features()`` when None).
        config: the scorer's settings (the deadline from ``settings`` when None).
        models: size of the bootstrap pair trained when the registry has none promoted.
        on_progress: progress of loading (and a bootstrap training).
    """
    registry = ModelRegistry(settings.registry())
    control = None
    if settings.control_plane == "kafka":
        from pricestream.control import follow_models

        control = follow_models(settings, models=models, on_progress=on_progress)
    incumbent = build_scorer(settings, feature_source=feature_source, models=models, on_progress=on_progress,
                             config=config, models_source=None if control is None else control.state)
    if settings.cold_start_serve:
        incumbent = staged_scorer(settings, incumbent)
    log_file = AuditLog(audit_path or settings.audit(), fsync_interval_s=settings.audit_flush_interval_s,
                        key=settings.audit_key, anchors=settings.audit_anchors,
                        anchor_interval_s=settings.audit_anchor_interval_s,
                        on_anchor=settings.audit_anchor_publisher(audit_path or settings.audit())) if audit else None
    publisher = None if publish == "none" else DecisionPublisher(settings, shadow_only=publish == "shadow")
    output_audit = settings.output_audit_config()
    rollout = RolloutScorer(incumbent, config=settings.delivery(), on_decision=publisher, audit=log_file,
                            pair_share=settings.rollout_pair_share, decision_time=settings.decision_time)
    loader = pricer_loader(settings)
    follower = Follower(
        rollout=rollout, registry=registry, delivery_state=StateStore(settings.rollout()),
        thresholds=ThresholdStore(settings.router_thresholds()),
        load_candidate=candidate_loader(incumbent, registry, load_pricer=loader),
        interval_s=settings.follow_interval_s, load_pricer=loader, control=control,
    )
    if output_audit is not None:
        from pricing.output_audit import OutputAudit, output_audit_counter, rules_band

        rollout.output_audit = OutputAudit(output_audit, band=rules_band(incumbent.rules),
                                           counter=output_audit_counter(incumbent.stats.registry))
    if control is not None:
        from pricestream.control import bind

        bind(control, rollout, load_pricer=loader)
    follower.start()
    return ServingPath(scorer=rollout, audit=log_file, publisher=publisher, follower=follower,
                       http_limits=(settings.http_max_body_bytes, settings.http_max_batch))


def http_app(path: ServingPath, service: ServiceConfig | None = None) -> FastAPI:
    """The pricing API (:func:`serving.http.create_app`) over ``path``, closing it at shutdown.

    Uvicorn runs the lifespan's exit after its graceful shutdown answered every in-flight
    request, and before it re-raises the SIGTERM that stopped it: so every decision returned
    to a caller is audited (fsynced) and acknowledged by Kafka before the process exits.
    ``service`` (``Settings.http_service``) adds keys, rate limits and the ops-port split.
    """
    from pricing.groups import GroupQuoter
    from serving.health import feature_probe
    from serving.http import ServiceConfig, create_app

    max_body, max_batch = path.http_limits
    config = service or ServiceConfig(max_body_bytes=max_body, max_batch=max_batch)
    incumbent = path.scorer.arms.incumbent
    api = create_app(path.scorer, config, probes={"redis": feature_probe(incumbent.feature_source)},
                     groups=GroupQuoter(incumbent, margin=config.group_margin),
                     group_audit=None if path.audit is None else path.audit.append_entry)
    inner = api.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Any]:  # starlette types the state as one of two shapes
        async with inner(app) as state:
            try:
                yield state
            finally:
                path.close()

    api.router.lifespan_context = lifespan
    return api


def _stopped(signum: int, frame: FrameType | None) -> None:
    """SIGTERM after uvicorn's own graceful shutdown: the path is closed, so return and exit 0."""
    del signum, frame


def serve_http(path: ServingPath, *, host: str, port: int, service: ServiceConfig | None = None,
               ops: tuple[str, int] | None = None) -> None:
    """Serve ``path`` over HTTP until SIGTERM / SIGINT; the path is closed when this returns.

    ``ops`` (host, port) serves ``/healthz`` and ``/metrics`` there, from a second server in a thread.
    """
    import uvicorn

    from serving.health import create_ops_app, feature_probe

    ops_server = None
    if ops is not None:
        ops_app = create_ops_app(path.scorer,
                                 probes={"redis": feature_probe(path.scorer.arms.incumbent.feature_source)})
        ops_server = uvicorn.Server(uvicorn.Config(ops_app, host=ops[0], port=ops[1], log_level="warning"))
        threading.Thread(target=ops_server.run, name="ops-http", daemon=True).start()

    previous = signal.signal(signal.SIGTERM, _stopped) if threading.current_thread() is threading.main_thread() \
        else None
    try:
        tls = service is not None and service.tls_cert is not None  # HTTPS only: no plain listener
        uvicorn.run(http_app(path, service), host=host, port=port, log_level="warning",
                    ssl_certfile=str(service.tls_cert) if tls and service else None,
                    ssl_keyfile=str(service.tls_key) if tls and service else None)
    finally:
        if ops_server is not None:
            ops_server.should_exit = True
        path.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def promote_trained(settings: Settings, version: str, *, reason: str = "passed the trainer's gate") -> str:
    """What a trainer does with a registered version that passed its gate (``settings.trainer_promotion``).

    ``swap`` promotes it now (servers hot-reload it within ``follow_interval_s``); ``rollout`` starts a
    rollout of it against the live model of its tier instead (shadow first; ``pricestream rollout
    advance`` moves it on). Returns what was done: ``"promoted"``, ``"rollout"``, or ``"registered"`` when
    another rollout is still live (the version waits in the registry).
    """
    from delivery import RolloutController
    from delivery.stages import LIVE_STAGES
    from pricestream.control import open_registry, publish_rollout

    registry = open_registry(settings)  # publishes the promotion on control.v1 with the Kafka control plane
    if settings.trainer_promotion == "swap":
        registry.promote(version)
        return "promoted"
    controller = RolloutController(settings.delivery())
    state = controller.status()
    if state.stage in LIVE_STAGES:
        # one rollout at a time: the version stays registered (``rollout start`` it later); raising here
        # would stop the trainer service on every update that lands during a rollout
        log.warning("%s registered, not rolled out: the rollout of %s is live in %s", version, state.version,
                    state.stage.value)
        return "registered"
    live = registry.current(registry.show(version).tier)
    started = controller.start(version, incumbent_version=None if live is None else live.version, reason=reason)
    publish_rollout(settings, started, registry)
    return "rollout"
