"""Measure a market's booking figures and hold them against the dataset targets of its preset.

Offers are drawn the way shoppers arrive (the proposal of
:mod:`market.offers`, resampled by true arrival rate), over a year of
arrival nights that each have their whole booking window inside the sampled
period. Each is priced by a realistic policy (the truth's revenue-maximising
price for the offer's channel, which follows willingness to pay through the
seasons; divided by the hotel's drawn willingness-to-pay level, so the figures
are those of an average hotel of the preset) and counts as ``P(book | price)`` expected bookings, so the figures
carry no booking-draw noise. Capacity is not simulated here: a sold-out night
would thin its late bookings a little.

Occupancy (:func:`occupancy`) is the one figure with capacity: every night of the
year at the static price, the rooms its stays hold at check-in net of
cancellations (:meth:`Market.expected_bookings_before`, the warm start's count),
bookings Poisson and capped at the night's rooms.

Example:
    >>> from market.presets import preset
    >>> figures = measure(Market(preset("city", hotels=2, seed=1)), n=1500, seed=0)
    >>> 0.3 < figures["cancel_rate"] < 0.55, figures["lead_median"] < figures["lead_mean"]
    (True, True)
"""

from __future__ import annotations

from datetime import date
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy.stats import poisson

from market.market import Market
from market.offers import _candidates
from market.presets import Target, targets

_DAY = 86_400.0
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_OCCUPANCY_STEP = 2  # every other night of the year: the figure moves by under a point, at half the time
_OVERSAMPLE = 6  # candidates per kept offer: about half fall outside the year of arrivals


class Check(NamedTuple):
    """One figure against its target."""

    name: str
    value: float
    target: float
    tolerance: float

    @property
    def ok(self) -> bool:
        return abs(self.value - self.target) <= self.tolerance


def _weighted_quantile(x: npt.NDArray[np.float64], w: npt.NDArray[np.float64], q: float) -> float:
    order = np.argsort(x)
    cum = np.cumsum(w[order])
    return float(x[order][np.searchsorted(cum, q * cum[-1])])


