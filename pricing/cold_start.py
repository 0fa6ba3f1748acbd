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

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from events.catalog import DERIVED_FEATURES, derive
from events.models import PricingDecision, PricingRequest
from pricing import degraded as dg
from pricing.errors import TrainingError
from pricing.feature_source import FeatureRead, FeatureSource
from pricing.models import DemandModelConfig
from pricing.rules import RuleSet
from pricing.scorer import Scorer
from pricing.training import META_FILE, read_meta, train_bundle
from pricing.vectorize import HEAVY_COLUMNS, LIGHT_COLUMNS, input_columns, request_values

if TYPE_CHECKING:
    from pricing.tiers import TierPricer

Stage = Literal["rules", "transfer", "own"]
STAGES: tuple[Stage, ...] = ("rules", "transfer", "own")
RULE_PREFIX = "cold_start:"
"""Rule id prefix of the stage recorded on a decision (``cold_start:transfer``)."""
BID_FLOOR_RULE = "cold_start_bid_floor"
"""Rule id recorded when stage one's price was raised to the night's bid price (:func:`bid_floored`)."""


OWN_WEIGHT = 1.0
"""Default weight of a new hotel's own label against a pooled row in its refit. Measured with
``bench/cold_start.py --own-weights 1 2 4`` (``docs/cold-start.md``, run 5): 1 and 2 level within the
noise of 3 seeds, 4 below both at the resort (its own labels are priced by its own policy, so the more
they weigh, the more the refit follows a confounded sample); of the two, 1 keeps more of the pooled data."""


class ColdStartConfig(BaseModel):
    """The stage thresholds and the refit of stage three (settings ``PRICESTREAM_COLD_START_*``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    transfer_after_days: float = Field(default=1.0, ge=0.0)
    """Days since the hotel's first request before the pooled models price it (day one is rules)."""
    own_after_labels: int = Field(default=300, ge=1)
    """Labels of its own (decisions joined with outcomes) before its models are refitted on them."""
    own_after_bookings: int = Field(default=10, ge=0)
    """Bookings among those labels: a refit on no positives learns nothing about demand."""
    own_weight: float = Field(default=OWN_WEIGHT, gt=0.0)
    """Weight of one of its own labels against one pooled row in the refit (the service's and the bench's)."""
    pooled_rows: int = Field(default=4000, ge=0)
    """Pooled rows (seeded sample) kept in the refit, so that the price response stays identified."""
    refit_trees: int = Field(default=20, ge=1)
    """Trees added to each member by continued training on the refit rows."""
    rules_bid_floor: bool = True
    """Stage one prices no lower than the night's bid price (:func:`bid_floored`): the rules alone sell a
    scarce night at the base rate, below what the room is worth to later shoppers."""
    refit_price_response: bool = False
    """Refit the price response on the refit rows too (False: keep the pooled one). The hotel's own labels
    are priced by its policy, so its price moves with its features; a response refitted on them learns a
    confounded elasticity (measured in ``docs/cold-start.md``), the pooled one was fitted on many hotels."""


class HotelHistory(NamedTuple):
    """What the platform knows of one hotel: when it first asked for a price, its labels and bookings."""

    first_seen: datetime | None
    labels: int = 0
    bookings: int = 0

    def days(self, at: datetime) -> float:
        """Days of history at ``at`` (0 before its first request)."""
        return 0.0 if self.first_seen is None else max((at - self.first_seen).total_seconds() / 86_400.0, 0.0)


def stage_of(history: HotelHistory, at: datetime, config: ColdStartConfig) -> tuple[Stage, str]:
    """The hotel's stage at ``at`` and the reason, in the words of the thresholds (see the module)."""
    days, cfg = history.days(at), config
    if days < cfg.transfer_after_days:
        return "rules", f"rules: {days:.1f} days of history < {cfg.transfer_after_days:.1f}"
    if history.labels >= cfg.own_after_labels and history.bookings >= cfg.own_after_bookings:
        return "own", (f"own: {history.labels} labels >= {cfg.own_after_labels} and "
                       f"{history.bookings} bookings >= {cfg.own_after_bookings}")
    return "transfer", (f"transfer: {days:.1f} days of history >= {cfg.transfer_after_days:.1f}; "
                        f"{history.labels} labels < {cfg.own_after_labels} or "
                        f"{history.bookings} bookings < {cfg.own_after_bookings}")


