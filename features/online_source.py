"""The scorer's online feature source: every view of a request from Redis in one round trip.

:class:`RedisFeatureSource` implements :class:`pricing.feature_source.FeatureSource`. It reads
the hashes that Feast's Redis online store reads (and :mod:`features.online_writer` writes):
one ``HMGET`` on the stay key for the five stay views and one on the hotel key for
``hotel_stats``, pipelined (on a Redis Cluster, ``redis+cluster://`` URLs, the pipeline sends each
``HMGET`` to the master of its key's slot, one round trip per master). Values are Feast ``Value``
protos; doubles are decoded straight from their 9 bytes (tag + little-endian float64), the rest
through protobuf. Derived ratios come from :func:`events.catalog.derive`.

``version`` of a read is the newest view version, ``event_time`` the newest view event time:
the state of the key as of its latest update. A view whose feature time is older than its TTL
(:data:`features.config.DEFAULT_TTLS`) is read as missing, as Feast reads it
(:mod:`features.ttl_store`); the read's ``event_time`` still counts it, so a key whose every view
expired reads as old and the scorer prices it as stale (``stale_after_s``).

Example (needs Redis, so not run here)::

    source = RedisFeatureSource(FeaturesConfig(project="pricestream"))
    read = source.read("h1", "std", date(2026, 12, 24))
    read.values["occupancy"], read.version
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime

from events.catalog import ALL_FEATURES, HOTEL_KEYS, STAY_KEYS, VIEWS, derive
from events.redact import redact, redact_exception
from features.config import FeaturesConfig
from features.connection import STORE_ERRORS, RedisClient, redis_client
from features.layout import decode_double, decode_ts, redis_key, view_fields
from features.ttl_store import expired
from pricing.errors import FeatureStoreUnavailable
from pricing.feature_source import FeatureRead

_STAY_VIEWS = tuple(v for v, (keys, _) in VIEWS.items() if keys == STAY_KEYS)
_HOTEL_VIEWS = tuple(v for v, (keys, _) in VIEWS.items() if keys == HOTEL_KEYS)


def _plan(views: tuple[str, ...]) -> tuple[list[bytes], list[tuple[str, tuple[str, ...], int]]]:
    """HMGET fields for ``views`` and, per view, (name, features, offset of its first field)."""
    fields: list[bytes] = []
    layout = []
    for view in views:
        layout.append((view, VIEWS[view][1], len(fields)))
        fields.extend(view_fields(view))
    return fields, layout


_STAY_FIELDS, _STAY_LAYOUT = _plan(_STAY_VIEWS)
_HOTEL_FIELDS, _HOTEL_LAYOUT = _plan(_HOTEL_VIEWS)
_EMPTY_VALUES: dict[str, float | None] = dict.fromkeys(ALL_FEATURES)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class RedisFeatureSource:
    """Online features of stay keys, read from Feast's Redis layout.

    Args:
        config: feature store settings (Redis address, project).
        client: an existing redis-py client (else one is made from ``config``, with its timeouts).
    """

    def __init__(self, config: FeaturesConfig, *, client: RedisClient | None = None,
                 clock: Callable[[], datetime] = _utc_now) -> None:
        self.config = config
        self._project = config.project
        self._client = client if client is not None else redis_client(config)
        self._clock = clock

    def read(self, hotel_id: str, room_type: str, stay_date: date) -> FeatureRead:
        """Features of one stay key (all None, version None, when nothing is stored).

        Raises:
            FeatureStoreUnavailable: Redis cannot be reached or times out.
        """
        return self.read_many([(hotel_id, room_type, stay_date)])[0]

    def read_many(self, keys: Sequence[tuple[str, str, date]]) -> list[FeatureRead]:
        """Features of many stay keys, in order, in one pipelined round trip."""
        try:
            with self._client.pipeline(transaction=False) as pipe:
                for hotel_id, room_type, stay_date in keys:
                    stay = (hotel_id, room_type, stay_date.isoformat())
                    pipe.hmget(redis_key(STAY_KEYS, stay, self._project), _STAY_FIELDS)
                    pipe.hmget(redis_key(HOTEL_KEYS, (hotel_id,), self._project), _HOTEL_FIELDS)
                replies = pipe.execute()
        except STORE_ERRORS as exc:
            msg = f"Redis at {redact(self.config.redis_url)!r} could not be read: {redact_exception(exc)}"
            raise FeatureStoreUnavailable(msg) from exc
        now = self._clock()
        return [_decode(replies[i], replies[i + 1], now) for i in range(0, len(replies), 2)]

    def close(self) -> None:
        self._client.close()


def _decode(stay: list[bytes | None], hotel: list[bytes | None], now: datetime) -> FeatureRead:
    values = dict(_EMPTY_VALUES)
    version: int | None = None
    event_time: datetime | None = None
    for reply, layout in ((stay, _STAY_LAYOUT), (hotel, _HOTEL_LAYOUT)):
        for view, names, start in layout:
            end = start + len(names)
            raw_version = reply[end + 1]
            ts = decode_ts(reply[end])
            if raw_version is None:
                continue
            if ts is not None and (event_time is None or ts > event_time):
                event_time = ts  # expired or not: an old newest event time makes the scorer price as stale
            if expired(view, ts, now=now):
                continue
            for name, raw in zip(names, reply[start:end], strict=True):
                values[name] = decode_double(raw)
            view_version = int(raw_version)
            version = view_version if version is None else max(version, view_version)
    return FeatureRead(derive(values), version, event_time)
