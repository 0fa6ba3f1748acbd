"""Cold start in the deployed service: each hotel priced in its stage, the stage recorded on the decision.

:class:`StagedScorer` is the service's :class:`~pricing.scorer.Scorer` with the stage rule of
:mod:`pricing.cold_start` in front of it. A hotel's stage comes from its history in a
:class:`HistoryStore` (Redis in the service, :class:`RedisHistoryStore`, shared by every
replica and kept across restarts):

* the first time the platform prices a hotel, the store records when, or that it is ``mature``
  when the feature store already holds behaviour of it (:data:`HISTORY_FEATURES`): a hotel that
  traded before the service first priced it (a fleet at deploy time) is not a new hotel;
* ``rules`` while its history is shorter than ``transfer_after_days``: the rules tier prices it
  (the same rules file, no model), with no degradation flagged: it is the plan, not a fault; no lower
  than the night's bid price by the pooled light pricer (``ColdStartConfig.rules_bid_floor``,
  :func:`pricing.cold_start.bid_floored`; rule id ``cold_start_bid_floor`` when it binds);
* ``transfer`` after that, ``own`` once it has ``own_after_labels`` labels with
  ``own_after_bookings`` bookings (counters in the same store: the label service sets its totals of
  the labels it wrote, :meth:`HistoryStore.set_joined`; ``pricestream cold-start labels`` adds by hand,
  :meth:`HistoryStore.add_labels`):
  the registry's models price it: the pooled pair, which the trainer keeps training on every hotel's
  labels, for the mature hotels; for a new hotel, its own refit once one is published.

Stage three's refit runs in the trainer service (:mod:`feedback.hotel_refit`): it keeps the
``training.examples`` of the new hotels, and when one reaches ``own`` it continues the live pooled
bundles on them and publishes the result under the hotel (:class:`feedback.hotel_models.HotelModels`,
``<registry>/hotels``; ``pricestream cold-start refit --publish`` does it from a file of labels). This
scorer follows those through a :class:`HotelModelSource`: :meth:`StagedScorer.reload_hotels` (called by
the serving path's follower every ``follow_interval_s``) loads a hotel's bundles when the source's
``generation`` moved, so a new refit is served without a restart, and after one from the published
files. A new hotel in stage ``own`` is then priced by its own models (the decision's ``model_version``
is ``<version>@<hotel>``); with none published yet, or one that does not load, by the pooled ones, with
the reason as a rule id before the stage (:data:`NO_REFIT`, :data:`BAD_REFIT`; the load error in
:attr:`StagedScorer.own_errors` and ``/healthz``). Mature hotels and the other stages are unchanged.

Every decision of a staged hotel ends its ``rule_ids`` with ``cold_start:<stage>`` (the tier
says which tier priced it). While a new hotel's history is shorter than a window its window
counts are read at full length (:class:`~pricing.cold_start.PartialWindows`, over the history's
``first_seen``, at the time of the request being priced).

Example:
    >>> from datetime import UTC, date, datetime, timedelta
    >>> from events.models import PricingRequest
    >>> from pricing.cold_start import ColdStartConfig
    >>> from pricing.feature_source import MemoryFeatureSource
    >>> from pricing.rules import RuleSet
    >>> from pricing.scorer import Scorer, ScorerConfig
    >>> from routing.router import TieredRouter

if TYPE_CHECKING:
    from pricing.tiers import TierPricer
    >>> src = MemoryFeatureSource()
    >>> src.put("h-old", "std", date(2026, 5, 20), {"views_7d": 40.0})
    >>> store = MemoryHistoryStore()
    >>> pooled = Scorer(ScorerConfig(stale_after_s=None), rules=RuleSet.from_yaml("min_price: 50\\nmax_price: 500\\n"),
    ...                 feature_source=src, light=None, heavy=None, router=TieredRouter())
    >>> s = StagedScorer(pooled, history=store, cold_start=ColdStartConfig())
    >>> t0 = datetime(2026, 5, 1, tzinfo=UTC)
    >>> d = s.price(PricingRequest(hotel_id="h-new", room_type="std", stay_date=date(2026, 5, 20), event_time=t0))
    >>> d.tier, d.rule_ids[-1], d.degraded
    ('rules', 'cold_start:rules', False)
    >>> s.price(PricingRequest(hotel_id="h-old", room_type="std", stay_date=date(2026, 5, 20),
    ...                        event_time=t0)).rule_ids[-1]
    'cold_start:own'
    >>> s.stage("h-new", t0 + timedelta(days=2))
    ('transfer', 'transfer: 2.0 days of history >= 1.0; 0 labels < 300 or 0 bookings < 10')
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from delivery.cold_start_history import MATURE as MATURE
from delivery.cold_start_history import HistoryStore as HistoryStore
from delivery.cold_start_history import MemoryHistoryStore as MemoryHistoryStore
from delivery.cold_start_history import RedisHistoryStore as RedisHistoryStore
from delivery.cold_start_history import history_prefix as history_prefix
from events.models import PricingDecision, PricingRequest
from pricing import degraded as dg
from pricing.cold_start import RULE_PREFIX, ColdStartConfig, HotelHistory, PartialWindows, Stage, bid_floored, stage_of
from pricing.exploration import ExplorationConfig, exploring
from pricing.feature_source import FeatureSource
from pricing.metrics import ScorerMetrics
from pricing.scorer import ModelEntry, Scorer, Trail
from routing.router import TieredRouter

if TYPE_CHECKING:
    from pricing.tiers import TierPricer

log = logging.getLogger(__name__)

HISTORY_FEATURES = ("views_7d", "bookings_14d", "hotel_views_24h", "hotel_bookings_24h")
"""Behaviour counts that show a hotel traded before its first request: any above 0 makes it mature. Views
and bookings need a price shown before; searches do not (a new hotel's first shoppers search as it asks for
its first price), so they are not among them."""
COUNTS_TTL_S = 30.0
"""Seconds a hotel's label counts are cached: they move by the label service's pace, not per request."""
NO_REFIT = RULE_PREFIX + "pooled:no_refit"
"""Rule id of a new hotel in stage ``own`` priced by the pooled models because no refit of it is published yet."""
BAD_REFIT = RULE_PREFIX + "pooled:bad_refit"
"""Rule id of a new hotel in stage ``own`` priced by the pooled models because its published refit does not load
(the reason: :attr:`StagedScorer.own_errors`, ``/healthz``, the log)."""


class HotelModelSet(Protocol):
    """A hotel's live own bundles by tier (:class:`feedback.hotel_models.HotelModelSet`)."""

    @property
    def live(self) -> Mapping[str, ModelEntry]: ...


