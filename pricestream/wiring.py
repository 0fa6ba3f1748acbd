"""Wiring: a ready :class:`~pricing.scorer.Scorer` from settings, for the composition root.

:mod:`pricestream.app` (``build_serving_path``) is the only caller on a serving path: it puts
progressive delivery, the audit log and the decision publisher around this scorer.

:func:`build_scorer` loads the rules file, reads features from Redis (Feast's layout, through
:class:`features.online_source.RedisFeatureSource`) and takes the light and heavy models that the
registry has promoted. When the registry has none yet (a fresh checkout), :func:`ensure_models`
trains a small bootstrap pair on the market simulator's labelled frame and registers and promotes
it, so the first ``pricestream serve`` prices with models rather than rules alone.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from pricing.feature_source import MemoryFeatureSource
    >>> root = Path(tempfile.mkdtemp())
    >>> s = Settings(state_dir=root, bootstrap_rows=300)
    >>> scorer = build_scorer(s, feature_source=MemoryFeatureSource(), models=BootstrapModels(light_trees=5,
    ...                       heavy_members=2, heavy_trees=5))
    >>> scorer.light is not None and scorer.heavy is not None
    True
    >>> sorted(e.tier for e in ModelRegistry(s.registry()).list())
    ['heavy', 'light']
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from feedback.registry import Entry, ModelRegistry
from pricestream.settings import Settings
from pricing.feature_source import FeatureSource
from pricing.models import DemandModelConfig
from pricing.rules import RuleSet
from pricing.scorer import DecisionCallback, DecisionSink, ModelSource, Scorer, ScorerConfig
from routing.router import TieredRouter

if TYPE_CHECKING:
    import pandas as pd

    from feedback.hotel_refit import HotelRefitter
    from pricing.bid_price import BidPriceConfig
    from pricing.tiers import TierPricer

Progress = Callable[[str, int, int], None]
"""``on_progress(step, done, total)``: the CLI draws it; the library never prints."""

BOOTSTRAP_DAYS = 60
"""Width of the simulated time range the bootstrap models learn from (two months of seasonality)."""
BOOTSTRAP_HOTELS = 8


class BootstrapModels(BaseModel):
    """Size of the bootstrap models: small enough to train in seconds on a shared laptop."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    light_trees: int = Field(default=60, ge=1)
    heavy_members: int = Field(default=3, ge=1)
    heavy_trees: int = Field(default=120, ge=1)
    hotels: int = Field(default=BOOTSTRAP_HOTELS, ge=1)


def ensure_models(
    registry: ModelRegistry,
    *,
    seed: int,
    rows: int,
    models: BootstrapModels | None = None,
    on_progress: Progress | None = None,
    cache_dir: Path | None = None,
) -> tuple[Entry, Entry]:
    """The promoted (light, heavy) pair; trains, registers and promotes a bootstrap pair if one is missing."""
    light, heavy = registry.current("light"), registry.current("heavy")
    if light is not None and heavy is not None:
        return light, heavy
    trained = train_bootstrap(registry, seed=seed, rows=rows, models=models or BootstrapModels(),
                              on_progress=on_progress, cache_dir=cache_dir)
    for version in trained:
        registry.promote(version)
    light, heavy = registry.current("light"), registry.current("heavy")
    if light is None or heavy is None:  # promote() above makes this unreachable unless the registry is edited
        msg = f"registry {registry.root}: no promoted light/heavy model after bootstrap"
        raise RuntimeError(msg)
    return light, heavy


def train_bootstrap(
    registry: ModelRegistry,
    *,
    seed: int,
    rows: int,
    models: BootstrapModels,
    on_progress: Progress | None = None,
    cache_dir: Path | None = None,
) -> list[str]:
    """Train a light and a heavy bundle on the simulator's labelled frame and register both (not promoted).

    The frame (features read from simulated events: tens of seconds of CPU) is kept under ``cache_dir`` when given
    (:func:`_cached_frame`), so the next bootstrap of the same size on this machine reads it back.
    """
    from market import Market, MarketConfig
    from pricing.training import TierName, train_bundle

    start = Market(MarketConfig(hotels=models.hotels, seed=seed)).config.start
    frame = bootstrap_frame(seed=seed, rows=rows, hotels=models.hotels, cache_dir=cache_dir)
    data_range = (start, start + timedelta(days=BOOTSTRAP_DAYS))
    configs: dict[TierName, DemandModelConfig] = {
        "light": DemandModelConfig(num_trees=models.light_trees),
        "heavy": DemandModelConfig(n_members=models.heavy_members, num_trees=models.heavy_trees, bootstrap=True),
    }
    versions = []
    with tempfile.TemporaryDirectory(prefix="pricestream-bootstrap-") as tmp:
        for step, (tier, config) in enumerate(configs.items()):
            if on_progress is not None:
                on_progress(f"training bootstrap {tier} model", step, len(configs))
            info = train_bundle(frame, Path(tmp) / tier, tier=tier, seed=seed, config=config)
            metrics = {**info.metrics, "bootstrap": True, "rows": rows}
            versions.append(registry.register(info.path, tier=tier, data_range=data_range, metrics=metrics))
    if on_progress is not None:
        on_progress("bootstrap models registered", len(configs), len(configs))
    return versions


