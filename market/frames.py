"""Labelled training frames: the simulated market's pricing requests, with the features the job serves.

:func:`training_frame` simulates the market's behaviour events from :data:`STREAM_LOOKBACK` before
``start`` to the end of the range (:func:`market.simulate`, seeded by ``seed``, views priced by
``policy``) and takes its rows from the simulated requests: a sample of the view events of
``[start, start + days)`` (a view is a shopper quoted a price, on a night with rooms left). Each row

* reads every catalogue feature as of 1 ms before its view, what the scorer reads when it prices that
  request, with the one implementation of the windows (:func:`features.replay.features_at` over
  :mod:`features.asof`: the catalogue's windows as of the key's newest event, the views' TTLs), which
  the integration tests hold equal to the job's values; NaN where the online store serves nothing;
* quotes an explored price (reference x lognormal(0, ``price_sigma``), or the policy's), draws the
  stay's nights from the shopper's segment and the outcome with the market's true booking
  probability at that price.

So a model trained on it learns from the values it will see when serving; ``pricestream features
skew`` measures what is left. The cost is the simulation: ``bench/stream_features.py --frames``
measures it.

Example:
    >>> from market.config import MarketConfig
    >>> market = Market(MarketConfig(hotels=2, seed=4))
    >>> df = training_frame(market, n=200, seed=1, days=3)
    >>> list(df.columns) == list(FRAME_COLUMNS), len(df)
    (True, 200)
    >>> bool(df[list(REQUEST_FEATURES)].notna().all().all()), bool((df["searches_1h"] >= 1).all())
    (True, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from events.catalog import ALL_FEATURES, REQUEST_FEATURES
from events.models import CHANNELS
from market.errors import PolicyError, SimulatorError
from market.market import Market
from market.shoppers import Offer, Policy

KEY_COLUMNS: tuple[str, ...] = ("hotel_id", "room_type", "stay_date", "event_time")
FRAME_COLUMNS: tuple[str, ...] = (
    ALL_FEATURES + REQUEST_FEATURES + ("base_rate", "booked") + KEY_COLUMNS + ("true_prob",)
)
"""Features, request features, the room's base rate (its reference price, as the rules quote it), then the rest."""
_CHANNEL_CODE = {name: float(i) for i, name in enumerate(CHANNELS)}
STREAM_LOOKBACK = timedelta(days=15)
"""Events simulated before the first offer: the longest window (14 days) and its tile."""
_BEFORE = pd.Timedelta(milliseconds=1)
"""A request is priced before its view is emitted: its features are read this long before the view."""


def training_frame(
    market: Market,
    *,
    n: int,
    seed: int,
    policy: Policy | None = None,
    start: datetime | None = None,
    days: int = 60,
    price_sigma: float = 0.3,
) -> pd.DataFrame:
    """``n`` simulated requests with the features the job would serve, the quoted price, the outcome and the truth.

    Args:
        market: the ground truth.
        n: rows (drawn with replacement when the range holds fewer requests).
        seed: seeds every draw (the simulated events included).
        policy: quotes the price and prices the simulated views; default reference price x
            lognormal(0, ``price_sigma``) for the rows, the reference price for the views.
        start: requests fall in ``[start, start + days)``; default ``market.config.start``.
        days: width of the time range.
        price_sigma: exploration spread of the default prices (log scale).

    Returns:
        Columns :data:`FRAME_COLUMNS`: features (NaN where the online store would serve none),
        request features, ``base_rate`` (the room's reference price), ``booked`` (0/1), the keys
        and ``true_prob``.

    Raises:
        SimulatorError: on a bad argument, or a range in which nobody was quoted a price.
    """
    if n < 1 or days < 1 or not price_sigma >= 0:
        raise SimulatorError(
            field="n/days/price_sigma", value=(n, days, price_sigma), expected="n>=1, days>=1, sigma>=0"
        )
    begin = market.config.start if start is None else start
    if begin.tzinfo is None:
        raise SimulatorError(field="start", value=begin, expected="a timezone-aware datetime")
    rng = np.random.default_rng([seed, 7])
    events = _simulated_events(market, seed=seed, start=begin, days=days, policy=policy)
    req = _requests(market, events, n=n, rng=rng, start=begin, days=days)
    prices = _prices(market, req, rng, policy, price_sigma)
    truth = np.array(
        [
            market.prob(h, r, o, t, p, s, c, market.comp_median(h, r, o, t))
            for h, r, o, t, p, s, c in zip(req.h, req.r, req.ordinal, req.ts, prices, req.s, req.channel, strict=True)
        ]
    )
    booked = (rng.random(n) < truth).astype(np.int64)
    return _assemble(market, req, prices=prices, booked=booked, truth=truth)