WINDOW_DAYS: dict[str, float] = {"_1h": 1.0 / 24.0, "_24h": 1.0, "_7d": 7.0, "_14d": 14.0}
"""Length of each window suffix, in days."""
SCALED_COUNTS = frozenset({
    "searches_1h", "views_1h", "bookings_1h", "searches_24h", "views_24h", "bookings_24h", "cancellations_24h",
    "searches_7d", "views_7d", "bookings_7d", "cancellations_7d", "bookings_14d",
    "hotel_searches_24h", "hotel_bookings_24h", "hotel_views_24h",
})
"""Window counts that :class:`PartialWindows` scales to their window's length (ratios and levels are left)."""
UNKNOWN_BEFORE_14D = frozenset({"bookings_prev_7d", "booking_pace_7d"})
"""The week before last, and the pace against it: not seen until 14 days of history. ``PartialWindows``
estimates them from the scaled counts (``prior_week="estimated"``: the days seen at their own rate, so a
pace of 1 before day 7) or reads them as missing (``"missing"``, before run 7: the pooled models never saw
a missing pace, and priced a new hotel 8-9% under its full-history price up to day 14, docs/cold-start.md)."""
PriorWeek = Literal["estimated", "missing"]
MIN_SCALE_DAYS = 1.0 / 24.0
"""Default history below which ``PartialWindows`` scales as if this much were seen (``min_days``): an hour."""


class PartialWindows:
    """A feature source that reads a new hotel's window counts as if its window were full.

    A hotel that joined 2 days ago has 2 days of searches in its ``searches_7d``: to a
    model trained on mature hotels, whose windows are full, it looks like a hotel with
    2/7 of the demand, and the bid price forecasts that few shoppers. While a hotel's
    history (``first_seen(hotel)`` to ``clock()``) is shorter than a window, its counts
    are divided by the share of the window it covers, and the derived ratios (the week
    before last, the pace against it, look-to-book) are computed again from the scaled
    counts (``prior_week``, :data:`UNKNOWN_BEFORE_14D`). Hotels with no ``first_seen``
    (mature ones) are read as they are.

    Example:
        >>> from datetime import UTC, date, datetime, timedelta
        >>> from pricing.feature_source import MemoryFeatureSource
        >>> src = MemoryFeatureSource()
        >>> src.put("h-new", "std", date(2026, 5, 20), {"views_7d": 10.0, "bookings_7d": 2.0, "bookings_14d": 2.0,
        ...                                             "bookings_prev_7d": 0.0, "booking_pace_7d": 2.0})
        >>> t0 = datetime(2026, 5, 1, tzinfo=UTC)
        >>> read = PartialWindows(src, first_seen={"h-new": t0}.get, clock=lambda: t0 + timedelta(days=2))
        >>> dict(read.read("h-new", "std", date(2026, 5, 20)).values)
        {'views_7d': 35.0, 'bookings_7d': 7.0, 'bookings_14d': 14.0, 'bookings_prev_7d': 7.0, 'booking_pace_7d': 1.0}
    """

    def __init__(self, source: FeatureSource, *, first_seen: Callable[[str], datetime | None],
                 clock: Callable[[], datetime | None], prior_week: PriorWeek = "estimated",
                 min_days: float = MIN_SCALE_DAYS) -> None:
        self.source, self.first_seen, self.clock, self.prior_week = source, first_seen, clock, prior_week
        self.min_days = min_days

    def read(self, hotel_id: str, room_type: str, stay_date: date) -> FeatureRead:
        read = self.source.read(hotel_id, room_type, stay_date)
        seen, now = self.first_seen(hotel_id), self.clock()
        if seen is None or now is None:
            return read
        days = max((now - seen).total_seconds() / 86_400.0, self.min_days)
        if days >= 14.0:
            return read
        values = {k: _scaled(k, v, days) for k, v in read.values.items()}
        if self.prior_week == "missing":
            return read._replace(values={k: None if k in UNKNOWN_BEFORE_14D else v for k, v in values.items()})
        derived = derive(dict(values))  # None where its inputs are not in the read: the week before last unknown
        return read._replace(values={k: _estimated(k, v, derived.get(k)) for k, v in values.items()})