def bootstrap_frame(*, seed: int, rows: int, hotels: int = BOOTSTRAP_HOTELS, cache_dir: Path | None = None
                    ) -> pd.DataFrame:
    """The labelled frame the bootstrap models train on: ``rows`` simulated requests over :data:`BOOTSTRAP_DAYS`
    with the features read from the simulated events (kept under ``cache_dir``, :func:`_cached_frame`).

    The image builds the default one at build time, so a container's first ``serve`` reads it back.
    """
    from market import Market, MarketConfig, training_frame

    market = Market(MarketConfig(hotels=hotels, seed=seed))
    start = market.config.start
    return _cached_frame(cache_dir, lambda: training_frame(market, n=rows, seed=seed, start=start, days=BOOTSTRAP_DAYS),
                        key={"hotels": hotels, "seed": seed, "rows": rows, "start": start.isoformat(),
                             "days": BOOTSTRAP_DAYS})


FRAME_SOURCES = ("market", "features/asof.py", "features/replay.py", "events/catalog.py", "events/models.py")
"""The code a simulated training frame depends on: a cached frame is keyed by its digest too."""


def _cached_frame(cache_dir: Path | None, build: Callable[[], pd.DataFrame], *, key: dict[str, object]) -> pd.DataFrame:
    """``build()``, kept as parquet under ``cache_dir/frames`` by ``key`` and the digest of :data:`FRAME_SOURCES`.

    A changed simulator or window code is another key, so a stale frame is never read; ``cache_dir=None`` builds.
    Written to a temporary file and renamed: processes that bootstrap at once never read half a file.
    """
    if cache_dir is None:
        return build()
    import hashlib
    import json
    import logging
    import os

    import pandas as pd

    from infra.config import REPO_ROOT

    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode())
    for source in FRAME_SOURCES:
        root = REPO_ROOT / source
        for path in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
            digest.update(path.read_bytes())
    path = cache_dir / "frames" / f"{digest.hexdigest()[:24]}.parquet"
    if path.exists():
        return pd.read_parquet(path)
    frame = build()
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        frame.to_parquet(tmp, index=False)
        tmp.replace(path)
    except OSError as exc:  # a read-only cache (an image's) costs the next start a rebuild, nothing else
        logging.getLogger(__name__).warning("training frame not cached in %s: %s", path.parent, exc)
    return frame


def pricer_loader(settings: Settings) -> Callable[[Path], Any]:
    """``load(bundle_dir)``: a tier pricer on ``settings.model_backend``, exploring its shown price when
    ``settings.explore_band`` > 0.

    Example:
        >>> pricer_loader(Settings(explore_band=0.05)).__name__
        'load'
    """
    from pricing.exploration import ExplorationConfig

    exploration = None if settings.explore_band <= 0 else ExplorationConfig(
        band=settings.explore_band, arms=settings.explore_arms, seed=settings.seed)
    capacity = bid_config(settings)

    def load(bundle_dir: Path) -> TierPricer:
        from pricing.tiers import load_pricer  # deferred: onnxruntime loads only when a model does

        if settings.heavy_tier == "remote":  # the heavy service holds the model; this slot is its client
            from pricing.training import read_meta
            from serving.heavy import RemoteHeavyPricer

            meta = read_meta(bundle_dir)
            if meta["tier"] == "heavy":
                return RemoteHeavyPricer(settings.heavy_endpoint(), version=str(meta["version"]),
                                         deadline_ms=settings.heavy_deadline_ms, name=str(meta["name"]))
        backend = settings.model_backend
        if capacity is None:
            return load_pricer(bundle_dir, exploration=exploration, backend=backend)
        return load_pricer(bundle_dir, exploration=exploration, capacity=capacity, backend=backend)

    return load


def bid_config(settings: Settings) -> BidPriceConfig | None:
    """The bid price's forecast of ``settings.bid_config`` with the overbooking settings (``None``: the tiers'
    built-in default).

    Raises:
        ValueError: the file cannot be read or is not a ``BidPriceConfig``, naming the file and what is wrong.
    """
    config = _bid_file(settings)
    if not settings.overbooking:
        return config
    from pricing.overbooking import OverbookingConfig
    from pricing.tiers import DEFAULT_CAPACITY

    overbooking = OverbookingConfig(no_show_share=settings.overbooking_no_show_share,
                                    relocation_cost=settings.overbooking_relocation_cost,
                                    max_walks_per_1000=settings.overbooking_max_walks_per_1000)
    return (config or DEFAULT_CAPACITY).model_copy(update={"overbooking": overbooking})