@dataclass(frozen=True)
class _Requests:
    """Column arrays of the sampled requests (index-based keys) and the features served to them."""

    h: NDArray[Any]
    r: NDArray[Any]
    s: NDArray[Any]
    ordinal: NDArray[Any]
    ts: NDArray[Any]
    channel: list[str]
    nights: NDArray[Any]
    lead_days: NDArray[Any]
    stay_dates: list[date]
    reference: NDArray[Any]
    features: pd.DataFrame

    def offer(self, market: Market, i: int) -> Offer:
        """Row ``i`` as the :class:`Offer` a policy sees (rooms as the served inventory shows them)."""
        cfg = market.config
        h, r = int(self.h[i]), int(self.r[i])
        left, cap = self.features["rooms_left"].iat[i], self.features["capacity"].iat[i]
        capacity = market.capacity_at(h, r) if cap != cap else int(cap)
        return Offer(
            hotel_id=cfg.hotel_ids[h], room_type=cfg.room_types[r], stay_date=self.stay_dates[i],
            at=datetime.fromtimestamp(round(float(self.ts[i]), 3), UTC), segment=cfg.segments[int(self.s[i])].name,
            channel=self.channel[i], lead_time_days=int(self.lead_days[i]),
            rooms_left=capacity if left != left else int(left), capacity=capacity, nights=int(self.nights[i]),
        )


def _simulated_events(market: Market, *, seed: int, start: datetime, days: int,
                      policy: Policy | None) -> pd.DataFrame:
    """The raw-event rows of the market's simulated behaviour from :data:`STREAM_LOOKBACK` before ``start``."""
    from features.replay import events_frame
    from market.generator import simulate

    span = STREAM_LOOKBACK + timedelta(days=days)
    return events_frame(simulate(market, start=start - STREAM_LOOKBACK, duration=span, policy=policy, rng_seed=seed))


def _requests(market: Market, events: pd.DataFrame, *, n: int, rng: np.random.Generator, start: datetime,
              days: int) -> _Requests:
    """``n`` of the views in ``[start, start + days)``, in time order, and the features served just before each."""
    from features.replay import POINT_COLUMNS, features_at

    t = events["event_time"]
    views = events[(events["event_type"] == "view") & (t >= pd.Timestamp(start))
                   & (t < pd.Timestamp(start + timedelta(days=days)))]
    if views.empty:
        raise SimulatorError(field="start/days", value=(start, days), expected="a range in which shoppers view rooms")
    picked = views.iloc[np.sort(rng.choice(len(views), size=n, replace=n > len(views)))].reset_index(drop=True)
    points = picked[list(POINT_COLUMNS)].assign(event_time=picked["event_time"] - _BEFORE)
    cfg = market.config
    h = picked["hotel_id"].map({name: i for i, name in enumerate(cfg.hotel_ids)}).to_numpy(dtype=np.int64)
    r = picked["room_type"].map({name: i for i, name in enumerate(cfg.room_types)}).to_numpy(dtype=np.int64)
    s = picked["segment"].map({seg.name: i for i, seg in enumerate(cfg.segments)}).to_numpy(dtype=np.int64)
    stays = [date.fromisoformat(str(d)) for d in picked["stay_date"]]
    ts = picked["event_time"].astype("datetime64[ms, UTC]").astype("int64").to_numpy() / 1000.0
    nights = np.array([min(int(rng.geometric(1.0 / cfg.segments[k].nights_mean)), 60) for k in s], dtype=np.int64)
    return _Requests(
        h=h, r=r, s=s, ordinal=np.array([d.toordinal() for d in stays], dtype=np.int64), ts=ts,
        channel=[str(c) for c in picked["channel"]], nights=nights,
        lead_days=np.array([max((d - day.date()).days, 0) for d, day in zip(stays, picked["event_time"], strict=True)]),
        stay_dates=stays, reference=np.array([market.reference_at(int(a), int(b)) for a, b in zip(h, r, strict=True)]),
        features=features_at(events, points),
    )


def _assemble(market: Market, req: _Requests, *, prices: NDArray[Any], booked: NDArray[Any],
              truth: NDArray[Any]) -> pd.DataFrame:
    hotel_ids, rooms = market.config.hotel_ids, market.config.room_types
    data: dict[str, object] = {name: req.features[name].to_numpy(dtype=float) for name in ALL_FEATURES}
    data["price"] = prices
    data["lead_time_days"] = req.lead_days.astype(float)
    data["nights"] = req.nights.astype(float)
    data["stay_dow"] = np.array([float((o - 1) % 7) for o in req.ordinal])  # ordinal 1 was a Monday
    data["channel_code"] = np.array([_CHANNEL_CODE[c] for c in req.channel])
    data["base_rate"] = req.reference
    data["booked"] = booked
    data["hotel_id"] = [hotel_ids[h] for h in req.h]
    data["room_type"] = [rooms[r] for r in req.r]
    data["stay_date"] = list(req.stay_dates)
    data["event_time"] = pd.to_datetime(np.round(req.ts * 1000).astype(np.int64), unit="ms", utc=True)
    data["true_prob"] = truth
    return pd.DataFrame(data, columns=list(FRAME_COLUMNS))


def _prices(
    market: Market, req: _Requests, rng: np.random.Generator, policy: Policy | None, sigma: float
) -> NDArray[Any]:
    refs = req.reference
    if policy is None:
        return np.asarray(np.round(refs * np.exp(rng.normal(0.0, sigma, len(refs))), 2))
    out = np.empty(len(refs))
    for i in range(len(refs)):
        offer = req.offer(market, i)
        price = policy(offer)
        if not isinstance(price, int | float) or not math.isfinite(price) or price <= 0:
            raise PolicyError(field="policy(offer)", value=price, expected=f"a finite positive price for {offer}")
        out[i] = float(price)
    return out
