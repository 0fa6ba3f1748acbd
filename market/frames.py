"""Labelled training frames straight from the truth, without running the stream.

:func:`training_frame` samples offers the way shoppers arrive (hotel, room type,
segment, booking window, time of day, weighted by the market's arrival rates),
quotes an explored price (reference x lognormal, or a given policy), samples the
outcome with the true booking probability, and attaches the features that the
streaming aggregates would show for that key at that time.

With ``features="stream"`` the features are those the deployed job would serve: the market's
behaviour events are simulated from :data:`STREAM_LOOKBACK` before ``start`` to the end of the range
(:func:`market.simulate`, seeded by ``seed``), and each offer reads every feature as of its time with
the offline history's computation (:func:`features.replay.features_at`: the catalogue's windows as
of the key's newest event, the views' TTLs). Slower (the events are simulated), but the models learn
from the values they will see when serving.

By default (``features="expected"``) the features are an approximation of the Flink job's output
(see ``pipelines/job_specs.py``), not a replay of it:

* window counts (1h, 24h, 7d, 14d) are Poisson draws of the integrated arrival
  rate over disjoint slices ending at the offer time (midpoint rule per slice),
  so ``searches_1h <= searches_24h <= searches_7d`` always holds; views are a
  binomial thinning of searches; booked rooms are Poisson with the views'
  expected rooms at the reference price; cancellations are the segment-mixed
  cancellation share of the bookings in the same slice;
* windows end at the offer time, whereas the job's windows end at the key's
  latest event (the online store serves the last row), and sold-out periods do
  not thin the counts;
* ``lead_time_mean_days_7d``/``std`` are computed from sampled search times,
  with the job's whole-day ``TIMESTAMPDIFF`` to the stay date's midnight;
* ``mean_price_shown_24h`` is the reference price with the exploration noise
  averaged over the 24h views (with a policy: the policy's price with small noise);
* competitor features come from a Poisson number of competitor updates in the
  last 24h, each a real :meth:`Market.competitor_rates` value (missing when none);
* ``rooms_left`` comes from a Poisson draw of the bookings the night would
  have by then at reference prices (:meth:`Market.expected_bookings_before`),
  capped so at least one room is left (an offer needs availability);
* hotel-level 24h counts add the rest of the hotel's nights (integrated at
  the slice midpoint) to the stay key's own counts;
* derived ratios use :func:`events.catalog.derive`, as the online read does.

Example:
    >>> from market.config import MarketConfig
    >>> market = Market(MarketConfig(hotels=3, seed=4))
    >>> df = training_frame(market, n=200, seed=1)
    >>> list(df.columns) == list(FRAME_COLUMNS), len(df)
    (True, 200)
    >>> bool(df[list(REQUEST_FEATURES)].notna().all().all())
    True
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from events.catalog import ALL_FEATURES, REQUEST_FEATURES, derive
from events.models import CHANNELS
from market.errors import PolicyError, SimulatorError
from market.market import Market
from market.offers import SampledOffers, sample_offers
from market.shoppers import Policy

KEY_COLUMNS: tuple[str, ...] = ("hotel_id", "room_type", "stay_date", "event_time")
FRAME_COLUMNS: tuple[str, ...] = (
    ALL_FEATURES + REQUEST_FEATURES + ("base_rate", "booked") + KEY_COLUMNS + ("true_prob",)
)
"""Features, request features, the room's base rate (its reference price, as the rules quote it), then the rest."""
_DAY = 86_400.0
_CHANNEL_CODE = {name: float(i) for i, name in enumerate(CHANNELS)}
# Disjoint slices back from the offer time, as (start, end) in days ago; 1h, rest of 24h, days 1-6, days 7-13.
_SLICES: tuple[tuple[float, float], ...] = (
    (0.0, 1.0 / 24.0),
    (1.0 / 24.0, 1.0),
    *((float(d), float(d + 1)) for d in range(1, 14)),
)
_POLICY_PRICE_NOISE = 0.05  # spread of a policy's past prices around today's quote
STREAM_LOOKBACK = timedelta(days=15)
"""Events simulated before the first offer with ``features="stream"``: the longest window (14 days) and its tile."""


