"""A new hotel's own models in the deployed system: its training examples, refitted when it reaches ``own``.

Stage three of cold start (:mod:`pricing.cold_start`) refits the pooled models on a new hotel's own
labels. In the deployed system those labels are the ``training.examples`` the trainer service consumes
(decisions joined with outcomes by the label service, selected and weighted by the sampler). The trainer
hands each example to :meth:`HotelRefitter.learn`; the refitter keeps the rows of the hotels the
cold-start history (:class:`delivery.cold_start.HistoryStore`, written by ``serve``) records as
new and forgets the mature ones. After each batch, :meth:`HotelRefitter.step` asks each new hotel's stage
of the history (its label counts are the label service's); a hotel in stage ``own`` is refitted
(:func:`pricing.cold_start.refit_bundles`: continued training from the live pooled bundles, a seeded
sample of the trainer's snapshot as pooled rows) when

* it has no refit yet,
* the pooled version its refit was continued from is no longer live (the trainer promoted a newer one), or
* its own rows have grown :data:`REFIT_GROWTH` times since its last refit,

and it has ``min_examples`` rows of its own with both outcomes among them. The bundles are published under
the hotel (:class:`feedback.hotel_models.HotelModels`), their versions tagged with it
(``light-<sha>@<hotel>``, :func:`tag_version`): a decision's ``model_version`` says whose model priced
it. A refit that fails is kept in :attr:`HotelRefitter.errors` and logged; the trainer goes on, and the
hotel is tried again on its next batch of rows.

Example:
    >>> from delivery.cold_start import MemoryHistoryStore
    >>> hotels, store = HotelModels("/nonexistent-registry"), MemoryHistoryStore()
    >>> refitter = HotelRefitter(RefitConfig(), history=store, hotels=hotels, pooled=lambda: {})
    >>> refitter.learn({"hotel_id": "h-new", "decision_id": "d1", "booked": 1, "event_time": 0})
    >>> refitter.rows_of("h-new")
    1
    >>> own_tag("Resort Hotel/1")[:2], own_tag("h-new")
    ('h-', 'h-new')
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from delivery.cold_start import MATURE, HistoryStore
from feedback.hotel_models import HotelModels, HotelModelSet
from feedback.registry import Entry
from pricing.cold_start import ColdStartConfig, HotelHistory, refit_bundles, stage_of
from pricing.training import META_FILE, read_meta

log = logging.getLogger(__name__)

REFIT_GROWTH = 2.0
"""A published hotel is refitted again once its own rows have grown this many times: a doubling of its labels
is where its estimate moves by more than the noise between two refits on overlapping rows (and it bounds the
refits of a hotel to a logarithm of its labels)."""
MAX_ROWS = 20_000
"""Rows kept per new hotel (the oldest go first): more than a new hotel needs before it is a mature one."""
_SAFE_TAG = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class RefitConfig(BaseModel):
    """Settings of the per-hotel refit (``PRICESTREAM_COLD_START_REFIT*`` and the stage thresholds)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cold_start: ColdStartConfig = ColdStartConfig()
    min_examples: int = Field(default=50, ge=50)
    """Rows of its own before a hotel is refitted (50: the fewest a bundle is trained on)."""
    seed: int = 0


@dataclass
class _Rows:
    rows: list[dict[str, Any]] = field(default_factory=list)
    refitted_at: int = 0
    """Rows it had at its last published refit (0: none)."""


def own_tag(hotel_id: str) -> str:
    """The hotel as it appears in its models' versions: the id itself if it is a safe file name, else a digest."""
    if _SAFE_TAG.match(hotel_id) and hotel_id not in (".", ".."):
        return hotel_id
    return "h-" + hashlib.sha256(hotel_id.encode("utf-8")).hexdigest()[:16]


def tag_version(bundle: Path, hotel_id: str) -> str:
    """Rewrite ``bundle``'s version as ``<version>@<hotel>`` (and record the hotel); the new version."""
    meta = read_meta(bundle)
    meta["version"] = f"{meta['version']}@{own_tag(hotel_id)}"
    meta["hotel_id"] = hotel_id
    (bundle / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True), encoding="utf-8")
    return str(meta["version"])