def _sample(market: Market, n: int, rng: np.random.Generator) -> tuple[npt.NDArray[np.int64], ...]:
    """``n`` offers (h, r, s, ordinal, ts) for arrivals in the year after one full horizon."""
    cfg = market.config
    start = cfg.start.timestamp()
    days = cfg.horizon_days + 365
    h, r, s, ordinal, ts = _candidates(market, n * _OVERSAMPLE, rng, start, days)
    first = int(start // _DAY) + _EPOCH_ORDINAL + cfg.horizon_days
    keep = (ordinal >= first) & (ordinal < first + 365)
    h, r, s, ordinal, ts = h[keep], r[keep], s[keep], ordinal[keep], ts[keep]
    base_caps = np.array([cfg.capacities[rt] for rt in cfg.room_types], dtype=float)
    shares = np.array([seg.share for seg in cfg.segments])
    keys = zip(h, r, ordinal, s, strict=True)
    factors = np.array([market.night_factors(int(a), int(b), int(c))[int(k)] for a, b, c, k in keys])
    weight = factors / (base_caps[r] * shares[s]) * market.diurnal(ts)
    pick = rng.choice(len(s), size=n, p=weight / weight.sum())
    return h[pick], r[pick], s[pick], ordinal[pick], ts[pick]


def _level(market: Market, h: int, r: int, ordinal: int) -> float:
    """The drawn willingness-to-pay level of (hotel, room type) relative to the preset's base price.

    Dividing prices by it gives those of an average hotel of the preset (the dataset is one hotel).
    """
    cfg = market.config
    night = market.season(h, ordinal) ** cfg.season_wtp_exponent * market.spike(h, ordinal) ** cfg.spike_wtp_exponent
    return float(market.wtp_base(h, r, ordinal) / (night * cfg.base_prices[cfg.room_types[r]]))


def occupancy(market: Market, *, step: int = 1) -> float:
    """Mean share of rooms held at check-in over a year of arrival nights at the static price (every ``step``-th).

    A night's bookings are Poisson with the warm start's mean (net of cancellations when the market's warm start
    is, which the presets' is), in units of the market's mean rooms per booking, and capped at its rooms.

    Example:
        >>> from market.presets import preset
        >>> 0.0 < occupancy(Market(preset("resort", hotels=1)), step=7) < 1.0
        True
    """
    cfg = market.config
    weights = np.array([seg.share for seg in cfg.segments])
    per_booking = float(weights @ [(seg.rooms[0] + seg.rooms[1]) / 2.0 for seg in cfg.segments] / weights.sum())
    first = int(cfg.start.timestamp() // _DAY) + _EPOCH_ORDINAL + cfg.horizon_days
    held, rooms = [], []
    for h in range(cfg.hotels):
        for r in range(len(cfg.room_types)):
            for o in range(first, first + 365, step):
                held.append(market.expected_bookings_before(h, r, o, market.checkin_ts(o) - 60.0))
                rooms.append(market.capacity_at(h, r))
    mean = np.array(held) / per_booking
    cap = np.array(rooms, dtype=float)
    slots = np.floor(cap / per_booking).astype(int)
    # E[min(B, k)] = sum_{j<k} P(B > j) for a Poisson B
    kept = np.array([poisson.sf(np.arange(k), m).sum() if k > 0 else 0.0 for k, m in zip(slots, mean, strict=True)])
    return float(np.mean(np.minimum(kept * per_booking / cap, 1.0)))


def measure(market: Market, *, n: int = 8000, seed: int = 0) -> dict[str, float]:
    """The figures that :func:`check` compares (prices in the market's currency, leads in days)."""
    rng = np.random.default_rng(seed)
    h, r, s, ordinal, ts = _sample(market, n, rng)
    cfg = market.config
    names = cfg.segment_names
    chans = [list(seg.channels) for seg in cfg.segments]
    chan_p = [np.array(list(seg.channels.values())) / sum(seg.channels.values()) for seg in cfg.segments]
    price, book = np.empty(n), np.empty(n)
    for i in range(n):
        a, b, o, k, t = int(h[i]), int(r[i]), int(ordinal[i]), int(s[i]), float(ts[i])
        channel = str(rng.choice(chans[k], p=chan_p[k]))
        price[i] = market.optimal_at(a, b, o, t, channel=channel)
        book[i] = market.prob(a, b, o, t, price[i], k, channel, market.comp_median(a, b, o, t))
    price = price / np.array([_level(market, int(a), int(b), int(o)) for a, b, o in zip(h, r, ordinal, strict=True)])
    lead = (np.array([market.checkin_ts(int(o)) for o in ordinal]) - ts) / _DAY
    month = np.array([date.fromordinal(int(o)).month for o in ordinal])
    by_month = [float((price * book)[month == m].sum() / book[month == m].sum()) for m in range(1, 13)]
    cancel = np.array([seg.cancel_rate for seg in cfg.segments])[s]
    out = {
        "price_month_min": min(by_month),
        "price_month_max": max(by_month),
        "lead_mean": float((lead * book).sum() / book.sum()),
        "lead_median": _weighted_quantile(lead, book, 0.5),
        "lead_p90": _weighted_quantile(lead, book, 0.9),
        "cancel_rate": float((cancel * book).sum() / book.sum()),
        "occupancy": occupancy(market, step=_OCCUPANCY_STEP),
    }
    for k, name in enumerate(names):
        mine = s == k
        out[f"share_{name}"] = float(book[mine].sum() / book.sum())
        out[f"lead_mean_{name}"] = float((lead * book)[mine].sum() / max(book[mine].sum(), 1e-12))
    return out


def check(name: str, market: Market, *, n: int = 8000, seed: int = 0) -> list[Check]:
    """Every dataset figure of preset ``name`` measured on ``market`` (empty for a preset without targets)."""
    goal: dict[str, Target] = targets(name)
    if not goal:
        return []
    figures = measure(market, n=n, seed=seed)
    # a segment the market lacks is a miss (NaN), not an error
    return [Check(key, figures.get(key, float("nan")), t.value, t.tolerance) for key, t in goal.items()]
