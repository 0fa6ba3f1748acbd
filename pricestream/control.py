"""The control plane from settings: registries that publish, rollout publishing, and the replicas' follower.

With ``PRICESTREAM_CONTROL_PLANE=kafka``:

* :func:`open_registry` gives a :class:`~feedback.registry.ModelRegistry` that publishes a
  :class:`~delivery.control_plane.RegistryView` after every register, promote and rollback
  (``pricestream models ...`` and the rollout commands use it);
* :func:`publish_rollout` publishes the rollout state after every ``pricestream rollout ...``
  change, with the candidate's bundle and sha256;
* :func:`follow` is what ``pricestream serve`` runs: it reads ``control.v1`` to its end and
  hands back the follower, whose state the composition root builds the scorer from.

With ``files`` (the default) the registry publishes nothing and servers follow the local files.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> s = Settings(state_dir=Path(tempfile.mkdtemp()))
    >>> open_registry(s).on_change is None  # files: nothing is published
    True
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from delivery.control_plane import TIERS, Artefact, ControlRecord, RegistryView
from feedback.registry import Change, Entry, ModelRegistry
from pricestream.settings import Settings

if TYPE_CHECKING:
    from delivery import RolloutState
    from delivery.control_kafka import ControlFollower, ControlPublisher
    from delivery.control_plane import ControlState
    from delivery.rollout import RolloutScorer
    from pricestream.wiring import BootstrapModels, Progress

log = logging.getLogger(__name__)

CONTROL_TOPIC = "control.v1"


def enabled(settings: Settings) -> bool:
    return settings.control_plane == "kafka"


def topic(settings: Settings) -> str:
    return settings.kafka().topic(CONTROL_TOPIC)


def ensure_topic(settings: Settings) -> None:
    from events.admin import create_topics
    from events.topics import TOPICS

    create_topics(settings.kafka(), [TOPICS[CONTROL_TOPIC]])


def publisher(settings: Settings) -> ControlPublisher:
    from delivery.control_kafka import ControlPublisher

    ensure_topic(settings)
    return ControlPublisher(settings.kafka_client("admin"), topic(settings))


def artefact(entry: Entry, store: Path) -> Artefact:
    """``entry``'s bundle named relative to ``store`` (its registry layout ``<tier>/<version>`` otherwise)."""
    try:
        relative = entry.path.resolve().relative_to(store.resolve()).as_posix()
    except ValueError:  # the store is a copy of the registry's bundles (synced), not the registry itself
        relative = f"{entry.tier}/{entry.version}"
    return Artefact(version=entry.version, tier=entry.tier, path=relative,
                    onnx_sha256=entry.onnx_sha256)


def registry_view(registry: ModelRegistry, store: Path, *, change: str = "") -> RegistryView:
    """The live and the newest registered bundle of every model tier."""
    live = {t: artefact(e, store) for t in TIERS if (e := registry.current(t)) is not None}
    latest = {}
    for tier in TIERS:
        entries = registry.list(tier)
        if entries:
            latest[tier] = artefact(max(entries, key=lambda e: e.created_at), store)
    return RegistryView(generation=registry.generation, live=live, latest=latest, change=change)


def publish_registry(settings: Settings, registry: ModelRegistry, *, change: str = "") -> int:
    """Publish the registry's state now; returns the record's version."""
    view = registry_view(registry, settings.models_store(), change=change)
    return publisher(settings).publish(ControlRecord.registry_change(view))


def open_registry(settings: Settings, *, on_published: Callable[[int], None] | None = None) -> ModelRegistry:
    """The registry of ``settings``; with the Kafka control plane every change is published.

    ``on_published(version)`` is called after each record was acknowledged.
    """
    if not enabled(settings):
        return ModelRegistry(settings.registry())

    def published(registry: ModelRegistry, change: Change, version: str) -> None:
        v = publish_registry(settings, registry, change=f"{change} {version}")
        log.info("registry change %s %s published as control v%d", change, version, v)
        if on_published is not None:
            on_published(v)

    return ModelRegistry(settings.registry(), on_change=published)


def publish_rollout(settings: Settings, state: RolloutState, registry: ModelRegistry) -> int | None:
    """Publish ``state`` with its candidate's bundle; ``None`` (nothing sent) with the files control plane."""
    if not enabled(settings):
        return None
    candidate = None
    if state.version is not None:
        candidate = artefact(registry.show(state.version), settings.models_store())
    return publisher(settings).publish(ControlRecord.rollout_change(state, candidate=candidate))


def follow(settings: Settings) -> ControlFollower:
    """A follower of ``control.v1`` that has read it to its end (not started: the caller binds it)."""
    from delivery.control_kafka import ControlFollower

    ensure_topic(settings)
    follower = ControlFollower(settings.kafka_client("scorer"), topic(settings), store=settings.models_store())
    follower.catch_up(timeout_s=settings.control_catch_up_s)
    return follower


def follow_models(settings: Settings, *, models: BootstrapModels | None = None,
                  on_progress: Progress | None = None) -> ControlFollower:
    """:func:`follow`, making sure the state has live models before a server is built from it.

    An empty topic (the first replica of a deployment) gets the local registry's state, bootstrapped
    if it has no promoted models, as its first record; every replica then follows the same records.

    Raises:
        delivery.control_plane.ControlPlaneError: the topic cannot be read, or its registry record names
            bundles that fail their sha256 in the model store (the replica refuses to start on them).
    """
    from delivery.control_plane import ControlPlaneError
    from pricestream.wiring import ensure_models

    follower = follow(settings)
    if follower.state.registry is None and not follower.refused:
        registry = ModelRegistry(settings.registry())
        ensure_models(registry, seed=settings.seed, rows=settings.bootstrap_rows, models=models,
                      on_progress=on_progress, cache_dir=settings.cache_dir)
        publish_registry(settings, registry, change="first replica")
        follower.catch_up(timeout_s=settings.control_catch_up_s)
    if follower.state.registry is None or not follower.state.registry.live:
        follower.stop()
        msg = (f"control topic {follower.topic!r}: no applicable registry record "
               f"({follower.errors[-1] if follower.errors else 'no live models'}); expected live bundles "
               f"under the model store {str(settings.models_store())!r}")
        raise ControlPlaneError(msg)
    return follower


def bind(follower: ControlFollower, rollout: RolloutScorer, *, load_pricer: Callable[[Path], Any]) -> None:
    """Serve as the follower's state says from now on: apply the caught-up rollout, then follow new records."""
    from pricestream.app import candidate_loader

    incumbent = rollout.arms.incumbent
    load = candidate_loader(incumbent, follower.state, load_pricer=load_pricer)

    def apply(kind: str, state: ControlState) -> None:
        if kind == "registry":
            incumbent.reload_from(state, loader=load_pricer)
        elif state.rollout is not None:
            rollout.follow(state.rollout, load=load)

    if follower.state.rollout is not None:
        rollout.follow(follower.state.rollout, load=load)
    rollout.control_health = follower.health
    follower.start(on_change=apply)
