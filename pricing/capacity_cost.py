"""The capacity cost a quote is set against: the bid prices of the nights a stay holds.

A capacity-aware tier prices ``(price - cost) x p(book)``, the cost being the opportunity cost per
room-night (:mod:`pricing.bid_price`) of the check-in night and, with
``BidPriceConfig.stays_hold_nights``, of the later nights of the stay, each from its own forecast and
the check-in night's demand curve. Split from :mod:`pricing.tiers`, which assembles the quote.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np

from events.models import PricingRequest
from pricing.bid_cache import BidCache, BidKey
from pricing.bid_price import BidPriceConfig, DemandForecast, bid_price, cost_per_night, forecast
from pricing.optimiser import Predict, price_grid
from pricing.quote import StayFeatures

BID_GRID = 41
"""Candidates the bid price is searched over (one extra model call per capacity-aware quote)."""
STAY_BID_NIGHTS = 14
"""Later nights of a stay whose own bid price is read (longer stays: the rest at the check-in night's bid):
one feature read and one cached bid each."""


class CapacityCost:
    """Bid prices per night for one pricer's ``config``, cached in ``cache``.

    Args:
        config: the bid-price forecast and method.
        stay_features: where the later nights of a stay are read (``None``: the check-in night's bid
            stands for every night).
        cache: the pricer's :class:`~pricing.bid_cache.BidCache`.
    """

    def __init__(self, config: BidPriceConfig, stay_features: StayFeatures | None, cache: BidCache) -> None:
        self.config = config
        self._stay_features = stay_features
        self._bids = cache

    def bid(
        self, predict: Predict, low: float, high: float, fc: DemandForecast, key: BidKey | None = None
    ) -> float | None:
        """The bid price on the search range (``None`` if the model answers non-finite values).

        With ``key`` (hotel, room type, night, channel) it comes from :class:`BidCache` while the
        forecast and the demand curve it was computed from have not moved.
        """
        grid = price_grid(low, high, BID_GRID)
        probs = np.asarray(predict(grid), dtype=np.float64).reshape(len(grid), -1).mean(axis=1)
        if not np.all(np.isfinite(probs)):
            return None
        cfg = self.config
        return self._bids.get(
            key,
            (fc, low, high, probs),
            lambda: bid_price(grid, probs, fc, method=cfg.method, nights=cfg.nights_mix, holds=cfg.stays_hold_nights),
        )

    def check_in_bid(
        self,
        request: PricingRequest,
        demand: Predict,
        fc: DemandForecast,
        bounds: tuple[float, float, float],
        *,
        trained_only: bool,
    ) -> tuple[float | None, float]:
        """The check-in night's bid price and the top of the search range it leaves.

        ``bounds`` is ``(low, high, ceiling)``. On the model's own trained range (``trained_only``) with
        ``BidPriceConfig.beyond_trained``, a bid at or above ``high`` means the rooms are worth more than
        the dearest trained price: the search (and the bid) then run up to the rules' ``ceiling``.
        """
        low, high, ceiling = bounds
        key = (request.hotel_id, request.room_type, request.stay_date.isoformat(), str(request.channel))
        bid = self.bid(demand, low, high, fc, key)
        if trained_only and bid is not None and self.config.beyond_trained and bid >= high:
            high = ceiling
            bid = self.bid(demand, low, high, fc, key)
        return bid, high

    def per_night(self, bid: float, request: PricingRequest, demand: Predict, low: float, high: float) -> float:
        """The cost per room-night of the stay, from the check-in ``bid`` and its later nights' own bids."""
        stay = self.stay_bids(request, demand, low, high)
        return cost_per_night(bid, request.nights, self.config, stay_bids=stay)

    def stay_bids(self, request: PricingRequest, demand: Predict, low: float, high: float) -> list[float] | None:
        """Bid prices of the nights after check-in that a stay holds, from their own features.

        Each night's forecast (its rooms left, searches, booking curve at its own lead) with the check-in
        night's demand curve; a night with no features ends the list (:func:`cost_per_night` takes the
        rest at the check-in night's bid). ``None`` without ``stay_features`` or for one night.
        """
        cfg, source = self.config, self._stay_features
        if source is None or not cfg.stays_hold_nights or request.nights <= 1:
            return None
        out: list[float] = []
        for k in range(1, min(request.nights, STAY_BID_NIGHTS + 1)):
            night = request.stay_date + timedelta(days=k)
            values = source.read(request.hotel_id, request.room_type, night).values
            fc = forecast(request.model_copy(update={"stay_date": night}), values, cfg) if values else None
            bid = None if fc is None else self.bid(
                demand, low, high, fc, (request.hotel_id, request.room_type, night.isoformat(), str(request.channel))
            )
            if bid is None:
                break
            out.append(bid)
        return out
