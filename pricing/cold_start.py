"""Cold start for a new hotel, in three stages: rules, a model transferred from similar hotels, its own labels.

A hotel the platform has never priced has no features history and no labels of
its own. It is priced in three stages, decided by one rule a platform engineer
can read (:func:`stage_of`, thresholds in :class:`ColdStartConfig`):

1. ``rules`` until it has ``transfer_after_days`` of history: the rules tier
   prices it from its base rate (no model has seen it or its features yet), no
   lower than the night's bid price (``rules_bid_floor``, :func:`bid_floored`: the
   opportunity cost of its rooms from the stream's demand forecast, rule id
   ``cold_start_bid_floor`` when it binds);
2. ``transfer`` from then on: the pooled models of the mature hotels price it.
   They carry no hotel id; a hotel enters them through its descriptors, the
   base rate (its price level: every model prices relative to it,
   ``price_to_base_rate``), the competitor median and its stream features, and
   through the pooled price response (:mod:`pricing.price_response`), one
   curve in ``price / base_rate`` for every hotel; while its history is shorter
   than a window, :class:`PartialWindows` reads its window counts at full length;
3. ``own`` once it has ``own_after_labels`` labels with at least
   ``own_after_bookings`` bookings: the pooled models get ``refit_trees`` more
   trees per member by continued training (``init_model``) on its own labels,
   weighted ``own_weight`` against a sample of the pooled rows, and the price
   pooled price response is kept (``refit_price_response`` off, :func:`refit_bundles`).

The stage a decision was priced in is recorded on it as a rule id,
``cold_start:<stage>``, next to the tier that priced it. A hotel in the pooled
models' own training data (``mature``) is in stage ``own`` from the start.

Example:
    >>> from datetime import UTC, datetime, timedelta
    >>> cfg = ColdStartConfig(transfer_after_days=1, own_after_labels=200, own_after_bookings=5)
    >>> t0 = datetime(2026, 5, 1, tzinfo=UTC)
    >>> stage_of(HotelHistory(first_seen=t0, labels=0, bookings=0), t0 + timedelta(hours=3), cfg)[0]
    'rules'
    >>> stage_of(HotelHistory(t0, labels=150, bookings=9), t0 + timedelta(days=2), cfg)
    ('transfer', 'transfer: 2.0 days of history >= 1.0; 150 labels < 200 or 9 bookings < 5')
    >>> stage_of(HotelHistory(t0, labels=250, bookings=9), t0 + timedelta(days=3), cfg)[0]
    'own'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pandas as pd

from events.models import PricingDecision, PricingRequest
from pricing import degraded as dg
from pricing.cold_start_stages import OWN_WEIGHT as OWN_WEIGHT
from pricing.cold_start_stages import STAGES as STAGES
from pricing.cold_start_stages import ColdStartConfig as ColdStartConfig
from pricing.cold_start_stages import HotelHistory as HotelHistory
from pricing.cold_start_stages import Stage as Stage
from pricing.cold_start_stages import stage_of as stage_of
from pricing.own_refit import refit_bundles as refit_bundles
from pricing.partial_windows import MIN_SCALE_DAYS as MIN_SCALE_DAYS
from pricing.partial_windows import SCALED_COUNTS as SCALED_COUNTS
from pricing.partial_windows import UNKNOWN_BEFORE_14D as UNKNOWN_BEFORE_14D
from pricing.partial_windows import WINDOW_DAYS as WINDOW_DAYS
from pricing.partial_windows import PartialWindows as PartialWindows
from pricing.partial_windows import PriorWeek as PriorWeek
from pricing.rules import RuleSet
from pricing.scorer import Scorer
from pricing.vectorize import request_values

if TYPE_CHECKING:
    from pricing.quote import TierPricer

RULE_PREFIX = "cold_start:"
"""Rule id prefix of the stage recorded on a decision (``cold_start:transfer``)."""
BID_FLOOR_RULE = "cold_start_bid_floor"
"""Rule id recorded when stage one's price was raised to the night's bid price (:func:`bid_floored`)."""


def bid_floored(
    decision: PricingDecision, request: PricingRequest, *, pricer: TierPricer | None, rules: RuleSet
) -> PricingDecision:
    """Stage one's decision with its price raised to the night's bid price where the rules priced below it.

    The rules price a new hotel from its base rate, with no term for the rooms left: a night about to
    sell out goes at the base rate to the first shopper. The bid price (:mod:`pricing.bid_price`, the
    opportunity cost per room-night of the check-in night, from the stream's demand forecast) is
    what ``pricer`` (the pooled light pricer: its demand curve is the only one a new hotel has) quotes
    against; here it only sets a floor, so the rules still decide the price when the rooms are
    plentiful, and their floor, ceiling and fences hold (the price stays within the rules' ceiling;
    a price a rule decided outright, a closed night or a degraded decision is left as it is).

    The bid and its forecast are recorded on the decision whenever the pricer gives one
    (``bid_price``, ``forecast_views``); when the floor binds, :data:`BID_FLOOR_RULE` is added to its
    ``rule_ids``. ``pricer`` ``None`` (no model loaded, or ``rules_bid_floor`` off): unchanged.
    """
    reason = decision.degraded_reason or ""
    if pricer is None or (decision.degraded and not reason.startswith(dg.NO_LIGHT_MODEL)):
        return decision
    outcome = rules.evaluate(request, decision.features)
    if outcome.decided_price is not None or outcome.closed:
        return decision
    try:
        quote = pricer.quote(request, decision.features, floor=outcome.floor, ceiling=outcome.ceiling,
                             rule_price=outcome.rule_price)
    except Exception:  # noqa: BLE001 - the floor is an aid to the rules price, which stands without it
        return decision
    bid = quote.bid_price
    if bid is None or not math.isfinite(bid):
        return decision
    update: dict[str, Any] = {"bid_price": max(bid, 0.0),
                              "forecast_views": None if quote.forecast is None else quote.forecast.views}
    if bid > decision.price:
        update["price"] = dg.money(min(bid, outcome.ceiling), high=outcome.ceiling)
        update["rule_ids"] = (*decision.rule_ids, BID_FLOOR_RULE)
    return decision.model_copy(update=update)


def label_row(request: PricingRequest, decision: PricingDecision, booked: bool) -> dict[str, Any]:
    """A training row from a decision and its outcome: the features it saw, the request's, price, ``booked``."""
    return {**decision.features, **request_values(request), "price": decision.price, "booked": int(booked),
            "hotel_id": request.hotel_id}


Refit = Callable[[str, pd.DataFrame], Scorer]
"""``(hotel_id, its label rows) -> the scorer of its own models`` (e.g. :func:`refit_bundles` + ``load_pricer``)."""


@dataclass
class _Hotel:
    first_seen: datetime | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    bookings: int = 0
    own: Scorer | None = None


class ColdStartScorer:
    """Prices each hotel with the scorer of its stage and records the stage on the decision.

    Args:
        config: the thresholds.
        rules: a scorer with no model tiers (stage one).
        pooled: the scorer of the pooled models (stage two; ``None``: rules until a hotel has its own).
        refit: builds a hotel's own scorer when it reaches stage three (``None``: it stays on the pooled one).
        mature: hotels in the pooled models' training data (stage ``own``, on the pooled scorer).
        transfer: the pooled models as a new hotel's stage two sees them (``None``: ``pooled``), e.g. with
            exploration (:class:`pricing.exploration.ExplorationConfig`) so that its labels identify its
            elasticity before its refit, while the mature hotels are not explored.
    """

    def __init__(self, config: ColdStartConfig, *, rules: Scorer, pooled: Scorer | None,
                 refit: Refit | None = None, mature: Iterable[str] = (), transfer: Scorer | None = None) -> None:
        self.config, self.rules, self.pooled, self.refit = config, rules, pooled, refit
        self.transfer = transfer if transfer is not None else pooled
        self.mature = frozenset(mature)
        self.hotels: dict[str, _Hotel] = {}

    def first_seen(self, hotel_id: str) -> datetime | None:
        """When a new hotel first asked for a price (``None`` for a mature or unseen hotel)."""
        h = self.hotels.get(hotel_id)
        return None if h is None or hotel_id in self.mature else h.first_seen

    def history(self, hotel_id: str) -> HotelHistory:
        h = self.hotels.get(hotel_id, _Hotel())
        return HotelHistory(h.first_seen, len(h.rows), h.bookings)

    def stage(self, hotel_id: str, at: datetime) -> tuple[Stage, str]:
        """The stage the hotel's next request at ``at`` is priced in, and why."""
        if hotel_id in self.mature:
            return "own", "own: a mature hotel, in the pooled models' training data"
        return stage_of(self.history(hotel_id), at, self.config)

    def price(self, request: PricingRequest) -> PricingDecision:
        """Price ``request`` in its hotel's stage; the decision's ``rule_ids`` end with ``cold_start:<stage>``."""
        hotel = self.hotels.setdefault(request.hotel_id, _Hotel())
        if hotel.first_seen is None:
            hotel.first_seen = request.event_time
        stage, _ = self.stage(request.hotel_id, request.event_time)
        scorer = self._scorer(request.hotel_id, hotel, stage)
        used: Stage = "rules" if scorer is self.rules else stage
        if stage == "own" and scorer is self.transfer and request.hotel_id not in self.mature:
            used = "transfer"
        decision, trail = scorer.price_traced(request)
        if used == "rules" and self.config.rules_bid_floor and self.pooled is not None:
            decision = bid_floored(decision, request, pricer=self.pooled.light, rules=self.rules.rules)
        decision = decision.model_copy(update={"rule_ids": (*decision.rule_ids, RULE_PREFIX + used)})
        scorer.record(request, decision, trail)
        return decision

    def learn_one(self, request: PricingRequest, decision: PricingDecision, booked: bool) -> None:
        """One label of the hotel's own (a decision joined with its outcome)."""
        hotel = self.hotels.setdefault(request.hotel_id, _Hotel(first_seen=request.event_time))
        hotel.rows.append(label_row(request, decision, booked))
        hotel.bookings += int(booked)

    def own_frame(self, hotel_id: str) -> pd.DataFrame:
        """The hotel's own label rows so far."""
        return pd.DataFrame(self.hotels.get(hotel_id, _Hotel()).rows)

    def _scorer(self, hotel_id: str, hotel: _Hotel, stage: Stage) -> Scorer:
        if stage == "rules":
            return self.rules
        if stage == "own" and hotel.own is None and self.refit is not None and hotel_id not in self.mature:
            hotel.own = self.refit(hotel_id, self.own_frame(hotel_id))
        if stage == "own" and hotel.own is not None:
            return hotel.own
        pooled = self.pooled if hotel_id in self.mature else self.transfer
        return pooled if pooled is not None else self.rules


def stage_counts(decisions: Iterable[PricingDecision]) -> Mapping[Stage, int]:
    """Decisions per recorded stage (for reports)."""
    counts: dict[Stage, int] = dict.fromkeys(STAGES, 0)
    named: dict[str, Stage] = {stage: stage for stage in STAGES}
    for d in decisions:
        for rule in d.rule_ids:
            stage = named.get(rule.removeprefix(RULE_PREFIX)) if rule.startswith(RULE_PREFIX) else None
            if stage is not None:
                counts[stage] += 1
    return counts
