"""The capacity-aware oracle: the dynamic programme of :mod:`market.dp` under the market's truth.

For every (hotel, room type, night) the market's true demand is laid out on a
grid of periods in lead time (``LEAD_SCHEDULE``: coarse far from arrival, an
hour wide in the last three days, where most of the late demand comes), with
one shopper class per (segment, channel): its arrival rate (night volume x the
segment's lead-time curve x the intra-day cycle x ``view_prob``), its logit
intercept (willingness to pay with the last-minute premium, channel offset,
median competitor rate in the middle of the period), slope, intent, rooms and
nights, and its cancellation rate. The values are solved once per (hotel, room
type), all nights at once, and a shopper is then quoted the price that
maximises ``P(book | p) x (p - bid price)`` with the bid price read from the
values of the period after the offer, at the offer's exact truth (segment,
channel, nights, time).

Stays that hold every night they cover (``MarketConfig.stays_hold_nights``) make the
exact programme a network one (every night's rooms at once). The oracle decomposes it
by night (Talluri & van Ryzin, section 3.4): a stay's value on night ``k`` is its
displacement-adjusted revenue, ``n`` x its price minus the bid prices of its other
nights, read from the previous solution at the same rooms left and lead time (weights
``n - |d|`` for a night ``d`` away, ``n`` the class's mean stay); ``iterations``
solutions in all (the first with no displacement). Night ``k``'s programme sees the
stays that check in on ``k`` (``covering=False``, the default) or every stay covering
it (``covering=True``: its check-ins' rate x their mean stay, neighbouring nights taken
alike). Measured on the resort (seed 0, 60 days from 1 May, where nights sell out
months ahead): covering 3,688 / 5,921 / 4,897 with 1 / 2 / 3 solutions, below the
static price's 6,174 (it overprices: most of the stays from earlier check-ins cannot
fit, their other nights being full); check-ins only 6,967 / 7,273 with 1 / 2. A
shopper is quoted against the mean over the nights of her stay of each night's own bid
price at its own rooms left (``Offer.stay_left``). This is a heuristic bound, not the
network optimum; it is exact when every stay is one night (the hand-solved test).

Approximations: a booking that will be cancelled frees its rooms at once
(``held=False``, the default; in the simulator they come back somewhere between 5%
and 95% of the time left; ``held=True`` is the other extreme, rooms held to the
end, and earned 2-5% less in the city on two 30-day runs), nights enter the recursion at their mean (the quote uses the
shopper's own), and demand within a period is taken at its midpoint.

Example:
    >>> from datetime import date, datetime, timezone
    >>> from market.config import MarketConfig
    >>> from market.shoppers import Offer
    >>> market = Market(MarketConfig(hotels=1, horizon_days=20, seed=3))
    >>> oracle = DPOracle(market, first_night=date(2026, 1, 2), last_night=date(2026, 1, 25))
    >>> at = datetime(2026, 1, 3, 18, tzinfo=timezone.utc)
    >>> full = Offer("h0000", "suite", date(2026, 1, 6), at, "leisure", "web", 3, 5, 5)
    >>> last = full._replace(rooms_left=1)
    >>> oracle.bid_price(last) > oracle.bid_price(full) >= 0.0
    True
    >>> oracle.price(last) > oracle.price(full)
    True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

import numpy as np
import numpy.typing as npt

from market.dp import _bid_prices, best_response, quote, solve
from market.errors import SimulatorError
from market.market import _GRID_RANGE, _LAST_MINUTE_DAYS, Market
from market.shoppers import Offer, Policy

Array = npt.NDArray[np.float64]
_DAY_S = 86_400.0
LEAD_SCHEDULE: tuple[tuple[float, float], ...] = ((60.0, 3.0), (14.0, 1.0), (3.0, 1.0 / 6.0), (0.0, 1.0 / 24.0))
"""(lead days down to which, period length in days): 3-day periods beyond 60 days, daily to 14, 4 h to 3, then
hourly. Rates per period stay below ~0.3 shoppers per key in the last days at the default volume."""


_CHANNEL_GRID = 281  # the myopic oracle's grid: ~1% steps over 0.25x-4x the reference price


def lead_edges(horizon_days: float) -> Array:
    """Period boundaries in lead days, descending from the horizon to 0.

    Example:
        >>> e = lead_edges(20.0)
        >>> float(e[0]), float(e[-1]), len(e)
        (20.0, 0.0, 145)
    """
    edges, lead = [float(horizon_days)], float(horizon_days)
    for down_to, width in LEAD_SCHEDULE:
        n = int(np.ceil((lead - down_to) / width - 1e-9))
        if n > 0:
            edges.extend(np.linspace(lead, down_to, n + 1)[1:].tolist())
            lead = down_to
    return np.asarray(edges)


@dataclass(frozen=True)
class _Classes:
    """Shopper classes, one per (segment, channel)."""

    segment: tuple[int, ...]
    channel: tuple[str, ...]
    share: Array  # the channel's share within its segment
    b: Array
    intent: Array
    rooms_pmf: Array
    nights: Array
    keep: Array

    @classmethod
    def of(cls, market: Market) -> _Classes:
        segs = market.config.segments
        k_max = max(s.rooms[1] for s in segs)
        seg, chan, share, pmf = [], [], [], []
        for i, s in enumerate(segs):
            total = sum(s.channels.values())
            row = np.zeros(k_max)
            row[s.rooms[0] - 1 : s.rooms[1]] = 1.0 / (s.rooms[1] - s.rooms[0] + 1)
            for ch, w in s.channels.items():
                seg.append(i)
                chan.append(ch)
                share.append(w / total)
                pmf.append(row)
        idx = np.asarray(seg)
        sens = market.config.competitor_sensitivity
        return cls(
            segment=tuple(seg),
            channel=tuple(chan),
            share=np.asarray(share),
            b=np.asarray(market.seg_elasticity)[idx] + sens,
            intent=np.asarray(market.seg_intent)[idx],
            rooms_pmf=np.asarray(pmf),
            nights=np.asarray([segs[i].nights_mean for i in seg]),
            keep=np.asarray([1.0 - segs[i].cancel_rate for i in seg]),
        )


def intercepts(market: Market, classes: _Classes, h: int, r: int, o: int, lead: Array, ts: Array) -> Array:
    """Logit intercepts ``(len(lead), classes)`` of night ``o`` at lead days ``lead`` (epoch ``ts``) under the truth.

    A class books with ``intent x sigmoid(intercept - b log p)``: willingness to pay with the last-minute
    premium, the channel's offset and the median competitor rate at ``ts``.
    """
    m, cl = market, classes
    seg = np.asarray(cl.segment)
    premium = np.asarray(m.seg_premium)[seg]
    wtp = m.wtp_base(h, r, o) * (1.0 + premium * np.exp(-np.maximum(lead, 0.0) / _LAST_MINUTE_DAYS)[:, None])
    log_comp = np.log([m.comp_median(h, r, o, float(t)) for t in ts])
    sens = m.config.competitor_sensitivity
    base = np.asarray(m.seg_alpha)[seg] + np.array([m.config.channel_offsets[c] for c in cl.channel])
    return np.asarray(base + np.asarray(m.seg_elasticity)[seg] * np.log(wtp) + sens * log_comp[:, None])


class DPOracle:
    """Capacity-aware prices for the nights ``first_night..last_night`` of a market (values solved lazily).

    Raises:
        SimulatorError: if the night range is empty.
    """

    def __init__(
        self,
        market: Market,
        *,
        first_night: date,
        last_night: date,
        held: bool = False,
        iterations: int = 2,
        covering: bool = False,
    ) -> None:
        if last_night < first_night:
            raise SimulatorError(field="last_night", value=last_night, expected=f"on or after {first_night}")
        if iterations < 1:
            raise SimulatorError(field="iterations", value=iterations, expected="at least 1")
        self.market = market
        self._hold = market.config.stays_hold_nights
        self._iterations = iterations if self._hold else 1
        self._covering = covering
        self._first = first_night.toordinal()
        self._ordinals = np.arange(self._first, last_night.toordinal() + 1)
        self._edges = lead_edges(market.config.horizon_days)
        self._classes = _Classes.of(market)
        self._consume = np.ones(len(self._classes.keep)) if held else self._classes.keep
        self._index = {
            (s, c): j for j, (s, c) in enumerate(zip(self._classes.segment, self._classes.channel, strict=True))
        }
        self._values: dict[tuple[int, int], npt.NDArray[np.float32]] = {}

    # ------------------------------------------------------------ truth on the grid
    def _intercepts(self, h: int, r: int, o: int, lead: Array, ts: Array) -> Array:
        """Logit intercepts ``(len(lead), classes)`` of the night ``o`` at lead days ``lead`` (epoch ``ts``)."""
        return intercepts(self.market, self._classes, h, r, o, lead, ts)

    def _grid(self, h: int, r: int) -> tuple[Array, Array]:
        """``(lam, a)``, each ``(nights, periods, classes)``."""
        m, cl = self.market, self._classes
        mid = (self._edges[:-1] + self._edges[1:]) / 2.0
        width = self._edges[:-1] - self._edges[1:]
        pdf = m.lead_pdf(mid)  # (T, segments)
        n, t, j_count = len(self._ordinals), len(mid), len(cl.segment)
        lam, a = np.zeros((n, t, j_count)), np.zeros((n, t, j_count))
        seg = np.asarray(cl.segment)
        for i, o in enumerate(self._ordinals.tolist()):
            ts = m.checkin_ts(o) - mid * _DAY_S
            cycle = np.where(width >= 1.0, 1.0, np.asarray(m.diurnal(ts)))
            per_seg = np.asarray(m.night_factors(h, r, o)) * pdf * (cycle * width * 24.0)[:, None]
            lam[i] = per_seg[:, seg] * cl.share * m.config.view_prob
            a[i] = self._intercepts(h, r, o, mid, ts)
        if self._hold and self._covering:  # the stays covering a night: its own check-ins' x their mean stay
            lam *= cl.nights
        return lam, a

    def _displacement(self, v_prev: Array) -> Callable[[int], Array]:
        """``t -> _other(v_prev, t)``, the ``other`` argument of :func:`market.dp.solve`."""

        def other(t: int) -> Array:
            return self._other(v_prev, t)

        return other

    def _other(self, v_prev: Array, t: int) -> Array:
        """Bid price per room of a stay's other nights, ``(nights, classes, rooms left + 1)``, at period ``t + 1``."""
        from scipy.ndimage import convolve1d

        cl = self._classes
        nxt = np.asarray(v_prev[:, t + 1, :], dtype=np.float64)
        out = np.zeros((nxt.shape[0], len(cl.segment), nxt.shape[1]))
        done: dict[int, Array] = {}
        for j, s in enumerate(cl.segment):
            if s not in done:
                cost = _bid_prices(nxt, cl.rooms_pmf[j], 1.0)[1]
                n = max(2, round(float(cl.nights[j])))
                w = np.array([n - abs(d) if d else 0 for d in range(1 - n, n)], dtype=float)
                norm = convolve1d(np.ones(nxt.shape[0]), w, mode="constant", cval=0.0)
                done[s] = convolve1d(cost, w, axis=0, mode="constant", cval=0.0) / norm[:, None]
            out[:, j, :] = done[s]
        return out

    def _bounds(self, h: int, r: int) -> tuple[float, float]:
        ref = self.market.reference_at(h, r)
        return ref * _GRID_RANGE[0], ref * _GRID_RANGE[1]

    def values(self, h: int, r: int) -> npt.NDArray[np.float32]:
        """``V[night, period, rooms left]`` of one (hotel, room type); solved on first use."""
        key = (h, r)
        if key not in self._values:
            lam, a = self._grid(h, r)
            cl = self._classes
            lo, hi = self._bounds(h, r)
            v: Array | None = None
            for _ in range(self._iterations):
                prev = v
                v = solve(
                    capacity=self.market.capacity_at(h, r),
                    lam=lam,
                    a=a,
                    b=cl.b,
                    intent=cl.intent,
                    rooms_pmf=cl.rooms_pmf,
                    nights=cl.nights,
                    keep=cl.keep,
                    lo=lo,
                    hi=hi,
                    consume=self._consume,
                    other=None if prev is None else self._displacement(prev),
                )
            assert v is not None
            self._values[key] = v.astype(np.float32)
        return self._values[key]

    def expected_revenue(self, hotel_id: str, room_type: str, stay_date: date) -> float:
        """Expected net revenue of a night sold from the horizon with every room free, under the DP.

        With stays holding every night it is the night's displacement-adjusted value (its stays' revenue
        less their other nights' bid prices), not a share of revenue that sums over nights.
        """
        m = self.market
        h, r = m.hotel_index(hotel_id), m.room_index(room_type)
        return float(self.values(h, r)[self._night(stay_date.toordinal()), 0, -1])

    # ------------------------------------------------------------ quoting
    def _night(self, ordinal: int) -> int:
        i = ordinal - self._first
        if not 0 <= i < len(self._ordinals):
            last = date.fromordinal(int(self._ordinals[-1]))
            raise SimulatorError(
                field="stay_date", value=date.fromordinal(ordinal), expected=f"{date.fromordinal(self._first)}..{last}"
            )
        return i

    def _period(self, lead: float) -> int:
        t = int(np.searchsorted(-self._edges, -lead, side="right")) - 1
        return min(max(t, 0), len(self._edges) - 2)

    def _stay_cost(self, offer: Offer, h: int, r: int, lead: float, pmf: Array) -> float | None:
        """Mean over the stay's nights of each night's bid per room at its own rooms left (``None``: one night)."""
        if not self._hold or offer.stay_left is None or len(offer.stay_left) <= 1:
            return None
        values, first = self.values(h, r), offer.stay_date.toordinal() - self._first
        costs = []
        for i, left in enumerate(offer.stay_left):
            night = first + i
            if night >= values.shape[0]:
                break  # past the solved nights: the mean of those inside
            v_next = values[night, self._period(lead + i) + 1].astype(np.float64)[None, :]
            x = min(max(left, 0), v_next.shape[1] - 1)
            costs.append(float(_bid_prices(v_next, pmf, 1.0)[1][0, x]))
        return float(np.mean(costs))

    def _quote(self, offer: Offer) -> tuple[float, float]:
        m = self.market
        h, r, o = m.hotel_index(offer.hotel_id), m.room_index(offer.room_type), offer.stay_date.toordinal()
        ts = offer.at.timestamp()
        lead = (m.checkin_ts(o) - ts) / _DAY_S
        t = self._period(lead)
        v_next = self.values(h, r)[self._night(o), t + 1].astype(np.float64)
        j = self._index[(m.segment_index(offer.segment), offer.channel)]
        cl = self._classes
        a = float(self._intercepts(h, r, o, np.array([lead]), np.array([ts]))[0, j])
        lo, hi = self._bounds(h, r)
        x = min(max(offer.rooms_left, 0), len(v_next) - 1)
        pmf, b = cl.rooms_pmf[j], float(cl.b[j])
        held = float(self._consume[j] / cl.keep[j])
        stay = self._stay_cost(offer, h, r, lead, pmf)
        if stay is not None:
            bid = stay * held
            return float(best_response(np.array(a), b, np.array(bid), lo=lo, hi=hi)), bid
        return quote(v_next, x, a=a, b=b, rooms_pmf=pmf, nights=float(offer.nights), lo=lo, hi=hi, held=held)

    def price(self, offer: Offer) -> float:
        """The DP price for this shopper (the oracle sees the shopper's segment, as the simulator's offer does)."""
        return self._quote(offer)[0]

    def channel_price(self, offer: Offer) -> float:
        """The DP price knowing only the channel, as a pricing request does: segments mixed by arrival share.

        Maximises ``sum_s share_s keep_s intent_s P_s(p) W_s(x) (p - bid_s(x))`` on the myopic oracle's grid,
        with the bid prices of the segment-aware values (a heuristic for the channel-only programme).
        """
        m, cl = self.market, self._classes
        h, r, o = m.hotel_index(offer.hotel_id), m.room_index(offer.room_type), offer.stay_date.toordinal()
        ts = offer.at.timestamp()
        lead = (m.checkin_ts(o) - ts) / _DAY_S
        t = min(max(int(np.searchsorted(-self._edges, -lead, side="right")) - 1, 0), len(self._edges) - 2)
        v_next = self.values(h, r)[self._night(o), t + 1].astype(np.float64)[None, :]
        x = min(max(offer.rooms_left, 0), v_next.shape[1] - 1)
        a = self._intercepts(h, r, o, np.array([lead]), np.array([ts]))[0]
        mix = m.segment_mix(h, r, o, ts, offer.channel)
        lo, hi = self._bounds(h, r)
        grid = np.exp(np.linspace(np.log(lo), np.log(hi), _CHANNEL_GRID))
        total = np.zeros_like(grid)
        for j, (s, c) in enumerate(zip(cl.segment, cl.channel, strict=True)):
            if c != offer.channel or mix[s] <= 0.0:
                continue
            weight, cost = _bid_prices(v_next, cl.rooms_pmf[j], float(offer.nights))
            stay = self._stay_cost(offer, h, r, lead, cl.rooms_pmf[j])
            unit = cost[0, x] if stay is None else stay
            sig = 1.0 / (1.0 + np.exp(np.clip(cl.b[j] * np.log(grid) - a[j], -700.0, 700.0)))
            total += mix[s] * cl.keep[j] * cl.intent[j] * sig * weight[x] * (grid - unit)
        return float(grid[int(np.argmax(total))])

    def bid_price(self, offer: Offer) -> float:
        """The opportunity cost per room-night of selling to this shopper now."""
        return self._quote(offer)[1]

    def policy(self) -> Policy:
        """The oracle as a simulator policy (``offer -> price``)."""
        return self.price