class HotelModelSource(Protocol):
    """Where the per-hotel refits are published (:class:`feedback.hotel_models.HotelModels`)."""

    @property
    def generation(self) -> int: ...

    def live(self) -> Mapping[str, HotelModelSet]: ...


_PRICING_AT: contextvars.ContextVar[datetime | None] = contextvars.ContextVar("pricing_at", default=None)
"""The time of the request being priced in this thread (the clock of :class:`PartialWindows`)."""


class StagedScorer(Scorer):
    """The service's scorer with the cold-start stage rule in front (see the module docstring).

    Args:
        pooled: the routed scorer of every mature hotel (its config, rules, features, models, router,
            metrics, audit sink and decision callback are this scorer's own).
        history: the hotels' first sights and label counts.
        cold_start: the thresholds (settings ``PRICESTREAM_COLD_START_*``).
        partial_windows: read a new hotel's window counts at full length (:class:`PartialWindows`).
        counts_ttl_s: seconds a hotel's label counts are cached (:data:`COUNTS_TTL_S`).
        explore_transfer: how a hotel's prices are explored in stage ``transfer`` (logged propensities,
            :mod:`pricing.exploration`: its own labels then identify its elasticity), on the same loaded
            models; ``None``: as every other hotel (settings ``PRICESTREAM_COLD_START_EXPLORE_*``).
        hotel_models: the published per-hotel refits (:meth:`reload_hotels` follows them); ``None``: none.
        load_pricer: bundle dir -> tier pricer for those (``pricing.tiers.load_pricer`` when ``None``).
    """

    def __init__(self, pooled: Scorer, *, history: HistoryStore, cold_start: ColdStartConfig,
                 partial_windows: bool = True, counts_ttl_s: float = COUNTS_TTL_S,
                 explore_transfer: ExplorationConfig | None = None, hotel_models: HotelModelSource | None = None,
                 load_pricer: Callable[[Path], TierPricer] | None = None) -> None:
        super().__init__(pooled.config, rules=pooled.rules, feature_source=pooled.feature_source,
                         light=pooled.light, heavy=pooled.heavy, router=pooled.router, stats=pooled.stats,
                         audit=pooled.audit, on_decision=pooled.on_decision)
        self.history, self.cold_start, self.counts_ttl_s = history, cold_start, counts_ttl_s
        self.explore_transfer = explore_transfer
        self.hotel_models, self.load_pricer = hotel_models, load_pricer
        self._own: dict[str, tuple[dict[str, str], Scorer]] = {}
        self._own_generation: int | None = None
        self.own_errors: dict[str, str] = {}
        """Hotels whose published refit does not load, and why (they are priced by the pooled models)."""
        self._first: dict[str, datetime | None] = {}
        self._counts: dict[str, tuple[float, tuple[int, int]]] = {}
        self.raw_source: FeatureSource = self.feature_source
        if partial_windows:
            self.feature_source = PartialWindows(self.raw_source, first_seen=self._first.get,
                                                 clock=_PRICING_AT.get)
        # stage one: the same rules and features, no model; its own metrics (its "no light model" is the plan)
        self._rules = Scorer(self.config, rules=self.rules, feature_source=self.feature_source, light=None,
                             heavy=None, router=TieredRouter(), stats=ScorerMetrics())

    def stage(self, hotel_id: str, at: datetime, *, request: PricingRequest | None = None) -> tuple[Stage, str]:
        """The stage of ``hotel_id`` at ``at`` and why.

        A hotel the store has not seen is recorded now: mature if the feature store holds behaviour of
        it at ``request``'s key (new without a request). If the store cannot be read the hotel is priced
        as before cold start (stage ``own``), and asked again on its next request.
        """
        try:
            first = self._first_seen(hotel_id, at, request)
        except Exception as exc:  # noqa: BLE001 - a valid request is always priced; the scorer degrades on its own
            return "own", f"own: the hotel history store failed ({type(exc).__name__}), priced as before cold start"
        if first is None:
            return "own", "own: a mature hotel, with behaviour in the feature store before its first request"
        if (at - first).total_seconds() < self.cold_start.transfer_after_days * 86_400.0:
            return stage_of(HotelHistory(first, 0, 0), at, self.cold_start)
        labels, bookings = self._label_counts(hotel_id)
        return stage_of(HotelHistory(first, labels, bookings), at, self.cold_start)

    def reload_hotels(self) -> bool:
        """Load the per-hotel refits when their source's ``generation`` moved; True if any hotel changed.

        A hotel whose bundles do not load keeps no own scorer (the pooled models price it, rule id
        :data:`BAD_REFIT`) and its reason is kept in :attr:`own_errors`; a withdrawn hotel is dropped.

        Raises:
            whatever reading the source raises (the follower records it and asks again).
        """
        if self.hotel_models is None:
            return False
        generation = int(self.hotel_models.generation)
        if generation == self._own_generation:
            return False
        live = self.hotel_models.live()
        # built aside and swapped in whole: request threads read the old maps meanwhile, never a half-built one
        own = {h: v for h, v in self._own.items() if h in live}
        errors = {h: e for h, e in self.own_errors.items() if h in live}
        changed = len(own) != len(self._own) or len(errors) != len(self.own_errors)
        for hotel, models in live.items():
            versions = {tier: str(e.version) for tier, e in models.live.items()}
            if hotel in own and own[hotel][0] == versions:
                continue
            changed = True
            try:
                own[hotel] = (versions, self._own_scorer(models.live))
                errors.pop(hotel, None)
            except Exception as exc:  # noqa: BLE001 - a bad bundle must not stop serving: pooled models price it
                own.pop(hotel, None)
                errors[hotel] = f"{versions}: {type(exc).__name__}: {exc}"[:300]
                log.warning("own models of hotel %r not loaded, pooled models price it: %s", hotel, errors[hotel])
        self._own, self.own_errors = own, errors
        self._own_generation = generation
        return changed

    def own_versions(self) -> dict[str, dict[str, str]]:
        """The per-hotel refits in force: hotel -> tier -> version."""
        return {hotel: dict(versions) for hotel, (versions, _) in self._own.items()}

    def health(self) -> dict[str, Any]:
        return {**super().health(), "hotel_models": {"generation": self._own_generation,
                                                     "hotels": self.own_versions(), "errors": dict(self.own_errors)}}

    def _own_scorer(self, live: Mapping[str, ModelEntry]) -> Scorer:
        if self.load_pricer is None:
            from pricing.tiers import load_pricer  # deferred: onnxruntime loads only when a model does

            self.load_pricer = load_pricer
        pricers = {tier: self.load_pricer(Path(entry.path)) for tier, entry in live.items()}
        return Scorer(self.config, rules=self.rules, feature_source=self.feature_source,
                      light=pricers.get("light", self.light), heavy=pricers.get("heavy", self.heavy),
                      router=self.router, stats=self.stats)

    def _own_of(self, hotel_id: str, stage: Stage) -> Scorer | str | None:
        """A new hotel's own scorer in stage ``own``, or the rule id of why the pooled one prices it (else None)."""
        if stage != "own" or self._first.get(hotel_id) is None:
            return None
        own = self._own.get(hotel_id)
        if own is not None:
            return own[1]
        return BAD_REFIT if hotel_id in self.own_errors else NO_REFIT

    def price_traced(self, request: PricingRequest, *,
                     deadline_ms: float | None = None) -> tuple[PricingDecision, Trail]:
        token = _PRICING_AT.set(request.event_time)
        try:
            stage, _ = self.stage(request.hotel_id, request.event_time, request=request)
            if stage == "rules":
                return self._rules_stage(request, deadline_ms)
            own = self._own_of(request.hotel_id, stage)
            if isinstance(own, Scorer):
                decision, trail = own.price_traced(request, deadline_ms=deadline_ms)
                return _stamped(decision, stage), trail
            with exploring(self.explore_transfer if stage == "transfer" else None):
                decision, trail = super().price_traced(request, deadline_ms=deadline_ms)
            return _stamped(decision, stage, own), trail
        finally:
            _PRICING_AT.reset(token)

    def price_batch_traced(self, requests: Sequence[PricingRequest], *,
                           deadline_ms: float | None = None) -> list[tuple[PricingDecision, Trail]]:
        if not requests:
            return []
        stages = [self.stage(r.hotel_id, r.event_time, request=r)[0] for r in requests]
        token = _PRICING_AT.set(max(r.event_time for r in requests))
        try:
            # one model batch per exploration setting: stage two explored, the others as configured; a new
            # hotel's own models price its requests one by one (as stage one's rules)
            owns = [self._own_of(r.hotel_id, st) for r, st in zip(requests, stages, strict=True)]
            stages = ["rules" if isinstance(o, Scorer) else st for o, st in zip(owns, stages, strict=True)]
            plain = [r for r, st in zip(requests, stages, strict=True) if st == "own"]
            explored = [r for r, st in zip(requests, stages, strict=True) if st == "transfer"]
            own = iter(super().price_batch_traced(plain, deadline_ms=deadline_ms) if plain else [])
            with exploring(self.explore_transfer):
                transfer = iter(super().price_batch_traced(explored, deadline_ms=deadline_ms) if explored else [])
        finally:
            _PRICING_AT.reset(token)
        out = []
        for request, stage in zip(requests, stages, strict=True):
            if stage == "rules":
                out.append(self.price_traced(request, deadline_ms=deadline_ms))
            else:
                decision, trail = next(own if stage == "own" else transfer)
                why = owns[len(out)]
                out.append((_stamped(decision, stage, why if isinstance(why, str) else None), trail))
        return out

    def _rules_stage(self, request: PricingRequest, deadline_ms: float | None) -> tuple[PricingDecision, Trail]:
        decision, trail = self._rules.price_traced(request, deadline_ms=deadline_ms)
        if self.cold_start.rules_bid_floor:  # no lower than the night's bid price, by the pooled light pricer
            decision = bid_floored(decision, request, pricer=self.light, rules=self.rules)
        if decision.degraded_reason is not None and decision.degraded_reason.startswith(dg.NO_LIGHT_MODEL):
            decision = decision.model_copy(update={"degraded": False, "degraded_reason": None})
        code = None if decision.degraded_reason is None else decision.degraded_reason.split(":", 1)[0]
        self.stats.decision(decision.tier, degraded_reason=code, latency_s=decision.latency_ms / 1000.0)
        return _stamped(decision, "rules"), trail

    def _first_seen(self, hotel_id: str, at: datetime, request: PricingRequest | None) -> datetime | None:
        if hotel_id in self._first:
            return self._first[hotel_id]

        def mature() -> bool:
            if request is None:
                return False
            return traded(self.raw_source.read(request.hotel_id, request.room_type, request.stay_date).values)

        first = self.history.first_seen(hotel_id, at, mature=mature)
        self._first[hotel_id] = first
        return first

    def _label_counts(self, hotel_id: str) -> tuple[int, int]:
        now = time.monotonic()
        cached = self._counts.get(hotel_id)
        if cached is None or now - cached[0] >= self.counts_ttl_s:
            cached = (now, self.history.counts(hotel_id))
            self._counts[hotel_id] = cached
        return cached[1]


def traded(values: Mapping[str, float | None]) -> bool:
    """Whether feature ``values`` show behaviour of the hotel (any of :data:`HISTORY_FEATURES` above 0)."""
    return any((values.get(name) or 0.0) > 0.0 for name in HISTORY_FEATURES)


def _stamped(decision: PricingDecision, stage: Stage, why: str | Scorer | None = None) -> PricingDecision:
    """``decision`` with its stage as its last rule id, after the reason the pooled models price it (if one)."""
    reason = (why,) if isinstance(why, str) else ()
    return decision.model_copy(update={"rule_ids": (*decision.rule_ids, *reason, RULE_PREFIX + stage)})
