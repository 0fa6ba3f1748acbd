"""Model tiers that quote a price: light (small ONNX model, coarse grid) and heavy (ensemble, fine grid).

A pricer loads a bundle written by :func:`pricing.training.train_bundle`,
checks the ONNX checksum, and prices one request per :meth:`quote` call with a
single batched ``session.run`` per grid pass. Buffers are pre-allocated per
thread, and the hot path touches no pandas.

Example:
    >>> import tempfile
    >>> from datetime import date, datetime, timezone
    >>> import numpy as np, pandas as pd
    >>> from events.models import PricingRequest
    >>> from pricing.models import DemandModelConfig
    >>> from pricing.training import train_bundle
    >>> from pricing.vectorize import LIGHT_COLUMNS
    >>> rng = np.random.default_rng(0)
    >>> frame = pd.DataFrame(rng.uniform(0, 1, size=(600, len(LIGHT_COLUMNS))), columns=list(LIGHT_COLUMNS))
    >>> frame["price"] = rng.uniform(50, 300, 600)
    >>> frame["booked"] = (rng.random(600) < 1 / (1 + np.exp((frame["price"] - 150) / 40))).astype(int)
    >>> bundle = train_bundle(frame, tempfile.mkdtemp(), tier="light", config=DemandModelConfig(num_trees=20)).path
    >>> pricer = load_pricer(bundle)
    >>> req = PricingRequest(hotel_id="h1", room_type="std", stay_date=date(2026, 12, 24),
    ...                      event_time=datetime(2026, 12, 1, tzinfo=timezone.utc))
    >>> q = pricer.quote(req, {"occupancy": 0.5}, floor=60.0, ceiling=280.0)
    >>> pricer.name, 60.0 <= q.price <= 280.0, 0.0 < q.booking_prob < 1.0, len(q.candidates)
    ('demand-light', True, True, 18)
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from events.models import PricingRequest
from pricing.bid_cache import BID_CACHE_SIZE as BID_CACHE_SIZE
from pricing.bid_cache import VIEWS_STEP as VIEWS_STEP
from pricing.bid_cache import BidCache as BidCache
from pricing.bid_price import BidPriceConfig, DemandForecast, forecast
from pricing.bundle_model import envelope_of, load_demand_model
from pricing.capacity_cost import BID_GRID as BID_GRID
from pricing.capacity_cost import STAY_BID_NIGHTS as STAY_BID_NIGHTS
from pricing.capacity_cost import CapacityCost
from pricing.channel_response import channel_offsets
from pricing.compiled import ModelBackend
from pricing.demand_curves import OOD_STD as OOD_STD
from pricing.demand_curves import TAIL_GRID as TAIL_GRID
from pricing.demand_curves import Demand, extended_demand, off_distribution_std, pooled_demand
from pricing.errors import BundleError
from pricing.exploration import ExplorationConfig, explore, in_force
from pricing.optimiser import ExtraStd, Optimum, Predict, check_bounds, optimise
from pricing.price_response import PriceResponse
from pricing.quote import Quote as Quote
from pricing.quote import StayFeatures as StayFeatures
from pricing.quote import TierPricer as TierPricer
from pricing.rules import lead_time_days
from pricing.training import read_meta
from pricing.vectorize import BASE_RATE, Vectorizer

LIGHT_GRID = 9
LIGHT_REFINE = 1
"""Light: 9 coarse points, then 9 between the best point's neighbours (two ~20 us runs beat 41 rows)."""
LIGHT_SMOOTHING = 0.1
"""Light: demand averaged over price x (0.9, 1, 1.1) per candidate (``pricing.optimiser``): a single small
tree model answers in steps, and on the market simulator the smoothed argmax earned +1.2% expected revenue
over the static price where the raw one earned -0.7% (mean of five training seeds, 6,000 offers). It costs
3x the rows per model call: a light quote took about 1.3x as long here."""
HEAVY_GRID = 41
HEAVY_RISK_AVERSION = 0.5
"""Heavy objective: price x (mean - 0.5 std); a mild penalty that prefers prices the members agree on.

Search is held inside the trained price range where that overlaps ``[floor, ceiling]``, and candidates
off the training envelope carry an extra std (``pricing.demand_curves.OOD_STD``)."""
DEFAULT_CAPACITY = BidPriceConfig(method="dp")
"""Pricers are capacity-aware by default; ``capacity=None`` prices myopically (``price x p(book)``). The bid is
the dp one (``pricing.bid_price.dp_bid_price``): on the calibrated markets, 5 seeds, it earned +2.4% (resort) and
+2.9% (city) over the fluid bid, ahead on 7 of 10 seeds, at the fluid bid's decision latency in ``bench/decide.py``
(docs/revenue-management.md, 2 December 2026)."""
class _Plan(NamedTuple):
    """What a quote searches: the demand curve and range, and the capacity cost it is set against."""

    demand: Predict
    low: float
    high: float
    extended: bool
    forecast: DemandForecast | None = None
    bid: float | None = None
    cost: float = 0.0


