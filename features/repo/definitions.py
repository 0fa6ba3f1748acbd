"""Feast definitions for ``feast -c features/repo apply``: the catalogue views over the offline store.

The objects come from :func:`features.store.feast_objects`, the same builder that programmatic
stores use, over the offline store the ``pricestream`` commands write (``PRICESTREAM_OFFLINE_ROOT``,
else ``<state>/data/offline``: :func:`features.repo.local.offline_root`).
"""

from __future__ import annotations

from features.repo.local import offline_root
from features.store import feast_objects

OFFLINE_ROOT = offline_root()

(hotel, room_type, stay_date, *_views_and_pushes) = feast_objects(OFFLINE_ROOT)
(stay_1h, stay_24h, stay_7d, stay_14d, stay_inventory, hotel_stats) = _views_and_pushes[:6]
(stay_1h_push, stay_24h_push, stay_7d_push, stay_14d_push, stay_inventory_push, hotel_stats_push) = (
    _views_and_pushes[6:]
)
