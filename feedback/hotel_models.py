"""Per-hotel model bundles: a new hotel's refit on its own labels, published next to the pooled registry.

The pooled models live in :class:`feedback.registry.ModelRegistry` (``root/manifest.json``). A new hotel
that reached cold-start stage ``own`` gets its own bundles (:mod:`feedback.hotel_refit`), published here,
under ``root/hotels``, so that ``serve`` prices that hotel with them (:mod:`delivery.cold_start`).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from feedback.errors import RegistryError
from feedback.registry import Entry, ModelRegistry, read_json_format, write_json_atomic

HOTELS_DIR = "hotels"
HOTEL_INDEX = "index.json"
FORMAT = 1


@dataclass(frozen=True)
class HotelModelSet:
    """The live per-hotel bundles of one hotel (:class:`HotelModels`)."""

    hotel_id: str
    live: dict[str, Entry]
    parents: dict[str, str]
    """The pooled version each tier's bundle was continued from."""
    published_at: str
    examples: int = 0
    """Label rows of its own the refit was trained on."""


class HotelModels:
    """Per-hotel bundles (a new hotel's refit on its own labels), next to the pooled models of ``root``.

    Layout::

        root/hotels/index.json       generation, and per hotel: its directory, live versions, parents
        root/hotels/<key>/           a :class:`ModelRegistry` of that hotel alone (its own manifest,
                                     light/<version>/, heavy/<version>/, promotion history)

    ``<key>`` is a digest of the hotel id (any id is a safe directory name). :meth:`publish`
    registers and promotes the bundles in the hotel's registry, then rewrites the index atomically
    (temporary file + ``os.replace`` under ``root/hotels/.lock``) and bumps its ``generation``:
    a server polls that one integer and loads a hotel's bundles only when it moved.

    Example:
        >>> import json, tempfile, pathlib
        >>> bundle = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (bundle / "model.onnx").write_bytes(b"onnx")
        >>> _ = (bundle / "meta.json").write_text(json.dumps({"version": "light-abc@h-new", "tier": "light"}))
        >>> hotels = HotelModels(tempfile.mkdtemp())
        >>> hotels.publish("h-new", {"light": bundle}, parents={"light": "light-pooled"}).live["light"].version
        'light-abc@h-new'
        >>> hotels.generation, sorted(hotels.live())
        (1, ['h-new'])
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root) / HOTELS_DIR

    @property
    def generation(self) -> int:
        """Bumps on every publish and withdraw."""
        return int(self._index()["generation"])

    def live(self) -> dict[str, HotelModelSet]:
        """Every hotel with published bundles, by hotel id."""
        index = self._index()
        return {hotel: self._set(hotel, row) for hotel, row in index["hotels"].items()}

    def get(self, hotel_id: str) -> HotelModelSet | None:
        """The hotel's live bundles (``None``: none published)."""
        row = self._index()["hotels"].get(hotel_id)
        return None if row is None else self._set(hotel_id, row)

    def registry(self, hotel_id: str) -> ModelRegistry:
        """The hotel's own registry (every version it was ever published with)."""
        return ModelRegistry(self.root / _hotel_key(hotel_id))

    def publish(self, hotel_id: str, bundles: Mapping[str, str | os.PathLike[str]], *,
                parents: Mapping[str, str], examples: int = 0,
                metrics: Mapping[str, Any] | None = None) -> HotelModelSet:
        """Register and promote ``bundles`` (tier -> bundle dir) as the hotel's live models.

        Raises:
            RegistryError: no bundle, an unknown tier, or a bundle the registry refuses.
        """
        if not bundles:
            msg = f"field 'bundles' of hotel {hotel_id!r}: got none, expected a bundle per tier"
            raise RegistryError(msg)
        registry = self.registry(hotel_id)
        live = {}
        for tier, bundle in bundles.items():
            version = registry.register(bundle, tier=tier, parent=parents.get(tier), metrics=metrics)
            live[tier] = registry.promote(version).version
        with self._locked() as index:
            index["hotels"][hotel_id] = {"dir": _hotel_key(hotel_id), "live": live, "parents": dict(parents),
                                         "examples": int(examples),
                                         "published_at": datetime.now(tz=UTC).isoformat()}
            index["generation"] += 1
        published = self.get(hotel_id)
        if published is None:  # the index was written above; only a concurrent withdraw removes it
            msg = f"hotel {hotel_id!r}: withdrawn while it was being published"
            raise RegistryError(msg)
        return published

    def withdraw(self, hotel_id: str) -> bool:
        """Stop serving the hotel's own bundles (servers go back to the pooled ones); False if it had none."""
        with self._locked() as index:
            if index["hotels"].pop(hotel_id, None) is None:
                return False
            index["generation"] += 1
        return True

    def _set(self, hotel_id: str, row: Mapping[str, Any]) -> HotelModelSet:
        registry = ModelRegistry(self.root / row["dir"])
        live = {tier: registry.show(version) for tier, version in row["live"].items()}
        return HotelModelSet(hotel_id, live, dict(row["parents"]), row["published_at"], int(row.get("examples", 0)))

    def _index(self) -> dict[str, Any]:
        return read_json_format(self.root / HOTEL_INDEX, FORMAT, {"generation": 0, "hotels": {}})

    @contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                index = self._index()
                yield index
                write_json_atomic(self.root, HOTEL_INDEX, index)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def _hotel_key(hotel_id: str) -> str:
    return "h-" + hashlib.sha256(hotel_id.encode("utf-8")).hexdigest()[:20]
