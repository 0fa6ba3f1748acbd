"""The hash chain of the audit log: canonical JSON, the MAC of an entry, the digest of a decision's input.

The writer (:class:`audit.log.AuditLog`) and the verifier (:func:`audit.verify.verify`) both use these, so
they hash the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

from pydantic import SecretStr

from audit.anchors import mac_hex, resolve_key
from events.models import PricingRequest

AuditKey = str | bytes | SecretStr | None
"""An audit MAC key: a secret from settings, raw bytes, or None for the development key."""

GENESIS_HASH = "0" * 64
"""``prev_hash`` of the first entry of a log."""

def canonical_json(obj: object) -> str:
    """Canonical JSON: sorted keys, no spaces, non-finite floats spelled as strings.

    Example:
        >>> canonical_json({"b": 1, "a": [float("nan"), 2.5]})
        '{"a":["NaN",2.5],"b":1}'
    """
    try:  # nearly every body is plain JSON already: one C-level dump, no walk
        return _CANONICAL.encode(obj)
    except (ValueError, TypeError):  # a non-finite float (or a mapping json cannot take): spelled out, then dumped
        return _CANONICAL.encode(_finite(obj))


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""The one encoder of the canonical form: the writer's and the verifier's text must be the same bytes."""


def _finite(obj: object) -> object:
    if isinstance(obj, float) and not math.isfinite(obj):
        return "NaN" if math.isnan(obj) else ("Infinity" if obj > 0 else "-Infinity")
    if isinstance(obj, Mapping):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def sha256_hex(text: str) -> str:
    """Hex sha256 of a UTF-8 string."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chain_hash(prev_hash: str, body: Mapping[str, Any], key: AuditKey = None) -> str:
    """MAC of an entry: ``HMAC-SHA256(key, prev_hash + canonical(body))`` (``body`` excludes ``hash``).

    Example:
        >>> chain_hash(GENESIS_HASH, {"seq": 1}, "k") == chain_hash(GENESIS_HASH, {"seq": 1}, "other")
        False
    """
    return mac_hex(resolve_key(key), prev_hash + canonical_json(body))


def input_digest(request: PricingRequest, features: Mapping[str, float | None]) -> str:
    """sha256 of the canonical decision input (the request and the features it saw)."""
    return sha256_hex(canonical_json({"request": request.model_dump(mode="json"), "features": dict(features)}))