def _estimated(name: str, value: float | None, derived: float | None) -> float | None:
    if name not in DERIVED_FEATURES:
        return value
    if derived is None:
        return None if name in UNKNOWN_BEFORE_14D else value
    return derived


def _scaled(name: str, value: float | None, days: float) -> float | None:
    if value is None or name not in SCALED_COUNTS:
        return value
    window = next(w for suffix, w in WINDOW_DAYS.items() if name.endswith(suffix))
    return value * window / days if days < window else value


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


def refit_bundles(
    pooled: Sequence[str | Path],
    own: pd.DataFrame,
    out_dir: str | Path,
    *,
    config: ColdStartConfig,
    pooled_frame: pd.DataFrame | None = None,
    seed: int = 0,
) -> list[Path]:
    """Stage three: each pooled bundle continued on the hotel's own labels; one new bundle per tier.

    Args:
        pooled: bundle directories of the pooled models (light and/or heavy).
        own: the hotel's label rows (:func:`label_row`): its features, ``price``, ``base_rate``, ``booked``;
            an input column it lacks is missing (NaN), as a feature the stream did not have.
        out_dir: ``<out_dir>/<tier>`` is written per bundle.
        config: ``own_weight``, ``pooled_rows``, ``refit_trees``.
        pooled_frame: rows the pooled models were trained on; ``pooled_rows`` of them are kept (weight 1).
        seed: seeds the pooled sample and the boosters.

    Raises:
        TrainingError: if ``own`` has no ``booked``, ``price`` or ``base_rate`` column, or too few rows.
        BundleError: if a pooled bundle is unreadable.
    """
    missing = [c for c in ("booked", "price", "base_rate") if c not in own.columns]
    if missing:
        raise TrainingError(field="own.columns", value=missing, expected="booked, price and base_rate")
    keep = [*dict.fromkeys((*input_columns(HEAVY_COLUMNS), *input_columns(LIGHT_COLUMNS), "booked", "weight"))]
    parts = [_numeric(own.assign(weight=config.own_weight * _weights(own)), keep)]
    if pooled_frame is not None and config.pooled_rows and len(pooled_frame):
        sample = pooled_frame.sample(n=min(config.pooled_rows, len(pooled_frame)), random_state=seed)
        parts.append(_numeric(sample.assign(weight=_weights(sample)), keep))
    rows = pd.concat(parts, ignore_index=True)
    out = []
    for bundle in pooled:
        tier = read_meta(bundle)["tier"]
        columns = LIGHT_COLUMNS if tier == "light" else HEAVY_COLUMNS
        frame = rows[[*dict.fromkeys((*input_columns(columns), "booked", "weight"))]]
        info = train_bundle(frame, Path(out_dir) / tier, tier=tier, seed=seed, init_model=bundle,
                            config=DemandModelConfig(num_trees=config.refit_trees))
        if not config.refit_price_response:
            _keep_response(Path(bundle), info.path)
        out.append(info.path)
    return out


def _keep_response(pooled: Path, refit: Path) -> None:
    """Write the pooled bundle's price response into the refitted bundle's meta (only the trees are refitted)."""
    meta = read_meta(refit)
    meta["price_response"] = read_meta(pooled).get("price_response")
    (refit / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True), encoding="utf-8")


def _numeric(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """``columns`` of ``frame`` as float64 (a column it lacks, or a ``None``, is NaN: a missing feature)."""
    return frame.reindex(columns=list(columns)).apply(pd.to_numeric, errors="coerce").astype(np.float64)


def _weights(frame: pd.DataFrame) -> pd.Series:
    return frame["weight"] if "weight" in frame.columns else pd.Series(1.0, index=frame.index)


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
