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

import hashlib
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from events.models import PricingRequest
from pricing.bid_price import BidPriceConfig, DemandForecast, bid_price, cost_per_night, forecast, logit_tail
from pricing.channel_response import channel_offsets
from pricing.compiled import CompiledDemandModel, ModelBackend
from pricing.errors import BundleError
from pricing.exploration import ExplorationConfig, explore, in_force
from pricing.feature_source import FeatureRead
from pricing.onnx_runtime import OnnxDemandModel
from pricing.optimiser import check_bounds, optimise, price_grid
from pricing.price_response import PriceResponse
from pricing.rules import lead_time_days
from pricing.training import ONNX_FILE, read_meta
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
"""Heavy objective: price x (mean - 0.5 std); a mild penalty that prefers prices the members agree on."""
OOD_STD = 1.0 / math.sqrt(12.0)
"""Std of a probability we know nothing about (uniform on [0, 1]).

Price search is also held inside the trained price range (1st-99th
percentile) where that overlaps ``[floor, ceiling]``: past it the trees
predict a flat ``p(book)``, so revenue would look linear in price and the
optimiser would run to the ceiling.

Trees extrapolate flat, so members agree off the training support exactly where
they know least; the member spread alone cannot see that. A candidate whose
inputs leave the training envelope gets ``OOD_STD x share of inputs outside``
added in quadrature to the spread."""


BID_GRID = 41
TAIL_GRID = 9
"""Prices over the trained range whose demand gives the slope of the extrapolated tail."""
"""Candidates the bid price is searched over (one extra model call per capacity-aware quote)."""
DEFAULT_CAPACITY = BidPriceConfig(method="dp")
"""Pricers are capacity-aware by default; ``capacity=None`` prices myopically (``price x p(book)``). The bid is
the dp one (``pricing.bid_price.dp_bid_price``): on the calibrated markets, 5 seeds, it earned +2.4% (resort) and
+2.9% (city) over the fluid bid, ahead on 7 of 10 seeds, at the fluid bid's decision latency in ``bench/decide.py``
(docs/revenue-management.md, 2 December 2026)."""


@dataclass(frozen=True, slots=True)
class Quote:
    """A tier's answer for one request.

    Attributes:
        price: chosen price, finite and inside ``[floor, ceiling]``.
        expected_revenue: ``price x booking_prob`` (0.0 on fallback).
        booking_prob: mean ``p(book)`` at ``price``; ``None`` only on fallback.
        uncertainty: std of ``p(book)`` at ``price``: member spread (heavy only) and the
            off-distribution term (see ``OOD_STD``), added in quadrature.
        candidates: every evaluated ``(price, p(book))``, sorted by price.
        model_name: bundle name (``demand-light``).
        model_version: bundle version.
        fallback: the model returned non-finite values; ``price`` is the clamped rules price.
        bid_price: opportunity cost per room-night the price was set against (``None``: not capacity-aware,
            the features held no demand forecast).
        forecast: the demand forecast the bid price came from.
        propensity: probability of ``price`` under the exploration draw (1.0 without exploration).
    """

    price: float
    expected_revenue: float
    booking_prob: float | None
    uncertainty: float
    candidates: tuple[tuple[float, float], ...]
    model_name: str
    model_version: str
    fallback: bool = False
    bid_price: float | None = None
    forecast: DemandForecast | None = None
    propensity: float = 1.0


