"""Seeded fixtures of the scorer benchmarks: models, stay keys, stored features, requests, the scorer.

Shared by ``bench/decide.py``, ``bench/stream_scorer.py`` and ``bench/stream_flink.py`` so that
every pricing benchmark prices the same requests with the same models and Redis features.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
from prometheus_client import CollectorRegistry

from audit.log import AuditLog
from events.catalog import ALL_FEATURES, VIEWS
from events.models import CHANNELS, PricingRequest
from features.config import FeaturesConfig
from features.online_source import RedisFeatureSource
from features.online_writer import OnlineWriter, redis_client
from features.rows import FeatureRow
from market.synthetic import training_frame
from pricing.feature_source import FeatureSource, MemoryFeatureSource
from pricing.models import DemandModelConfig
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from pricing.tiers import load_pricer
from pricing.training import train_bundle
from routing.calibration import Thresholds
from routing.router import TieredRouter

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
RULES = Path(__file__).resolve().parents[1] / "pricing" / "rules" / "default.yaml"
QUICK_LIGHT = DemandModelConfig(num_trees=30)
QUICK_HEAVY = DemandModelConfig(n_members=3, num_trees=60, num_leaves=31, bootstrap=True)
ROOM_TYPES = ("std", "double", "suite")


def train_bundles(out: Path, *, quick: bool, seed: int = 0) -> tuple[Path, Path]:
    """Train a light and a heavy bundle on the seeded synthetic demand (tier defaults unless ``quick``)."""
    frame = training_frame(3_000 if quick else 20_000, seed=seed)
    light = train_bundle(frame, out / "light", tier="light", seed=seed, config=QUICK_LIGHT if quick else None)
    heavy = train_bundle(frame, out / "heavy", tier="heavy", seed=seed, config=QUICK_HEAVY if quick else None)
    return light.path, heavy.path


def stay_keys(n_hotels: int, *, seed: int = 0) -> list[tuple[str, str, date]]:
    """Stay keys: ``n_hotels`` hotels x room types x 30 arrival nights."""
    del seed
    return [(f"h{h:04d}", room, date(2026, 12, 1) + timedelta(days=d))
            for h in range(n_hotels) for room in ROOM_TYPES for d in range(30)]


def _feature_values(keys: Sequence[tuple[str, str, date]], *, seed: int) -> list[dict[str, float | None]]:
    """Seeded stored features per key: rows of the synthetic training frame (NaN -> None)."""
    frame = training_frame(len(keys), seed=seed + 1)[list(ALL_FEATURES)]
    return [{k: None if v != v else float(v) for k, v in row.items()} for row in frame.to_dict("records")]


def memory_source(keys: Sequence[tuple[str, str, date]], *, seed: int = 0) -> MemoryFeatureSource:
    """Seeded features for every key (rows of the synthetic training frame, a few seconds old)."""
    source = MemoryFeatureSource()
    for (hotel, room, stay), row in zip(keys, _feature_values(keys, seed=seed), strict=True):
        source.put(hotel, room, stay, row, version=1, event_time=T0 - timedelta(seconds=5))
    return source


def feature_rows(keys: Sequence[tuple[str, str, date]], *, seed: int = 0) -> list[FeatureRow]:
    """The same seeded features as :func:`memory_source`, as ``features.v1`` rows of all six views."""
    at_ms = int((T0 - timedelta(seconds=5)).timestamp() * 1000)
    rows, hotels_done = [], set()
    for (hotel, room, stay), values in zip(keys, _feature_values(keys, seed=seed), strict=True):
        for view, (view_keys, names) in VIEWS.items():
            stay_key = "room_type" in view_keys
            if not stay_key and hotel in hotels_done:
                continue
            feats = {n: values[n] for n in names}
            rows.append(FeatureRow(hotel, view, room if stay_key else None, stay.isoformat() if stay_key else None,
                                   at_ms, 1, at_ms, feats))
        hotels_done.add(hotel)
    return rows


def write_features(config: FeaturesConfig, keys: Sequence[tuple[str, str, date]], *, seed: int = 0) -> int:
    """Write the seeded features of ``keys`` to Redis through the online writer; rows written."""
    writer = OnlineWriter(config, registry=CollectorRegistry())
    rows, written = feature_rows(keys, seed=seed), 0
    try:
        for i in range(0, len(rows), 1_000):
            written += writer.write_rows(rows[i : i + 1_000]).written
    finally:
        writer.close()
    return written


def drop_features(config: FeaturesConfig) -> int:
    """Delete the throwaway project's hashes (every Feast key ends with the project name)."""
    client = redis_client(config)
    try:
        stale = list(client.scan_iter(match=b"*" + config.project.encode(), count=1_000))
        if stale:
            client.delete(*stale)
        return len(stale)
    finally:
        client.close()


def make_feature_source(
    keys: Sequence[tuple[str, str, date]], *, config: FeaturesConfig | None, seed: int = 0
) -> FeatureSource:
    """The scorer's feature source: Redis (features already written under ``config``), or memory when ``None``."""
    if config is None:
        return memory_source(keys, seed=seed)
    return RedisFeatureSource(config)


def requests_for(keys: Sequence[tuple[str, str, date]], n: int, *, seed: int = 0) -> list[PricingRequest]:
    """``n`` seeded requests over the keys."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(keys), n)
    channels = rng.integers(0, len(CHANNELS), n)
    nights = rng.integers(1, 5, n)
    return [
        PricingRequest(hotel_id=keys[k][0], room_type=keys[k][1], stay_date=keys[k][2], nights=int(nights[i]),
                       channel=CHANNELS[int(channels[i])], event_time=T0)  # type: ignore[arg-type]
        for i, k in enumerate(picks)
    ]


def build_scorer(bundles: tuple[Path, Path], keys: Sequence[tuple[str, str, date]], *,
                 config: FeaturesConfig | None, seed: int = 0, thresholds: Thresholds | None = None,
                 audit: AuditLog | None = None) -> Scorer:
    """The scorer under test: default rules, both tiers, router thresholds (default ones when ``None``)."""
    return Scorer(ScorerConfig(deadline_ms=50.0), rules=RuleSet.load(RULES),
                  feature_source=make_feature_source(keys, config=config, seed=seed), light=load_pricer(bundles[0]),
                  heavy=load_pricer(bundles[1]), router=TieredRouter(thresholds), audit=audit)