def _bid_file(settings: Settings) -> BidPriceConfig | None:
    if settings.bid_config is None:
        return None
    from pydantic import ValidationError

    from pricing.bid_price import BidPriceConfig  # noqa: F811 - the runtime import of the annotation's name

    try:
        return BidPriceConfig.model_validate_json(settings.bid_config.read_bytes())
    except OSError as exc:
        msg = f"PRICESTREAM_BID_CONFIG: cannot read {settings.bid_config}: {exc.strerror or exc}"
        raise ValueError(msg) from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "<file>"
        msg = (f"PRICESTREAM_BID_CONFIG {settings.bid_config}: field {where!r}: {first['msg']} "
               "(expected the JSON written by `pricestream bid-price measure`)")
        raise ValueError(msg) from exc


def scorer_config(settings: Settings) -> ScorerConfig:
    """The scorer's settings: deadline, input guard, the currency's minor unit and the hotels' room types.

    Example:
        >>> scorer_config(Settings(price_decimals=0)).price_decimals
        0
    """
    profiles = settings.hotel_profiles()
    return ScorerConfig(
        deadline_ms=settings.deadline_ms, input_guard=settings.input_guard_config(),
        price_decimals=settings.price_decimals,
        hotel_decimals={h: p.price_decimals for h, p in profiles.items() if p.price_decimals is not None},
        room_types={h: p.room_types for h, p in profiles.items() if p.room_types is not None},
    )


def build_scorer(
    settings: Settings,
    *,
    feature_source: FeatureSource | None = None,
    audit: DecisionSink | None = None,
    on_decision: DecisionCallback | None = None,
    router: TieredRouter | None = None,
    models: BootstrapModels | None = None,
    on_progress: Progress | None = None,
    config: ScorerConfig | None = None,
    models_source: ModelSource | None = None,
) -> Scorer:
    """A scorer over the registry's promoted models, the rules file and the online store.

    Args:
        settings: where the registry, rules and Redis are.
        feature_source: the online features (``RedisFeatureSource`` over ``settings.features()`` when None).
        audit: an :class:`audit.log.AuditLog` for the decisions (none when None).
        on_decision: called with every (request, decision), e.g. to publish it to Kafka.
        router: the tiered router (default thresholds when None).
        models: size of the bootstrap pair trained when the registry has no promoted model.
        on_progress: progress of a bootstrap training.
        config: the scorer's settings (the deadline from ``settings`` when None).
        models_source: where the promoted models are instead of the registry directory (the control plane's
            state, :class:`delivery.control_plane.ControlState`): nothing is bootstrapped then.
    """
    registry: ModelSource = ModelRegistry(settings.registry()) if models_source is None else models_source
    if isinstance(registry, ModelRegistry):
        ensure_models(registry, seed=settings.seed, rows=settings.bootstrap_rows, models=models,
                      on_progress=on_progress, cache_dir=settings.cache_dir)
    if feature_source is None:
        from features.online_source import RedisFeatureSource

        feature_source = RedisFeatureSource(settings.features())
    scorer = Scorer(
        config or scorer_config(settings),
        rules=RuleSet.load(settings.rules_file),
        feature_source=feature_source,
        light=None,
        heavy=None,
        router=router or TieredRouter(),
        audit=audit,
        on_decision=on_decision,
    )
    scorer.reload_from(registry, loader=pricer_loader(settings))
    return scorer


def hotel_refitter(settings: Settings, registry: ModelRegistry, *,
                   pooled_frame: Callable[[], pd.DataFrame | None] | None = None) -> HotelRefitter | None:
    """The trainer's refitter of new hotels in cold-start stage ``own`` (``None`` when cold start or its refit is off).

    It reads each hotel's stage from the history ``serve`` writes (Redis), continues ``registry``'s live pooled
    bundles on the hotel's own examples (with a sample of ``pooled_frame()``) and publishes them under the
    hotel in ``<registry>/hotels`` (:class:`feedback.hotel_models.HotelModels`), where ``serve`` loads them.
    """
    if not (settings.cold_start_serve and settings.cold_start_refit):
        return None
    from feedback.hotel_models import HotelModels
    from feedback.hotel_refit import HotelRefitter, RefitConfig
    from pricestream.commands.cold_start import cold_start_config, history_store

    def pooled() -> dict[str, Entry]:
        return {tier: e for tier in ("light", "heavy") if (e := registry.current(tier)) is not None}

    config = RefitConfig(cold_start=cold_start_config(settings), min_examples=settings.cold_start_refit_min_examples,
                         seed=settings.seed)
    return HotelRefitter(config, history=history_store(settings), hotels=HotelModels(registry.root), pooled=pooled,
                         pooled_frame=pooled_frame)
