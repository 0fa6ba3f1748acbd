"""The market's aggregate curves: revenue per offer view over a price grid, and a warm start's bookings.

Both mix the segments of a :class:`~market.market.Market` (by arrival share, by channel) and are
read through its methods (:meth:`~market.market.Market.revenue_curve`,
:meth:`~market.market.Market.expected_bookings_before`); they live here so that the market's own
module holds the per-shopper truth.

Example:
    >>> import numpy as np
    >>> from datetime import date
    >>> from market.config import MarketConfig
    >>> from market.market import Market
    >>> m = Market(MarketConfig(hotels=1, seed=1))
    >>> o = date(2026, 3, 20).toordinal()
    >>> curve = revenue_curve(m, 0, 0, o, m.checkin_ts(o) - 5 * 86_400.0, np.array([50.0, 100.0, 1e5]))
    >>> bool(curve[0] > 0 and curve[1] > 0 and curve[2] < curve[1])
    True
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:  # the market calls these: a type only, no import at load
    from market.market import Market

_DAY_S = 86_400.0


def revenue_curve(
    market: Market, h: int, r: int, ordinal: int, ts: float, prices: NDArray[Any], *, channel: str | None = None
) -> NDArray[Any]:
    """Expected revenue per offer view at each price, segments mixed by arrival share (and channel)."""
    m, cfg = market, market.config
    mix = m.segment_mix(h, r, ordinal, ts, channel)
    comp = m.comp_median(h, r, ordinal, ts)
    lead = max((m.checkin_ts(ordinal) - ts) / _DAY_S, 0.0)
    total = np.zeros_like(prices, dtype=float)
    logp = np.log(prices)
    for s, seg in enumerate(cfg.segments):
        if mix[s] <= 0.0:
            continue
        wtp = m.wtp(h, r, ordinal, lead, s)
        chans = {channel: 1.0} if channel is not None else seg.channels
        norm = sum(chans.values())
        for ch, wch in chans.items():
            x = (
                m.seg_alpha[s]
                + cfg.channel_offsets[ch]
                - m.seg_elasticity[s] * (logp - math.log(wtp))
                - cfg.competitor_sensitivity * (logp - math.log(comp))
            )
            p = m.seg_intent[s] / (1.0 + np.exp(-np.clip(x, -700.0, 700.0)))
            total += mix[s] * wch / norm * m.seg_weight[s] * p
    return np.asarray(total * prices)


def bookings_before(market: Market, h: int, r: int, ordinal: int, ts: float) -> float:
    """Rooms expected to be booked for the night before ``ts``, at the reference price (for warm starts).

    See :meth:`~market.market.Market.expected_bookings_before`.
    """
    m, cfg = market, market.config
    lead = (m.checkin_ts(ordinal) - ts) / _DAY_S
    if lead <= 0 or lead >= cfg.horizon_days:
        return 0.0
    factors = m.night_factors(h, r, ordinal)
    ref, comp = m.reference_at(h, r), m.comp_median(h, r, ordinal, ts)
    total = 0.0
    for s, seg in enumerate(cfg.segments):
        mean = float(m.seg_lead_mean[s])
        mass = (math.exp(-lead / mean) - math.exp(-cfg.horizon_days / mean)) / float(m.lead_norm[s]) * factors[s] * 24
        # one probability at the segment's mean channel offset: close enough for a warm start
        offset = sum(w * cfg.channel_offsets[ch] for ch, w in seg.channels.items()) / sum(seg.channels.values())
        p = m.prob(h, r, ordinal, ts, ref, s, "web", comp, offset=offset)
        # a stay holding every night: the night also carries the earlier check-ins' stays, about as
        # many as its own check-ins times their mean stay (neighbouring nights alike)
        held = seg.nights_mean if cfg.stays_hold_nights else 1.0
        kept = 1.0 - seg.cancel_rate if cfg.warm_start_net else 1.0
        total += mass * cfg.view_prob * p * (seg.rooms[0] + seg.rooms[1]) / 2.0 * held * kept
    return total
