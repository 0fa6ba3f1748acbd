"""Offers sampled the way shoppers arrive, for :mod:`market.frames`.

Candidates are drawn from a simple proposal (hotel uniform, room type by base
capacity, segment by share, lead time from the segment's booking window, time
uniform) and resampled with weights ``true arrival rate / proposal density``, so
busy nights (season, spikes, the segment's favourite weekdays, evening hours)
get their fair share of rows.

Example:
    >>> from market.config import MarketConfig
    >>> market = Market(MarketConfig(hotels=2, seed=1))
    >>> start = market.config.start.timestamp()
    >>> offers = sample_offers(market, n=50, rng=np.random.default_rng(0), start=start, days=7)
    >>> len(offers.ts), bool((offers.checkin > offers.ts).all()), bool((offers.rooms_left >= 1).all())
    (50, True, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from market.market import Market
from market.shoppers import Offer

_DAY = 86_400.0
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_OVERSAMPLE = 3  # candidates per returned offer before importance resampling


@dataclass(frozen=True)
class SampledOffers:
    """Column arrays of sampled offers (index-based keys plus what the feature builder needs)."""

    h: NDArray[Any]
    r: NDArray[Any]
    s: NDArray[Any]
    ordinal: NDArray[Any]
    ts: NDArray[Any]
    checkin: NDArray[Any]
    channel: list[str]
    nights: NDArray[Any]
    rooms: NDArray[Any]
    lead_days: NDArray[Any]
    stay_dates: list[date]
    reference: NDArray[Any]
    capacity: NDArray[Any]
    rooms_left: NDArray[Any]
    factors: NDArray[Any]  # (n, segments) night factors
    rooms_per_view: NDArray[Any]  # expected booked rooms per view at the reference price
    cancel_share: NDArray[Any]  # share of those rooms that get cancelled
    hotel_searches_24h: NDArray[Any]  # expected searches of the whole hotel over the last 24h

    def offer(self, market: Market, i: int) -> Offer:
        """Row ``i`` as the :class:`Offer` a policy sees."""
        cfg = market.config
        return Offer(
            hotel_id=cfg.hotel_ids[int(self.h[i])],
            room_type=cfg.room_types[int(self.r[i])],
            stay_date=self.stay_dates[i],
            at=datetime.fromtimestamp(round(float(self.ts[i]), 3), UTC),
            segment=cfg.segments[int(self.s[i])].name,
            channel=self.channel[i],
            lead_time_days=int(self.lead_days[i]),
            rooms_left=int(self.rooms_left[i]),
            capacity=int(self.capacity[i]),
            nights=int(self.nights[i]),
        )


def sample_offers(market: Market, *, n: int, rng: np.random.Generator, start: float, days: int) -> SampledOffers:
    """``n`` offers in ``[start, start + days)`` (epoch seconds), distributed like real arrivals."""
    h, r, s, ordinal, ts = _candidates(market, n * _OVERSAMPLE, rng, start, days)
    factors = np.array([market.night_factors(int(a), int(b), int(c)) for a, b, c in zip(h, r, ordinal, strict=True)])
    cfg = market.config
    base_caps = np.array([cfg.capacities[rt] for rt in cfg.room_types], dtype=float)
    shares = np.array([seg.share for seg in cfg.segments])
    weight = factors[np.arange(len(s)), s] / (base_caps[r] * shares[s]) * market.diurnal(ts)
    pick = rng.choice(len(s), size=n, p=weight / weight.sum())
    h, r, s, ordinal, ts, factors = h[pick], r[pick], s[pick], ordinal[pick], ts[pick], factors[pick]
    return _complete(market, rng, h, r, s, ordinal, ts, factors)


def _candidates(market: Market, m: int, rng: np.random.Generator, start: float, days: int) -> tuple[NDArray[Any], ...]:
    cfg = market.config
    base_caps = np.array([cfg.capacities[rt] for rt in cfg.room_types], dtype=float)
    shares = np.array([seg.share for seg in cfg.segments])
    h = rng.integers(0, cfg.hotels, m)
    r = rng.choice(len(base_caps), size=m, p=base_caps / base_caps.sum())
    s = rng.choice(len(shares), size=m, p=shares / shares.sum())
    mean = market.seg_lead_mean[s]
    lead = -mean * np.log1p(-rng.random(m) * (1.0 - np.exp(-cfg.horizon_days / mean)))  # truncated exponential
    ts = start + rng.random(m) * days * _DAY
    ordinal = np.floor((ts + lead * _DAY) / _DAY).astype(np.int64) + _EPOCH_ORDINAL
    checkin = (ordinal - _EPOCH_ORDINAL) * _DAY + cfg.check_in_hour * 3600.0
    ordinal = np.where(checkin <= ts, ordinal + 1, ordinal)
    return h, r, s, ordinal, ts


def _complete(
    market: Market,
    rng: np.random.Generator,
    h: NDArray[Any],
    r: NDArray[Any],
    s: NDArray[Any],
    ordinal: NDArray[Any],
    ts: NDArray[Any],
    factors: NDArray[Any],
) -> SampledOffers:
    cfg = market.config
    checkin = (ordinal - _EPOCH_ORDINAL) * _DAY + cfg.check_in_hour * 3600.0
    channel, nights, rooms = _shopper_draws(market, rng, s)
    stay_dates = [date.fromordinal(int(o)) for o in ordinal]
    lead_days = np.array(
        [max((d - datetime.fromtimestamp(float(t), UTC).date()).days, 0) for d, t in zip(stay_dates, ts, strict=True)]
    )
    capacity, rooms_left = _rooms_left(market, rng, h, r, ordinal, ts)
    per_view, cancel = _booking_mix(market, h, r, ordinal, ts, factors, checkin)
    return SampledOffers(
        h=h,
        r=r,
        s=s,
        ordinal=ordinal,
        ts=ts,
        checkin=checkin,
        channel=channel,
        nights=nights,
        rooms=rooms,
        lead_days=lead_days,
        stay_dates=stay_dates,
        reference=np.array([market.reference_at(int(a), int(b)) for a, b in zip(h, r, strict=True)]),
        capacity=capacity,
        rooms_left=rooms_left,
        factors=factors,
        rooms_per_view=per_view,
        cancel_share=cancel,
        hotel_searches_24h=_hotel_searches(market, h, ts),
    )


def _shopper_draws(
    market: Market, rng: np.random.Generator, s: NDArray[Any]
) -> tuple[list[str], NDArray[np.int64], NDArray[np.int64]]:
    """Each offer's channel, nights and rooms, drawn segment by segment (in the segments' order)."""
    n = len(s)
    channel, nights, rooms = [""] * n, np.ones(n, dtype=np.int64), np.ones(n, dtype=np.int64)
    for k, seg in enumerate(market.config.segments):
        rows = np.nonzero(s == k)[0]
        weights = np.array(list(seg.channels.values()))
        for i, c in zip(rows, rng.choice(list(seg.channels), size=len(rows), p=weights / weights.sum()), strict=True):
            channel[i] = str(c)
        nights[rows] = np.minimum(rng.geometric(1.0 / seg.nights_mean, len(rows)), 60)
        rooms[rows] = rng.integers(seg.rooms[0], seg.rooms[1] + 1, len(rows))
    return channel, nights, rooms


def _rooms_left(
    market: Market, rng: np.random.Generator, h: NDArray[Any], r: NDArray[Any], ordinal: NDArray[Any], ts: NDArray[Any]
) -> tuple[NDArray[Any], NDArray[Any]]:
    """Each offer's capacity, and its rooms left: capacity less a draw of the bookings expected by then (>= 1)."""
    capacity = np.array([market.capacity_at(int(a), int(b)) for a, b in zip(h, r, strict=True)])
    expected = np.array(
        [
            market.expected_bookings_before(int(a), int(b), int(c), float(t))
            for a, b, c, t in zip(h, r, ordinal, ts, strict=True)
        ]
    )
    return capacity, np.clip(capacity - rng.poisson(expected), 1, capacity)