@runtime_checkable
class TierPricer(Protocol):
    """What the scorer calls; implemented by :class:`LightPricer` and :class:`HeavyPricer`."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    def quote(
        self,
        request: PricingRequest,
        features: Mapping[str, float | None],
        *,
        floor: float,
        ceiling: float,
        rule_price: float | None = None,
    ) -> Quote: ...


VIEWS_STEP = 0.05
"""Relative move of the forecast shoppers that makes :class:`BidCache` recompute a bid."""
BID_CACHE_SIZE = 100_000
"""Keys whose bid price a pricer keeps (a 450-day horizon x 3 room types x 6 channels x 10 hotels is 81,000)."""


class BidCache:
    """The last bid price per (hotel, room type, night, channel), reused while its inputs have not moved.

    A bid is recomputed when the forecast it came from moves (rooms left; shoppers still to come by
    ``VIEWS_STEP`` (5%) or more; rooms kept per booking by 0.05; the day of lead time), the search
    range moves by a cent, or the demand curve moves by 0.01 at any price of the bid grid: the
    features move, the bid follows; between two such moves the dp bid (a few ms) is a dictionary
    read. Least recently stored keys go first beyond ``size``. Thread-safe.

    Example:
        >>> cache = BidCache(size=2)
        >>> fc = DemandForecast(10.0, 3.0, 1.0, 5.5)
        >>> probs = np.array([0.5, 0.2])
        >>> cache.get(("h", "r", "n", "web"), (fc, 50.0, 90.0, probs), lambda: 7.0)
        7.0
        >>> cache.get(("h", "r", "n", "web"), (fc, 50.0, 90.0, probs), lambda: 8.0)  # unchanged: cached
        7.0
        >>> moved = fc._replace(rooms_left=2.0)
        >>> cache.get(("h", "r", "n", "web"), (moved, 50.0, 90.0, probs), lambda: 9.0)
        9.0
        >>> cache.hits, cache.misses
        (1, 2)
    """

    def __init__(self, size: int = BID_CACHE_SIZE) -> None:
        self._size = size
        self._entries: dict[tuple[str, str, str, str], tuple[tuple[Any, ...], float]] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def signature(inputs: tuple[DemandForecast, float, float, npt.NDArray[np.float64]]) -> tuple[Any, ...]:
        fc, low, high, probs = inputs
        return (
            round(fc.rooms_left, 3),
            round(math.log(max(fc.views, 1e-3)) / math.log1p(VIEWS_STEP)),
            round(fc.rooms_kept * 20.0),
            math.floor(fc.lead_days),
            round(low, 2),
            round(high, 2),
            tuple(np.round(probs, 2).tolist()),
        )

    def get(
        self,
        key: tuple[str, str, str, str] | None,
        inputs: tuple[DemandForecast, float, float, npt.NDArray[np.float64]],
        compute: Callable[[], float],
    ) -> float:
        """The cached bid of ``key`` if its inputs' signature is unchanged, else ``compute()`` (stored)."""
        if key is None:
            return compute()
        sig = self.signature(inputs)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] == sig:
                self.hits += 1
                return entry[1]
        value = compute()
        with self._lock:
            self.misses += 1
            self._entries.pop(key, None)
            self._entries[key] = (sig, value)
            while len(self._entries) > self._size:
                self._entries.pop(next(iter(self._entries)))
        return value

    def __len__(self) -> int:
        return len(self._entries)


STAY_BID_NIGHTS = 14
"""Later nights of a stay whose own bid price is read (longer stays: the rest at the check-in night's bid):
one feature read and one cached bid each."""


class StayFeatures(Protocol):
    """Where a pricer reads the features of a stay's later nights (a :class:`pricing.feature_source.FeatureSource`)."""

    def read(self, hotel_id: str, room_type: str, stay_date: date) -> FeatureRead: ...