def training_frame(
    market: Market,
    *,
    n: int,
    seed: int,
    policy: Policy | None = None,
    start: datetime | None = None,
    days: int = 60,
    price_sigma: float = 0.3,
    features: Literal["expected", "stream"] = "expected",
) -> pd.DataFrame:
    """``n`` offers with streaming-like features, the quoted price, the sampled outcome and the truth.

    Args:
        market: the ground truth.
        n: rows.
        seed: seeds every draw.
        policy: quotes the price; default reference price x lognormal(0, ``price_sigma``).
        start: offers fall in ``[start, start + days)``; default ``market.config.start``.
        days: width of the time range.
        price_sigma: exploration spread of the default prices (log scale).
        features: ``stream``: read from simulated events as the job serves them; ``expected``: drawn
            from the market's expected rates (see the module docstring).

    Returns:
        Columns :data:`FRAME_COLUMNS`: features (NaN where the stream would
        have none), request features, ``base_rate`` (the room's reference price),
        ``booked`` (0/1), the keys and ``true_prob``.
    """
    if features not in ("expected", "stream"):
        raise SimulatorError(field="features", value=features, expected="'expected' or 'stream'")
    if n < 1 or days < 1 or not price_sigma >= 0:
        raise SimulatorError(
            field="n/days/price_sigma", value=(n, days, price_sigma), expected="n>=1, days>=1, sigma>=0"
        )
    begin = market.config.start if start is None else start
    if begin.tzinfo is None:
        raise SimulatorError(field="start", value=begin, expected="a timezone-aware datetime")
    rng = np.random.default_rng([seed, 7])
    offers = sample_offers(market, n=n, rng=rng, start=begin.timestamp(), days=days)
    prices = _prices(market, offers, rng, policy, price_sigma)
    truth = np.array(
        [
            market.prob(h, r, o, t, p, s, c, market.comp_median(h, r, o, t))
            for h, r, o, t, p, s, c in zip(
                offers.h, offers.r, offers.ordinal, offers.ts, prices, offers.s, offers.channel, strict=True
            )
        ]
    )
    booked = (rng.random(n) < truth).astype(np.int64)
    hotel_ids, rooms = market.config.hotel_ids, market.config.room_types
    if features == "stream":
        values = _stream_features(market, offers, seed=seed, start=begin, days=days)
    else:
        values = _features(market, offers, rng, prices if policy is not None else None, price_sigma)
    data: dict[str, object] = {name: values[name] for name in ALL_FEATURES}
    data["price"] = prices
    data["lead_time_days"] = offers.lead_days.astype(float)
    data["nights"] = offers.nights.astype(float)
    data["stay_dow"] = np.array([float((o - 1) % 7) for o in offers.ordinal])  # ordinal 1 was a Monday
    data["channel_code"] = np.array([_CHANNEL_CODE[c] for c in offers.channel])
    data["base_rate"] = offers.reference
    data["booked"] = booked
    data["hotel_id"] = [hotel_ids[h] for h in offers.h]
    data["room_type"] = [rooms[r] for r in offers.r]
    data["stay_date"] = list(offers.stay_dates)
    data["event_time"] = pd.to_datetime(np.round(offers.ts * 1000).astype(np.int64), unit="ms", utc=True)
    data["true_prob"] = truth
    return pd.DataFrame(data, columns=list(FRAME_COLUMNS))


def _stream_features(market: Market, offers: SampledOffers, *, seed: int, start: datetime,
                     days: int) -> dict[str, NDArray[Any]]:
    """Every catalogue feature per offer, read from simulated events as the job serves them."""
    from features.replay import events_frame, features_at
    from market.generator import simulate

    stream = simulate(market, start=start - STREAM_LOOKBACK, duration=STREAM_LOOKBACK + timedelta(days=days),
                      rng_seed=seed)
    cfg = market.config
    points = pd.DataFrame({
        "hotel_id": [cfg.hotel_ids[h] for h in offers.h], "room_type": [cfg.room_types[r] for r in offers.r],
        "stay_date": [d.isoformat() for d in offers.stay_dates],
        "event_time": pd.to_datetime(np.round(offers.ts * 1000).astype(np.int64), unit="ms", utc=True)})
    read = features_at(events_frame(stream), points)
    return {name: read[name].to_numpy(dtype=float) for name in ALL_FEATURES}


def _prices(
    market: Market, offers: SampledOffers, rng: np.random.Generator, policy: Policy | None, sigma: float
) -> NDArray[Any]:
    refs = np.array([market.reference_at(h, r) for h, r in zip(offers.h, offers.r, strict=True)])
    if policy is None:
        return np.asarray(np.round(refs * np.exp(rng.normal(0.0, sigma, len(refs))), 2))
    out = np.empty(len(refs))
    for i in range(len(refs)):
        offer = offers.offer(market, i)
        price = policy(offer)
        if not isinstance(price, int | float) or not math.isfinite(price) or price <= 0:
            raise PolicyError(field="policy(offer)", value=price, expected=f"a finite positive price for {offer}")
        out[i] = float(price)
    return out


