"""The local stack as the stock Feast SDK and CLI find it: registry, Redis and offline store from the settings.

``features/repo/feature_store.yaml`` names these classes, so ``FeatureStore(repo_path="features/repo")`` and
``feast -c features/repo ...`` open the store the ``pricestream`` commands use, with no variable to export:
the registry at ``Settings().features().registry`` (``<state>/data/feast/registry.db``), Redis at
``PRICESTREAM_REDIS_URL`` or the local stack's (a secure stack's admin login included), views over
``Settings().offline()``. Every ``PRICESTREAM_*`` setting still applies, as for any command.
``PRICESTREAM_FEAST_REGISTRY`` and ``PRICESTREAM_FEAST_REDIS`` (a Feast connection string) name a registry
file and a Redis of their own.

Example:
    >>> import os, tempfile
    >>> from pathlib import Path
    >>> state = tempfile.mkdtemp()
    >>> os.environ["PRICESTREAM_STATE_DIR"] = state
    >>> local_registry() == Path(state) / "data" / "feast" / "registry.db"
    True
    >>> LocalRedisOnlineStoreConfig().connection_string.split(",")[1]
    'db=0'
    >>> del os.environ["PRICESTREAM_STATE_DIR"]
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from feast.infra.registry.file import FileRegistryStore
from pydantic import model_validator

from features.ttl_store import TtlRedisOnlineStore, TtlRedisOnlineStoreConfig

if TYPE_CHECKING:
    from feast.repo_config import RegistryConfig

    from features.config import FeaturesConfig

STORE_TYPE = "features.repo.local.LocalRedisOnlineStore"


def _features() -> FeaturesConfig:
    from pricestream.settings import Settings  # here: the settings import the feature package

    return Settings().features()


def local_registry() -> Path:
    """The registry file of the local stack (``PRICESTREAM_FEAST_REGISTRY`` when set)."""
    named = os.environ.get("PRICESTREAM_FEAST_REGISTRY")
    return Path(named) if named else _features().registry


def offline_root() -> Path:
    """The offline store the views read (``PRICESTREAM_OFFLINE_ROOT``, else ``<state>/data/offline``)."""
    from pricestream.settings import Settings

    return Settings().offline()


class LocalRegistryStore(FileRegistryStore):
    """Feast's file registry at :func:`local_registry`, whatever ``path`` the yaml holds."""

    def __init__(self, registry_config: RegistryConfig, repo_path: Path) -> None:
        super().__init__(registry_config, repo_path)
        self._filepath = local_registry()
        self._filepath.parent.mkdir(parents=True, exist_ok=True)


class LocalRedisOnlineStoreConfig(TtlRedisOnlineStoreConfig):
    """The TTL-aware Redis store at the local stack's Redis unless the yaml gives a ``connection_string``."""

    type: Literal["features.repo.local.LocalRedisOnlineStore"] = STORE_TYPE  # type: ignore[assignment]

    @model_validator(mode="before")
    @classmethod
    def _local_redis(cls, data: object) -> object:
        if isinstance(data, dict) and not data.get("connection_string"):
            from features.store import feast_redis

            named = os.environ.get("PRICESTREAM_FEAST_REDIS")
            local = {"connection_string": named, "redis_type": "redis"} if named else feast_redis(_features())
            return {**data, **local}
        return data


class LocalRedisOnlineStore(TtlRedisOnlineStore):
    """:class:`features.ttl_store.TtlRedisOnlineStore` configured by :class:`LocalRedisOnlineStoreConfig`."""
