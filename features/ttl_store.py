"""Feast's Redis online store with the feature views' TTL applied on read.

Feast 0.67 ignores a view's ``ttl`` online: a 2015 window count was served as current (issue
13). :class:`TtlRedisOnlineStore` serves a view of an entity as missing (null, status
``NOT_FOUND``) when its feature time (``_ts:<view>``, the key's newest event) is older than the
view's TTL (:data:`features.config.DEFAULT_TTLS`), as :class:`features.online_source.RedisFeatureSource`
does for the scorer. Select it in ``feature_store.yaml`` with
``type: features.ttl_store.TtlRedisOnlineStore`` (Feast finds ``...Config`` beside it).

Example:
    >>> from datetime import UTC, datetime, timedelta
    >>> now = datetime(2026, 12, 1, tzinfo=UTC)
    >>> expired("stay_1h", now - timedelta(hours=3), now=now), expired("stay_1h", now - timedelta(hours=1), now=now)
    (True, False)
"""

from __future__ import annotations

from collections.abc import ByteString, Sequence
from datetime import UTC, datetime
from typing import Literal

from feast.infra.online_stores.redis import RedisOnlineStore, RedisOnlineStoreConfig
from feast.protos.feast.types.Value_pb2 import Value as ValueProto

from features.config import DEFAULT_TTLS

STORE_TYPE = "features.ttl_store.TtlRedisOnlineStore"


def expired(view: str, feature_time: datetime | None, *, now: datetime) -> bool:
    """True when ``view``'s value with this feature time is past the view's TTL at ``now``."""
    ttl = DEFAULT_TTLS.get(view)
    return feature_time is not None and ttl is not None and now - feature_time > ttl


class TtlRedisOnlineStoreConfig(RedisOnlineStoreConfig):
    """Feast's Redis settings; only the type differs."""

    type: Literal["features.ttl_store.TtlRedisOnlineStore"] = STORE_TYPE  # type: ignore[assignment]


class TtlRedisOnlineStore(RedisOnlineStore):
    """Every online read of Feast's Redis store (single, batched, async) passes through the conversion below."""

    def _convert_redis_values_to_protobuf(
        self,
        redis_values: Sequence[Sequence[ByteString | None]],
        feature_view: str,
        requested_features: list[str],
    ) -> list[tuple[datetime | None, dict[str, ValueProto] | None]]:
        rows = super()._convert_redis_values_to_protobuf(redis_values, feature_view, requested_features)
        now = datetime.now(UTC)
        return [(None, None) if expired(feature_view, _aware(ts), now=now) else (ts, values) for ts, values in rows]


def _aware(ts: datetime | None) -> datetime | None:
    """Feast returns naive UTC datetimes from ``_ts``."""
    return ts if ts is None or ts.tzinfo is not None else ts.replace(tzinfo=UTC)
