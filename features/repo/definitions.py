"""Feast definitions for ``feast -c features/repo apply``: the catalogue views over the offline store.

The objects come from :func:`features.store.feast_objects`, the same builder that programmatic
stores use. ``PRICESTREAM_OFFLINE_ROOT`` names the offline parquet root for the CLI (the Feast CLI
is an entry point, like ``feature_store.yaml`` with its ``${VAR}`` substitution); it defaults to
``<repo>/.state/offline``.
"""

from __future__ import annotations

import os
from pathlib import Path

from features.store import feast_objects

_DEFAULT_OFFLINE = Path(__file__).resolve().parents[2] / ".state" / "offline"
OFFLINE_ROOT = Path(os.environ.get("PRICESTREAM_OFFLINE_ROOT", str(_DEFAULT_OFFLINE)))

(hotel, room_type, stay_date, *_views_and_pushes) = feast_objects(OFFLINE_ROOT)
(stay_1h, stay_24h, stay_7d, stay_14d, stay_inventory, hotel_stats) = _views_and_pushes[:6]
(stay_1h_push, stay_24h_push, stay_7d_push, stay_14d_push, stay_inventory_push, hotel_stats_push) = (
    _views_and_pushes[6:]
)