def _demand_model(
    path: Path, meta: Mapping[str, Any], blob: bytes, backend: ModelBackend
) -> OnnxDemandModel | CompiledDemandModel:
    """The bundle's demand model on ``backend``: onnxruntime over ``blob``, or its compiled boosters."""
    if backend == "onnx":
        return OnnxDemandModel(blob)
    if backend == "compiled":
        return CompiledDemandModel.from_bundle(path, list(meta["boosters"]))
    msg = f"backend: {backend!r}, expected 'onnx' or 'compiled'"
    raise BundleError(msg)


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
        self._stay_features = stay_features
        self._exploration = exploration
        self._path = Path(bundle_dir)
        self._meta = dict(meta if meta is not None else read_meta(self._path))
        onnx_path = self._path / ONNX_FILE
        try:
            blob = onnx_path.read_bytes()
        except OSError as exc:
            msg = f"bundle {self._path}: {ONNX_FILE} unreadable ({exc})"
            raise BundleError(msg) from exc
        expected = self._meta["onnx_sha256"].get(ONNX_FILE)
        if hashlib.sha256(blob).hexdigest() != expected:
            msg = f"bundle {self._path}: {ONNX_FILE} sha256 does not match meta.json ({expected})"
            raise BundleError(msg)
        self._model = _demand_model(self._path, self._meta, blob, backend)
        self._columns = tuple(self._meta["columns"])
        if self._model.n_features != len(self._columns):
            msg = f"bundle {self._path}: model takes {self._model.n_features} inputs, meta lists {len(self._columns)}"
            raise BundleError(msg)
        envelope = self._meta.get("envelope", {})
        bounds = [envelope.get(c, [None, None]) for c in self._columns[1:]]
        price = envelope.get("price", [None, None])
        self._price_range = (
            -math.inf if price[0] is None else float(price[0]),
            math.inf if price[1] is None else float(price[1]),
        )
        self._low = np.array([-math.inf if b[0] is None else b[0] for b in bounds], dtype=np.float32)
        self._high = np.array([math.inf if b[1] is None else b[1] for b in bounds], dtype=np.float32)
        self._local = threading.local()
        self._response = PriceResponse.from_json(self._meta.get("price_response")) if price_response else None
        self._channel_offsets = channel_offsets(self._meta.get("price_response_channels"))
        self._bids = BidCache()

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
        values = row[1:]
        known = np.isfinite(values)
        outside = known & ((values < self._low) | (values > self._high))
        return int(outside.sum()), int(known.sum())

    def _pooled(
        self,
        predict: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.floating[Any]]],
        request: PricingRequest,
        features: Mapping[str, float | None],
    ) -> Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]] | None:
        """Demand as the model's level at the base rate times the bundle's pooled price response.

        ``P(p) = P_model(anchor) x shape(p) / shape(anchor)`` per member, ``anchor`` the base rate held
        inside the trained price range, ``shape`` the curve of :class:`pricing.price_response.PriceResponse`
        (one model call per quote): the model says how many book in this context, the pooled curve how
        that falls with price; monotone, and sensible past the trained range. The curve is taken at the
        request's lead time and its night's day of year, so the myopic best price moves with the lead
        (business shoppers near arrival) and the season, not with the model's level; the bid price moves
        it further. (Setting the curve's intercept from the model's level instead, a busier context
        meaning a higher willingness to pay, earned 68,117 against 69,235 on the resort, seed 0, 60 days.)
        ``None`` when the bundle has no response, ``price_response`` is off, or the request has no base rate.
        """
        response = self._response
        base = features.get(BASE_RATE)
        if response is None or base is None or not (math.isfinite(base) and base > 0.0):
            return None
        lo, hi = self._price_range
        anchor = min(max(float(base), lo), hi)
        level = np.asarray(predict(np.array([anchor])), dtype=np.float64).reshape(1, -1)
        if not np.all(np.isfinite(level)):
            return None
        lead, doy = float(lead_time_days(request)), request.stay_date.timetuple().tm_yday
        shift = self._channel_shift(request)
        at_anchor = float(response.shape(np.array([anchor]), float(base), lead_days=lead, day_of_year=doy,
                                         offset=shift)[0])

        def pooled(prices: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
            shaped = response.shape(prices, float(base), lead_days=lead, day_of_year=doy, offset=shift)
            ratio = shaped / max(at_anchor, 1e-12)
            return np.asarray(np.clip(level * ratio[:, None], 0.0, 1.0), dtype=np.float64)

        return pooled

    def _channel_shift(self, request: PricingRequest) -> float:
        """The request channel's intercept offset with ``BidPriceConfig.channel_response`` on, else 0."""
        cfg = self._capacity or DEFAULT_CAPACITY
        return self._channel_offsets.get(str(request.channel), 0.0) if cfg.channel_response else 0.0

    def _extended(self, predict: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.floating[Any]]], floor: float,
                  ceiling: float) -> Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]] | None:
        """The model's demand continued past its trained price range (``BidPriceConfig.extrapolate``).

        Inside the range, the model. Past its top ``hi``: each member's ``logit P(hi)`` minus
        ``slope x log(p / hi)``; below its bottom ``lo``: ``logit P(lo)`` plus ``slope x log(lo / p)``,
        with the slope of :func:`pricing.bid_price.logit_tail` (one extra model call on 9 prices).
        ``None`` when off, when the range is unknown or when the bounds stay inside it.
        """
        lo, hi = self._price_range
        cfg = self._capacity or DEFAULT_CAPACITY  # a myopic pricer extrapolates the same way
        if not cfg.extrapolate or not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            return None
        if floor >= lo and ceiling <= hi:
            return None
        grid = price_grid(lo, hi, TAIL_GRID)
        probs = np.asarray(predict(grid), dtype=np.float64).reshape(len(grid), -1).mean(axis=1)
        if not np.all(np.isfinite(probs)):
            return None
        slope = logit_tail(grid, np.minimum.accumulate(probs), cfg.slope_range)
        log_lo, log_hi = math.log(lo), math.log(hi)

        def extended(prices: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
            p = np.asarray(prices, dtype=np.float64)
            q = np.clip(np.asarray(predict(np.clip(p, lo, hi)), dtype=np.float64), 1e-9, 1.0 - 1e-9)
            q = q.reshape(len(p), -1)
            logp = np.log(p)
            shift = -slope * np.maximum(logp - log_hi, 0.0) + slope * np.maximum(log_lo - logp, 0.0)
            return np.asarray(1.0 / (1.0 + np.exp(-(np.log(q / (1.0 - q)) + shift[:, None]))), dtype=np.float64)

        return extended

    def _extra_std(
        self, row: npt.NDArray[np.float32], *, prices_known: bool = False
    ) -> Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]]:
        """The off-distribution std per candidate; ``prices_known``: a price past the trained range is not
        counted as outside (the demand there is the extrapolated curve, not a tree's flat guess)."""
        outside, known = self._outside(row)
        low, high = (-math.inf, math.inf) if prices_known else self._price_range

        def extra(prices: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
            price_out = (prices < low) | (prices > high)
            share: npt.NDArray[np.float64] = (outside + price_out) / (known + 1)
            return OOD_STD * share

        return extra

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
        low, high = max(floor, self._price_range[0]), min(ceiling, self._price_range[1])
        if low > high:  # the bounds leave the trained price range: search them anyway, the OOD term flags it
            low, high = floor, ceiling
        vec = self._vectorizer()
        vec.prepare(request, features)
        model = self._model

        def predict(prices: npt.NDArray[np.float64]) -> npt.NDArray[np.floating[Any]]:
            return model.predict(vec.with_prices(prices))

        extended = self._pooled(predict, request, features) or self._extended(predict, floor, ceiling)
        demand: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.floating[Any]]] = predict
        if extended is not None:
            demand, low, high = extended, floor, ceiling
        fc = None if self._capacity is None else forecast(request, features, self._capacity)
        key = (request.hotel_id, request.room_type, request.stay_date.isoformat(), str(request.channel))
        bid = None if fc is None else self._bid_price(demand, low, high, fc, key)
        beyond = self._capacity is not None and self._capacity.beyond_trained
        if extended is None and fc is not None and bid is not None and beyond and bid >= high:
            # the rooms are worth more than the dearest trained price: search up to the rules' ceiling
            high = ceiling
            bid = self._bid_price(demand, low, high, fc, key)
        cost = 0.0
        if bid is not None and self._capacity is not None:
            stay = self._stay_bids(request, demand, low, high)
            cost = cost_per_night(bid, request.nights, self._capacity, stay_bids=stay)
        best = optimise(
            demand,
            floor=low,
            ceiling=high,
            grid_size=self.grid_size,
            refine_passes=self.refine_passes,
            risk_aversion=self.risk_aversion,
            smoothing=self.smoothing,
            fallback_price=rule_price,
            extra_std=self._extra_std(vec.row, prices_known=extended is not None),
            cost=cost,
        )
        price = best.price
        if best.fallback:  # the rules price answers to the caller's bounds, not the trust region
            price = min(max(math.sqrt(floor * ceiling) if rule_price is None else rule_price, floor), ceiling)
            price = price if math.isfinite(price) else floor
        propensity = 1.0
        exploration = in_force(self._exploration)
        if exploration is not None and not best.fallback:
            price, propensity = explore(price, floor=floor, ceiling=ceiling, key=request.request_id, config=exploration)
        return Quote(
            price,
            best.expected_revenue,
            best.booking_prob,
            best.uncertainty,
            best.candidates,
            self.name,
            self.version,
            best.fallback,
            None if best.fallback else bid,
            None if best.fallback else fc,
            propensity,
        )

    def _bid_price(
        self,
        predict: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.floating[Any]]],
        low: float,
        high: float,
        fc: DemandForecast,
        key: tuple[str, str, str, str] | None = None,
    ) -> float | None:
        """The bid price on the search range (``None`` if the model answers non-finite values).

        With ``key`` (hotel, room type, night, channel) it comes from :class:`BidCache` while the
        forecast and the demand curve it was computed from have not moved.
        """
        grid = price_grid(low, high, BID_GRID)
        probs = np.asarray(predict(grid), dtype=np.float64).reshape(len(grid), -1).mean(axis=1)
        if not np.all(np.isfinite(probs)):
            return None
        cfg = self._capacity or DEFAULT_CAPACITY
        return self._bids.get(
            key,
            (fc, low, high, probs),
            lambda: bid_price(grid, probs, fc, method=cfg.method, nights=cfg.nights_mix, holds=cfg.stays_hold_nights),
        )

    def _stay_bids(
        self,
        request: PricingRequest,
        demand: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.floating[Any]]],
        low: float,
        high: float,
    ) -> list[float] | None:
        """Bid prices of the nights after check-in that a stay holds, from their own features.

        Each night's forecast (its rooms left, searches, booking curve at its own lead) with the check-in
        night's demand curve; a night with no features ends the list (:func:`cost_per_night` takes the
        rest at the check-in night's bid). ``None`` without ``stay_features`` or for one night.
        """
        cfg, source = self._capacity, self._stay_features
        if cfg is None or source is None or not cfg.stays_hold_nights or request.nights <= 1:
            return None
        out: list[float] = []
        for k in range(1, min(request.nights, STAY_BID_NIGHTS + 1)):
            night = request.stay_date + timedelta(days=k)
            values = source.read(request.hotel_id, request.room_type, night).values
            fc = forecast(request.model_copy(update={"stay_date": night}), values, cfg) if values else None
            bid = None if fc is None else self._bid_price(
                demand, low, high, fc, (request.hotel_id, request.room_type, night.isoformat(), str(request.channel))
            )
            if bid is None:
                break
            out.append(bid)
        return out

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