def _booking_mix(
    market: Market,
    h: NDArray[Any],
    r: NDArray[Any],
    ordinal: NDArray[Any],
    ts: NDArray[Any],
    factors: NDArray[Any],
    checkin: NDArray[Any],
) -> tuple[NDArray[Any], NDArray[Any]]:
    """Expected booked rooms per view at the reference price, and their cancellation share."""
    cfg = market.config
    mix = factors * market.lead_pdf((checkin - ts) / _DAY)
    mix = mix / np.maximum(mix.sum(axis=1, keepdims=True), 1e-300)
    offsets = [
        sum(w * cfg.channel_offsets[ch] for ch, w in seg.channels.items()) / sum(seg.channels.values())
        for seg in cfg.segments
    ]
    rooms_mean = [(seg.rooms[0] + seg.rooms[1]) / 2.0 for seg in cfg.segments]
    cancel = [seg.cancel_rate for seg in cfg.segments]
    per_view, share = np.zeros(len(h)), np.zeros(len(h))
    for i in range(len(h)):
        a, b, c, t = int(h[i]), int(r[i]), int(ordinal[i]), float(ts[i])
        ref, comp = market.reference_at(a, b), market.comp_median(a, b, c, t)
        rooms = [
            mix[i, k] * market.prob(a, b, c, t, ref, k, "web", comp, offset=offsets[k]) * rooms_mean[k]
            for k in range(len(offsets))
        ]
        per_view[i] = sum(rooms)
        share[i] = sum(x * q for x, q in zip(rooms, cancel, strict=True)) / per_view[i] if per_view[i] > 0 else 0.0
    return per_view, share


def _hotel_searches(market: Market, h: NDArray[Any], ts: NDArray[Any]) -> NDArray[Any]:
    """Expected searches over the last 24h for the whole hotel (all room types and nights), per (hotel, day)."""
    cfg = market.config
    cache: dict[tuple[int, int], float] = {}
    out = np.empty(len(h))
    for i in range(len(h)):
        key = (int(h[i]), int(ts[i] // _DAY))
        if key not in cache:
            mid = (key[1] + 0.5) * _DAY - 0.5 * _DAY  # midpoint of the 24h ending at noon of that day
            first = key[1] + _EPOCH_ORDINAL
            nights = [(b, o) for b in range(len(cfg.room_types)) for o in range(first, first + cfg.horizon_days + 2)]
            fac = np.array([market.night_factors(key[0], b, o) for b, o in nights])
            lead = np.array([(market.checkin_ts(o) - mid) / _DAY for _, o in nights])
            cache[key] = float((fac * market.lead_pdf(lead)).sum()) * 24.0
        out[i] = cache[key]
    return out
