"""The Redis layout of Feast's Redis online store, reproduced byte for byte (and one field of ours).

Feast 0.67 (``feast/infra/online_stores/redis.py``) keeps one Redis hash per entity key:

* key: ``serialize_entity_key(EntityKey(sorted join keys, values), v3) + project``;
* field ``mmh3_32("<view>:<feature>")`` (4 bytes, little endian): a serialised ``feast.types.Value``;
* field ``_ts:<view>``: a serialised ``google.protobuf.Timestamp`` (the event time).

We add ``_v:<view>`` holding the row ``version`` as a decimal string: the compare-and-set script
of :mod:`features.online_writer` compares it, and Feast ignores fields it did not ask for.

Example:
    >>> key = redis_key(("hotel_id",), ("h1",), "demo")
    >>> key == _feast_key(("hotel_id",), ("h1",), "demo")
    True
    >>> decode_double(encode_double(0.25)), decode_double(b"")
    (0.25, None)
    >>> decode_ts(encode_ts(1761998400123)).isoformat()
    '2025-11-01T12:00:00.123000+00:00'
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import cache

from feast.infra.key_encoding_utils import serialize_entity_key, serialize_entity_key_prefix
from feast.infra.online_stores.helpers import _mmh3
from feast.protos.feast.types.EntityKey_pb2 import EntityKey
from feast.protos.feast.types.Value_pb2 import Value, ValueType
from google.protobuf.timestamp_pb2 import Timestamp

from events.catalog import VIEWS

_STRING = struct.pack("<I", ValueType.STRING)
_DOUBLE_TAG = b"\x29"  # Value.double_val is field 5, wire type 1 (64-bit): (5 << 3) | 1
_DOUBLE = struct.Struct("<d")


@cache
def _key_prefix(keys: tuple[str, ...]) -> bytes:
    return serialize_entity_key_prefix(sorted(keys), entity_key_serialization_version=3)


def entity_key_prefix(keys: Sequence[str]) -> bytes:
    """The start of every entity key of these join keys (the values and the project follow)."""
    return _key_prefix(tuple(keys))


def string_tag() -> bytes:
    """What precedes each string value in an entity key (its length, little endian, and bytes follow)."""
    return _STRING


def redis_key(keys: Sequence[str], values: Sequence[str], project: str) -> bytes:
    """The hash key Feast reads for these join keys and values (``keys`` sorted by name)."""
    parts = [_key_prefix(tuple(keys))]
    for value in values:
        raw = value.encode()
        parts.append(_STRING + struct.pack("<I", len(raw)) + raw)
    parts.append(project.encode())
    return b"".join(parts)


def _feast_key(keys: Sequence[str], values: Sequence[str], project: str) -> bytes:
    """Feast's own encoding (the reference :func:`redis_key` is tested against)."""
    ek = EntityKey(join_keys=list(keys), entity_values=[Value(string_val=v) for v in values])
    return serialize_entity_key(ek, entity_key_serialization_version=3) + project.encode()


@cache
def feature_field(view: str, feature: str) -> bytes:
    return bytes(_mmh3(f"{view}:{feature}"))


def ts_field(view: str) -> bytes:
    return f"_ts:{view}".encode()


def version_field(view: str) -> bytes:
    return f"_v:{view}".encode()


@cache
def view_fields(view: str) -> tuple[bytes, ...]:
    """Hash fields of one view, in catalogue order: its features, then ``_ts`` and ``_v``."""
    return (*(feature_field(view, f) for f in VIEWS[view][1]), ts_field(view), version_field(view))


def encode_double(value: float | None) -> bytes:
    """A ``Value`` proto; None is the empty message, which Feast reads as null."""
    return b"" if value is None else _DOUBLE_TAG + _DOUBLE.pack(value)


def decode_double(raw: bytes | None) -> float | None:
    """Inverse of :func:`encode_double`; other ``Value`` kinds go through protobuf."""
    if not raw:
        return None
    if len(raw) == 9 and raw[:1] == _DOUBLE_TAG:
        return float(_DOUBLE.unpack_from(raw, 1)[0])
    value = Value.FromString(raw)
    kind = value.WhichOneof("val")
    if kind is None or kind == "null_val":
        return None
    return float(getattr(value, kind))


def encode_ts(ms: int) -> bytes:
    ts = Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)
    return ts.SerializeToString()


def decode_ts(raw: bytes | None) -> datetime | None:
    if not raw:
        return None
    ts = Timestamp.FromString(raw)
    return datetime.fromtimestamp(ts.seconds, tz=UTC).replace(microsecond=ts.nanos // 1000)