class HotelRefitter:
    """Keeps new hotels' training rows and refits and publishes their models in stage ``own`` (module docstring).

    Args:
        config: thresholds and refit settings.
        history: the cold-start history ``serve`` writes (first request, label counts).
        hotels: where the per-hotel bundles are published.
        pooled: the live pooled entries by tier (``{"light": Entry, "heavy": Entry}``).
        pooled_frame: rows the pooled models were trained on (a sample enters each refit); ``None``: none.
    """

    def __init__(self, config: RefitConfig, *, history: HistoryStore, hotels: HotelModels,
                 pooled: Callable[[], Mapping[str, Entry]],
                 pooled_frame: Callable[[], pd.DataFrame | None] | None = None) -> None:
        self.config, self.history, self.hotels = config, history, hotels
        self.pooled, self.pooled_frame = pooled, pooled_frame
        self._hotels: dict[str, _Rows] = {}
        self._mature: set[str] = set()
        self.errors: dict[str, str] = {}
        self.published: list[HotelModelSet] = []

    def learn(self, row: Mapping[str, Any]) -> None:
        """One training row (:func:`feedback.services.trainer_service.example_row`) of a hotel."""
        hotel = str(row["hotel_id"])
        if hotel in self._mature:
            return
        kept = self._hotels.setdefault(hotel, _Rows())
        kept.rows.append(dict(row))
        del kept.rows[: max(0, len(kept.rows) - MAX_ROWS)]

    def rows_of(self, hotel_id: str) -> int:
        """Rows kept of the hotel."""
        kept = self._hotels.get(hotel_id)
        return 0 if kept is None else len(kept.rows)

    def step(self) -> list[HotelModelSet]:
        """Refit and publish every new hotel that is due (see the module docstring); what was published."""
        out = []
        for hotel in list(self._hotels):
            try:
                published = self._maybe_refit(hotel)
            except Exception as exc:  # noqa: BLE001 - one hotel's refit must not stop the trainer or the others
                reason = f"{type(exc).__name__}: {exc}"[:300]
                if self.errors.get(hotel) != reason:
                    log.warning("refit of hotel %r failed: %s", hotel, reason)
                self.errors[hotel] = reason
                continue
            if published is not None:
                self.errors.pop(hotel, None)
                out.append(published)
        self.published += out
        return out

    def state_dict(self) -> dict[str, Any]:
        """Rows and refit marks, for the trainer's checkpoint."""
        return {"hotels": {h: (k.rows, k.refitted_at) for h, k in self._hotels.items()}, "mature": set(self._mature)}

    def load_state(self, state: Mapping[str, Any]) -> None:
        self._hotels = {h: _Rows(list(rows), int(at)) for h, (rows, at) in state.get("hotels", {}).items()}
        self._mature = set(state.get("mature", ()))

    # ------------------------------------------------------------------ internals
    def _maybe_refit(self, hotel: str) -> HotelModelSet | None:
        kept = self._hotels[hotel]
        first = self._first_seen(hotel)
        if first is None or len(kept.rows) < self.config.min_examples:
            return None
        at = pd.to_datetime(max(r["event_time"] for r in kept.rows), utc=True).to_pydatetime()
        labels, bookings = self.history.counts(hotel)
        if stage_of(HotelHistory(first, labels, bookings), at, self.config.cold_start)[0] != "own":
            return None
        pooled = dict(self.pooled())
        if not pooled or not self._due(hotel, kept, len(kept.rows), pooled):
            return None
        frame = _latest(kept.rows)
        if len(frame) < self.config.min_examples or frame["booked"].nunique() < 2:
            return None
        published = self._refit(hotel, frame, pooled)
        kept.refitted_at = len(kept.rows)
        return published

    def _first_seen(self, hotel: str) -> datetime | None:
        """The hotel's first request as ``serve`` recorded it; ``None`` if it is mature (forgotten) or unrecorded."""
        raw = self.history.recorded(hotel)
        if raw == MATURE:
            self._mature.add(hotel)
            self._hotels.pop(hotel, None)
        return None if raw in (None, MATURE) else datetime.fromisoformat(str(raw))

    def _due(self, hotel: str, kept: _Rows, rows: int, pooled: Mapping[str, Entry]) -> bool:
        current = self.hotels.get(hotel)
        if current is None:
            return True
        if any(current.parents.get(tier) != entry.version for tier, entry in pooled.items()):
            return True
        return rows >= REFIT_GROWTH * max(kept.refitted_at, current.examples, 1)

    def _refit(self, hotel: str, frame: pd.DataFrame, pooled: Mapping[str, Entry]) -> HotelModelSet:
        rows = None if self.pooled_frame is None else self.pooled_frame()
        with tempfile.TemporaryDirectory(prefix="pricestream-refit-") as tmp:
            paths = refit_bundles([e.path for e in pooled.values()], frame, tmp, config=self.config.cold_start,
                                  pooled_frame=rows, seed=self.config.seed)
            bundles = {}
            for path in paths:
                tag_version(path, hotel)
                bundles[str(read_meta(path)["tier"])] = path
            published = self.hotels.publish(
                hotel, bundles, parents={tier: e.version for tier, e in pooled.items()}, examples=len(frame),
                metrics={"examples": len(frame), "bookings": int(frame["booked"].sum()),
                         "refitted_at": datetime.now(tz=UTC).isoformat()})
        log.info("published the own models of hotel %r: %s", hotel,
                 {tier: e.version for tier, e in published.live.items()})
        return published


def _latest(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per decision, its latest revision (as the trainer's pooled updates)."""
    frame = pd.DataFrame(rows)
    if frame.empty or "decision_id" not in frame.columns:
        return frame
    return frame.sort_values("event_time", kind="stable").drop_duplicates("decision_id", keep="last")