class _BundlePricer:
    grid_size = LIGHT_GRID
    refine_passes = 0
    risk_aversion = 0.0
    smoothing = 0.0

    def __init__(
        self,
        bundle_dir: str | Path,
        *,
        meta: Mapping[str, Any] | None = None,
        capacity: BidPriceConfig | None = DEFAULT_CAPACITY,
        exploration: ExplorationConfig | None = None,
        price_response: bool = True,
        stay_features: StayFeatures | None = None,
        backend: ModelBackend = "onnx",
    ) -> None:
        self._capacity = capacity
        self._exploration = exploration
        self._path = Path(bundle_dir)
        self._meta = dict(meta if meta is not None else read_meta(self._path))
        self._model = load_demand_model(self._path, self._meta, backend)
        self._columns = tuple(self._meta["columns"])
        self._envelope = envelope_of(self._meta, self._columns)
        self._price_range = self._envelope.price_range
        self._local = threading.local()
        self._response = PriceResponse.from_json(self._meta.get("price_response")) if price_response else None
        self._channel_offsets = channel_offsets(self._meta.get("price_response_channels"))
        self._bids = BidCache()
        self._costs = None if capacity is None else CapacityCost(capacity, stay_features, self._bids)

    @property
    def name(self) -> str:
        """Bundle name, e.g. ``demand-light``."""
        return str(self._meta["name"])

    @property
    def version(self) -> str:
        """Bundle version (derived from the ONNX bytes)."""
        return str(self._meta["version"])

    @property
    def path(self) -> Path:
        """Bundle directory."""
        return self._path

    @property
    def meta(self) -> dict[str, Any]:
        """Parsed ``meta.json``."""
        return dict(self._meta)

    def _vectorizer(self) -> Vectorizer:
        vec: Vectorizer | None = getattr(self._local, "vec", None)
        if vec is None:
            vec = Vectorizer(self._columns, grid_size=self.grid_size)
            self._local.vec = vec
        return vec

    def predict(self, x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """``(n, members)`` booking probabilities for a model matrix in this bundle's column order."""
        return self._model.predict(x)

    def ood_distance(self, request: PricingRequest, features: Mapping[str, float | None]) -> float:
        """Share of known non-price inputs outside the training 1st-99th percentile envelope, in [0, 1]."""
        vec = self._vectorizer()
        vec.prepare(request, features)
        outside, known = self._outside(vec.row)
        return outside / known if known else 1.0

    def _outside(self, row: npt.NDArray[np.float32]) -> tuple[int, int]:
        """(inputs outside the envelope, known inputs) over the non-price columns of a prepared row."""
        return self._envelope.outside(row)

    def _pooled(self, predict: Predict, request: PricingRequest, features: Mapping[str, float | None]) -> Demand | None:
        """Demand as the model's level at the base rate times the bundle's pooled price response
        (:func:`pricing.demand_curves.pooled_demand`, at the request's lead time, night and channel).
        ``None`` when the bundle has no response, ``price_response`` is off, or the request has no base rate.
        """
        return pooled_demand(
            predict,
            self._response,
            features.get(BASE_RATE),
            price_range=self._price_range,
            lead_days=float(lead_time_days(request)),
            day_of_year=request.stay_date.timetuple().tm_yday,
            offset=self._channel_shift(request),
        )

    def _channel_shift(self, request: PricingRequest) -> float:
        """The request channel's intercept offset with ``BidPriceConfig.channel_response`` on, else 0."""
        cfg = self._capacity or DEFAULT_CAPACITY
        return self._channel_offsets.get(str(request.channel), 0.0) if cfg.channel_response else 0.0

    def _extended(self, predict: Predict, floor: float, ceiling: float) -> Demand | None:
        """The model's demand continued past its trained price range (``BidPriceConfig.extrapolate``,
        :func:`pricing.demand_curves.extended_demand`); ``None`` when off or not needed."""
        cfg = self._capacity or DEFAULT_CAPACITY  # a myopic pricer extrapolates the same way
        if not cfg.extrapolate:
            return None
        return extended_demand(
            predict, price_range=self._price_range, floor=floor, ceiling=ceiling, slope_range=cfg.slope_range
        )

    def _extra_std(self, row: npt.NDArray[np.float32], *, prices_known: bool = False) -> ExtraStd:
        """The off-distribution std per candidate; ``prices_known``: a price past the trained range is not
        counted as outside (the demand there is the extrapolated curve, not a tree's flat guess)."""
        outside, known = self._outside(row)
        return off_distribution_std(outside, known, (-math.inf, math.inf) if prices_known else self._price_range)

    def quote(
        self,
        request: PricingRequest,
        features: Mapping[str, float | None],
        *,
        floor: float,
        ceiling: float,
        rule_price: float | None = None,
    ) -> Quote:
        """Best price in ``[floor, ceiling]`` for this request.

        Raises:
            QuoteError: if ``floor``/``ceiling`` are not finite with ``0 < floor <= ceiling``.
        """
        check_bounds(floor, ceiling)
        vec = self._vectorizer()
        vec.prepare(request, features)
        plan = self._plan(request, features, vec, floor, ceiling)
        best = optimise(
            plan.demand,
            floor=plan.low,
            ceiling=plan.high,
            grid_size=self.grid_size,
            refine_passes=self.refine_passes,
            risk_aversion=self.risk_aversion,
            smoothing=self.smoothing,
            fallback_price=rule_price,
            extra_std=self._extra_std(vec.row, prices_known=plan.extended),
            cost=plan.cost,
        )
        price, propensity = self._shown_price(best, request, floor, ceiling, rule_price)
        return self._quote_of(best, plan, price, propensity)

    def _quote_of(self, best: Optimum, plan: _Plan, price: float, propensity: float) -> Quote:
        """The quote of the optimum ``best`` shown at ``price``; no bid or forecast on fallback."""
        return Quote(
            price,
            best.expected_revenue,
            best.booking_prob,
            best.uncertainty,
            best.candidates,
            self.name,
            self.version,
            best.fallback,
            None if best.fallback else plan.bid,
            None if best.fallback else plan.forecast,
            propensity,
        )

    def _plan(
        self,
        request: PricingRequest,
        features: Mapping[str, float | None],
        vec: Vectorizer,
        floor: float,
        ceiling: float,
    ) -> _Plan:
        """The demand curve, search range and capacity cost of a quote.

        The search stays in the trained price range unless a pooled or extrapolated curve covers the
        whole band; the cost is the stay's bid price per night (0 when myopic or without a forecast).
        """
        low, high = max(floor, self._price_range[0]), min(ceiling, self._price_range[1])
        if low > high:  # the bounds leave the trained price range: search them anyway, the OOD term flags it
            low, high = floor, ceiling
        model = self._model

        def predict(prices: npt.NDArray[np.float64]) -> npt.NDArray[np.floating[Any]]:
            return model.predict(vec.with_prices(prices))

        extended = self._pooled(predict, request, features) or self._extended(predict, floor, ceiling)
        demand: Predict = predict
        if extended is not None:
            demand, low, high = extended, floor, ceiling
        costs = self._costs
        fc = None if costs is None else forecast(request, features, costs.config)
        if costs is None or fc is None:
            return _Plan(demand, low, high, extended is not None)
        bid, high = costs.check_in_bid(request, demand, fc, (low, high, ceiling), trained_only=extended is None)
        cost = 0.0 if bid is None else costs.per_night(bid, request, demand, low, high)
        return _Plan(demand, low, high, extended is not None, fc, bid, cost)

    def _shown_price(
        self, best: Optimum, request: PricingRequest, floor: float, ceiling: float, rule_price: float | None
    ) -> tuple[float, float]:
        """The price shown and its propensity: the optimum (or, on fallback, the clamped rules price),
        randomised by the exploration in force (never on fallback)."""
        price = best.price
        if best.fallback:  # the rules price answers to the caller's bounds, not the trust region
            price = min(max(math.sqrt(floor * ceiling) if rule_price is None else rule_price, floor), ceiling)
            price = price if math.isfinite(price) else floor
        exploration = in_force(self._exploration)
        if exploration is None or best.fallback:
            return price, 1.0
        return explore(price, floor=floor, ceiling=ceiling, key=request.request_id, config=exploration)

    @property
    def bid_cache(self) -> BidCache:
        """The bid prices this pricer computed, per (hotel, room type, night, channel)."""
        return self._bids


class LightPricer(_BundlePricer):
    """Small ONNX model, coarse grid plus one refinement pass, demand smoothed over neighbouring prices."""

    grid_size = LIGHT_GRID
    refine_passes = LIGHT_REFINE
    smoothing = LIGHT_SMOOTHING


class HeavyPricer(_BundlePricer):
    """Bagged ensemble in one ONNX graph, fine grid, risk-adjusted objective, member spread as uncertainty."""

    grid_size = HEAVY_GRID
    risk_aversion = HEAVY_RISK_AVERSION


def load_pricer(
    bundle_dir: str | Path,
    *,
    capacity: BidPriceConfig | None = DEFAULT_CAPACITY,
    exploration: ExplorationConfig | None = None,
    price_response: bool = True,
    stay_features: StayFeatures | None = None,
    backend: ModelBackend = "onnx",
) -> LightPricer | HeavyPricer:
    """The pricer for a bundle, chosen by ``meta.json``'s ``tier``.

    ``capacity`` sets its bid-price forecast (``None``: myopic); ``exploration`` randomises the shown
    price around the chosen one and reports its propensity (``None``: off); ``price_response`` prices
    with the bundle's pooled price response (:mod:`pricing.price_response`) when it has one;
    ``stay_features`` (e.g. the scorer's feature source) gives the bid prices of a stay's later nights
    (``BidPriceConfig.stays_hold_nights``): the stay is priced against the sum of its nights' bids.
    ``backend`` scores the demand model with onnxruntime (``"onnx"``) or the compiled boosters
    (``"compiled"``, :mod:`pricing.compiled`: equal to LightGBM's own predictions within 1e-6).

    Raises:
        BundleError: if the bundle is missing, corrupt or of an unknown tier.
    """
    meta = read_meta(bundle_dir)
    if meta["tier"] == "light":
        return LightPricer(bundle_dir, meta=meta, capacity=capacity, exploration=exploration,
                           price_response=price_response, stay_features=stay_features, backend=backend)
    if meta["tier"] == "heavy":
        return HeavyPricer(bundle_dir, meta=meta, capacity=capacity, exploration=exploration,
                           price_response=price_response, stay_features=stay_features, backend=backend)
    msg = f"bundle {bundle_dir}: tier {meta['tier']!r}, expected 'light' or 'heavy'"
    raise BundleError(msg)