def _features(
    market: Market,
    offers: SampledOffers,
    rng: np.random.Generator,
    policy_prices: NDArray[Any] | None,
    sigma: float,
) -> dict[str, NDArray[Any]]:
    """Every catalogue feature per offer (NaN for missing), see the module docstring."""
    cfg = market.config
    n = len(offers.ts)
    counts = _window_counts(market, offers, rng)
    feats: dict[str, NDArray[Any]] = {}
    for name, (lo, hi) in {"1h": (0, 1), "24h": (0, 2), "7d": (0, 8), "14d": (0, 15)}.items():
        for kind in ("searches", "views", "bookings", "cancellations"):
            feats[f"{kind}_{name}"] = counts[kind][:, lo:hi].sum(axis=1).astype(float)
    views24 = feats["views_24h"]
    if policy_prices is None:
        shown = offers.reference * np.exp(rng.normal(0.0, 1.0, n) * sigma / np.sqrt(np.maximum(views24, 1.0)))
    else:
        shown = policy_prices * np.exp(rng.normal(0.0, _POLICY_PRICE_NOISE, n))
    feats["mean_price_shown_24h"] = np.where(views24 > 0, np.round(shown, 2), np.nan)
    feats["comp_rate_median_24h"], feats["comp_rate_min_24h"] = _competitor_features(market, offers, rng)
    lead_mean, lead_std = _lead_features(market, offers, counts["searches"][:, :8], rng)
    feats["lead_time_mean_days_7d"], feats["lead_time_std_days_7d"] = lead_mean, lead_std
    feats["capacity"] = offers.capacity.astype(float)
    feats["rooms_left"] = offers.rooms_left.astype(float)
    feats["occupancy"] = 1.0 - offers.rooms_left / offers.capacity
    rest = np.maximum(offers.hotel_searches_24h - counts["rate"][:, :2].sum(axis=1), 0.0)
    extra_searches = rng.poisson(rest)
    extra_views = rng.binomial(extra_searches, cfg.view_prob)
    extra_rooms = rng.poisson(extra_views * offers.rooms_per_view)
    feats["hotel_searches_24h"] = feats["searches_24h"] + extra_searches
    feats["hotel_views_24h"] = feats["views_24h"] + extra_views
    feats["hotel_bookings_24h"] = feats["bookings_24h"] + extra_rooms
    _add_derived(feats, n)
    return feats


def _window_counts(market: Market, offers: SampledOffers, rng: np.random.Generator) -> dict[str, NDArray[Any]]:
    """Counts per disjoint slice (n, len(_SLICES)): searches, views, booked rooms, cancelled rooms, and rates."""
    n, k = len(offers.ts), len(_SLICES)
    rate = np.zeros((n, k))
    for j, (lo, hi) in enumerate(_SLICES):
        mid = offers.ts - (lo + hi) / 2.0 * _DAY
        lead = (offers.checkin - mid) / _DAY
        per_hour = (offers.factors * market.lead_pdf(lead)).sum(axis=1)
        diurnal = market.diurnal(mid) if hi - lo < 1.0 else 1.0
        rate[:, j] = per_hour * diurnal * (hi - lo) * 24.0
    searches = rng.poisson(rate)
    views = rng.binomial(searches, market.config.view_prob)
    bookings = rng.poisson(views * offers.rooms_per_view[:, None])
    cancellations = rng.poisson(bookings * offers.cancel_share[:, None])
    return {"searches": searches, "views": views, "bookings": bookings, "cancellations": cancellations, "rate": rate}


def _competitor_features(
    market: Market, offers: SampledOffers, rng: np.random.Generator
) -> tuple[NDArray[Any], NDArray[Any]]:
    cfg = market.config
    n = len(offers.ts)
    med, low = np.full(n, np.nan), np.full(n, np.nan)
    updates = rng.poisson(cfg.competitor_updates_per_day, n)
    for i in np.nonzero(updates)[0]:
        when = offers.ts[i] - rng.random(int(updates[i])) * _DAY
        who = rng.integers(0, cfg.competitors, int(updates[i]))
        h, r, o = int(offers.h[i]), int(offers.r[i]), int(offers.ordinal[i])
        rates = [market.comp_rates(h, r, o, market.comp_bucket(float(t)))[j] for t, j in zip(when, who, strict=True)]
        med[i], low[i] = float(np.median(rates)), min(rates)
    return med, low


def _lead_features(
    market: Market, offers: SampledOffers, searches: NDArray[Any], rng: np.random.Generator
) -> tuple[NDArray[Any], NDArray[Any]]:
    """Mean and population std of whole-day lead times of the 7d searches, from sampled search times."""
    n = len(offers.ts)
    mean, std = np.full(n, np.nan), np.full(n, np.nan)
    midnight = offers.checkin - market.config.check_in_hour * 3600.0
    for i in np.nonzero(searches.sum(axis=1))[0]:
        ago = [lo + (hi - lo) * rng.random(int(c)) for (lo, hi), c in zip(_SLICES[:8], searches[i], strict=True) if c]
        when = offers.ts[i] - np.concatenate(ago) * _DAY
        lead = np.maximum(np.floor((midnight[i] - when) / _DAY), 0.0)
        mean[i], std[i] = float(lead.mean()), float(lead.std())
    return mean, std


def _add_derived(feats: dict[str, NDArray[Any]], n: int) -> None:
    rows = [
        derive({name: _opt(feats[name][i]) for name in ("bookings_7d", "bookings_14d", "views_7d")}) for i in range(n)
    ]
    for name in ("bookings_prev_7d", "booking_pace_7d", "look_to_book_7d"):
        feats[name] = np.array([np.nan if row[name] is None else row[name] for row in rows], dtype=float)


def _opt(value: float) -> float | None:
    return None if math.isnan(value) else float(value)
