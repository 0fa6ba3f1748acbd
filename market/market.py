"""The ground-truth demand of a simulated hotel market: pure and deterministic.

For a hotel ``h``, room type ``r``, stay night ``d`` and time ``t`` the market knows

* how many shoppers per hour search that night (:meth:`Market.arrival_rate`):
  ``shoppers_per_room_night x capacity x season(d) x spike(d)``, split over
  segments by their share and day-of-week preference for ``d``, spread over the
  booking window by each segment's lead-time curve (a truncated exponential in
  the lead time ``checkin(d) - t``), and modulated by an intra-day cycle;
* how likely a shopper of a segment books at a price
  (:meth:`Market.booking_prob`, a logit in log price, see
  :class:`~market.config.Segment`);
* the revenue-maximising price under that truth (:meth:`Market.optimal_price`),
  the static reference price and the competitors' rates.

Everything is a function of the config and the arguments: noise comes from
hashing the key (:mod:`market._noise`), never from RNG state.

Example:
    >>> from datetime import date, datetime, timezone
    >>> m = Market(MarketConfig(hotels=3, seed=1))
    >>> at = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)
    >>> p1 = m.booking_prob("h0001", "deluxe", date(2026, 3, 20), at, 150.0, segment="leisure")
    >>> p2 = m.booking_prob("h0001", "deluxe", date(2026, 3, 20), at, 180.0, segment="leisure")
    >>> 0.0 < p2 < p1 < 1.0
    True
    >>> m.arrival_rate("h0001", "deluxe", date(2026, 3, 20), at) > 0
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, date, datetime
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from market._noise import noises, unit
from market.config import MarketConfig
from market.errors import SimulatorError, UnknownKeyError
from market.revenue import bookings_before, revenue_curve

_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_DAY_S = 86_400.0
_YEAR_DAYS = 365.25
_DIURNAL_PEAK_HOUR = 20.0  # evening shopping peak, UTC
_LAST_MINUTE_DAYS = 7.0  # e-folding time of the last-minute premium
_GRID_RANGE = (0.25, 4.0)  # default optimiser grid, as multiples of the reference price
_GRID_POINTS = 281  # ~1% steps over that range
_CACHE = 1 << 16

_SPIKE_TAG, _SPIKE_SIZE_TAG, _COMP_TAG = 17, 18, 29


def _sigmoid(x: float) -> float:
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


class Market:
    """Ground truth for one :class:`MarketConfig`. See the module docstring."""

    def __init__(self, config: MarketConfig) -> None:
        self.config = config
        cfg = config
        rng = np.random.default_rng([cfg.seed, 0x5EED])
        n = cfg.hotels
        self._price_mult = rng.lognormal(0.0, cfg.hotel_price_spread, n).tolist()
        self._size_mult = rng.uniform(cfg.hotel_size_range[0], cfg.hotel_size_range[1], n).tolist()
        self._peak_doy = rng.uniform(0.0, _YEAR_DAYS, n).tolist()
        if cfg.season_peak_doy is not None:  # drawn anyway, so the draws after it stay the same
            self._peak_doy = [cfg.season_peak_doy] * n
        self._comp_pos = rng.normal(0.0, cfg.competitor_spread, (n, cfg.competitors)).tolist()
        self._wtp_gap = rng.lognormal(0.0, cfg.reference_error, (n, len(cfg.room_types))).tolist()
        self._hotels = {h: i for i, h in enumerate(cfg.hotel_ids)}
        self._rooms = {r: i for i, r in enumerate(cfg.room_types)}
        self._segments = {s.name: i for i, s in enumerate(cfg.segments)}
        segs = cfg.segments
        self.seg_alpha = [math.log(s.accept_at_reference / (1.0 - s.accept_at_reference)) for s in segs]
        self.seg_elasticity = [s.elasticity for s in segs]
        self.seg_intent = [s.intent for s in segs]
        self.seg_premium = [s.last_minute_premium for s in segs]
        self.seg_weight = [(s.rooms[0] + s.rooms[1]) / 2.0 * s.nights_mean for s in segs]
        self.seg_lead_mean = np.array([s.lead_mean_days for s in segs])
        self.lead_norm = 1.0 - np.exp(-cfg.horizon_days / self.seg_lead_mean)
        week = [sum(s.share * s.dow_weights[d] for s in segs) for d in range(7)]
        self._dow_norm = sum(week) / 7.0
        self._capacity = [
            [max(1, round(cfg.capacities[r] * self._size_mult[h])) for r in cfg.room_types] for h in range(n)
        ]
        self._reference = [
            [round(cfg.base_prices[r] * self._price_mult[h], 2) for r in cfg.room_types] for h in range(n)
        ]
        self.night_factors = lru_cache(maxsize=_CACHE)(self._night_factors)
        self.wtp_base = lru_cache(maxsize=_CACHE)(self._wtp_base)
        self.comp_rates = lru_cache(maxsize=_CACHE)(self._comp_rates)
        self._comp_median = lru_cache(maxsize=_CACHE)(self._comp_median_uncached)

    # ----------------------------------------------------------------- keys
    def hotel_index(self, hotel_id: str) -> int:
        """Index of ``hotel_id``; raises :class:`UnknownKeyError` for a hotel the market lacks."""
        return _index(self._hotels, "hotel_id", hotel_id, f"h0000..{self.config.hotel_ids[-1]}")

    def room_index(self, room_type: str) -> int:
        """Index of ``room_type``; raises :class:`UnknownKeyError` for an unknown one."""
        return _index(self._rooms, "room_type", room_type, f"one of {list(self.config.room_types)}")

    def segment_index(self, segment: str) -> int:
        """Index of ``segment``; raises :class:`UnknownKeyError` for an unknown one."""
        return _index(self._segments, "segment", segment, f"one of {list(self._segments)}")

    def checkin_ts(self, ordinal: int) -> float:
        """Epoch seconds at which the night ``ordinal`` (a date ordinal) stops being sold."""
        return (ordinal - _EPOCH_ORDINAL) * _DAY_S + self.config.check_in_hour * 3600.0

    # ------------------------------------------------------- static by key
    def capacity(self, hotel_id: str, room_type: str) -> int:
        """Rooms of ``room_type`` that ``hotel_id`` sells per night."""
        return int(self._capacity[self.hotel_index(hotel_id)][self.room_index(room_type)])

    def capacity_at(self, h: int, r: int) -> int:
        return int(self._capacity[h][r])

    def reference_price(self, hotel_id: str, room_type: str) -> float:
        """The static baseline price: base price of the room type x the hotel's price level."""
        return float(self._reference[self.hotel_index(hotel_id)][self.room_index(room_type)])

    def reference_at(self, h: int, r: int) -> float:
        return float(self._reference[h][r])

    def season(self, h: int, ordinal: int) -> float:
        """Annual demand factor of hotel ``h`` for the night ``ordinal`` (peak day drawn per hotel)."""
        doy = date.fromordinal(ordinal).timetuple().tm_yday
        return 1.0 + self.config.season_amplitude * math.cos(2.0 * math.pi * (doy - self._peak_doy[h]) / _YEAR_DAYS)

    def spike(self, h: int, ordinal: int) -> float:
        """Demand multiplier of the night (1.0 on ordinary nights)."""
        cfg = self.config
        if unit(cfg.seed, _SPIKE_TAG, h, ordinal) >= cfg.spike_probability:
            return 1.0
        lo, hi = cfg.spike_multiplier
        return lo + (hi - lo) * unit(cfg.seed, _SPIKE_SIZE_TAG, h, ordinal)

    def spike_dates(self, hotel_id: str, first: date, last: date) -> tuple[date, ...]:
        """The spike nights of ``hotel_id`` between ``first`` and ``last`` inclusive."""
        h = self.hotel_index(hotel_id)
        return tuple(
            date.fromordinal(o) for o in range(first.toordinal(), last.toordinal() + 1) if self.spike(h, o) > 1.0
        )

    def _night_factors(self, h: int, r: int, ordinal: int) -> tuple[float, ...]:
        """Per segment, the night's expected shoppers over its whole window divided by 24 (per-hour scale)."""
        cfg = self.config
        volume = cfg.shoppers_per_room_night * self._capacity[h][r] * self.season(h, ordinal) * self.spike(h, ordinal)
        dow = date.fromordinal(ordinal).weekday()
        scale = volume / self._dow_norm / 24.0
        return tuple(scale * s.share * s.dow_weights[dow] for s in cfg.segments)

    def _wtp_base(self, h: int, r: int, ordinal: int) -> float:
        cfg = self.config
        season = self.season(h, ordinal) ** cfg.season_wtp_exponent
        level = self._reference[h][r] * self._wtp_gap[h][r]
        return float(level * season * self.spike(h, ordinal) ** cfg.spike_wtp_exponent)

    def _comp_rates(self, h: int, r: int, ordinal: int, bucket: int) -> tuple[float, ...]:
        cfg = self.config
        base = self.wtp_base(h, r, ordinal)
        draws = noises(cfg.competitors, cfg.seed, _COMP_TAG, h, r, ordinal, bucket)
        return tuple(
            round(base * math.exp(pos + cfg.competitor_noise * z), 2)
            for pos, z in zip(self._comp_pos[h], draws, strict=True)
        )

    # ------------------------------------------------------------ by time
    def lead_pdf(self, lead_days: NDArray[Any]) -> NDArray[Any]:
        """Per segment booking-window density (per day) at ``lead_days``; shape ``lead.shape + (segments,)``."""
        lead = np.asarray(lead_days, dtype=float)[..., None]
        inside = (lead > 0.0) & (lead <= self.config.horizon_days)
        dens = np.exp(-np.clip(lead, 0.0, None) / self.seg_lead_mean) / (self.seg_lead_mean * self.lead_norm)
        return np.where(inside, dens, 0.0)

    def diurnal(self, ts: float | NDArray[Any]) -> float | NDArray[Any]:
        """Intra-day activity factor at epoch seconds ``ts`` (mean 1 over a day)."""
        hour = (np.asarray(ts) % _DAY_S) / 3600.0
        out = 1.0 + self.config.diurnal_amplitude * np.cos(2.0 * np.pi * (hour - _DIURNAL_PEAK_HOUR) / 24.0)
        return float(out) if np.ndim(out) == 0 else out

    def segment_rates(self, h: int, r: int, ordinal: int, ts: float) -> NDArray[Any]:
        """Shoppers per hour by segment for one key at epoch seconds ``ts``."""
        lead = (self.checkin_ts(ordinal) - ts) / _DAY_S
        factors = np.asarray(self.night_factors(h, r, ordinal))
        return np.asarray(factors * self.lead_pdf(np.asarray(lead)) * self.diurnal(ts))

    def arrival_rate(self, hotel_id: str, room_type: str, stay_date: date, at: datetime) -> float:
        """Expected shoppers per hour searching this (hotel, room type, night) at ``at``.

        Zero once the night is no longer sold (after check-in) or before it opens
        (more than ``horizon_days`` ahead).
        """
        h, r = self.hotel_index(hotel_id), self.room_index(room_type)
        return float(self.segment_rates(h, r, stay_date.toordinal(), _ts(at)).sum())

    def segment_mix(self, h: int, r: int, ordinal: int, ts: float, channel: str | None = None) -> NDArray[Any]:
        """Share of each segment among shoppers of this key at ``ts`` (optionally given their channel)."""
        lead = (self.checkin_ts(ordinal) - ts) / _DAY_S
        lead = min(max(lead, 1e-6), float(self.config.horizon_days))  # outside the window: nearest edge
        w = np.asarray(self.night_factors(h, r, ordinal)) * self.lead_pdf(np.asarray(lead))
        if channel is not None:
            w = w * np.array([s.channels.get(channel, 0.0) for s in self.config.segments])
            if w.sum() <= 0.0:
                raise UnknownKeyError(field="channel", value=channel, expected="a channel that some segment uses")
        return np.asarray(w / w.sum())

    # ----------------------------------------------------------- demand
    def competitor_rates(self, hotel_id: str, room_type: str, stay_date: date, at: datetime) -> tuple[float, ...]:
        """Every competitor's rate for a comparable room; changes every ``competitor_refresh_hours``."""
        h, r = self.hotel_index(hotel_id), self.room_index(room_type)
        return self.comp_rates(h, r, stay_date.toordinal(), self.comp_bucket(_ts(at)))

    def competitor_rate(self, hotel_id: str, room_type: str, stay_date: date, at: datetime) -> float:
        """Median competitor rate (deterministic noise around the hotel's willingness-to-pay level)."""
        h, r = self.hotel_index(hotel_id), self.room_index(room_type)
        return self.comp_median(h, r, stay_date.toordinal(), _ts(at))

    def comp_bucket(self, ts: float) -> int:
        return int(ts // (self.config.competitor_refresh_hours * 3600))

    def comp_median(self, h: int, r: int, ordinal: int, ts: float) -> float:
        """Index-based :meth:`competitor_rate`."""
        return self._comp_median(h, r, ordinal, self.comp_bucket(ts))

    def _comp_median_uncached(self, h: int, r: int, ordinal: int, bucket: int) -> float:
        rates = sorted(self.comp_rates(h, r, ordinal, bucket))
        mid = len(rates) // 2
        return rates[mid] if len(rates) % 2 else (rates[mid - 1] + rates[mid]) / 2.0

    def prob(
        self,
        h: int,
        r: int,
        ordinal: int,
        ts: float,
        price: float,
        s: int,
        channel: str,
        comp: float,
        *,
        offset: float | None = None,
    ) -> float:
        """Index-based :meth:`booking_prob` (the generator's hot path; no validation).

        ``offset`` replaces the channel's logit offset when given.
        """
        wtp = self.wtp(h, r, ordinal, max((self.checkin_ts(ordinal) - ts) / _DAY_S, 0.0), s)
        x = (
            self.seg_alpha[s]
            + (self.config.channel_offsets[channel] if offset is None else offset)
            - self.seg_elasticity[s] * math.log(price / wtp)
            - self.config.competitor_sensitivity * math.log(price / comp)
        )
        return self.seg_intent[s] * _sigmoid(x)

    def wtp(self, h: int, r: int, ordinal: int, lead: float, s: int) -> float:
        """Segment ``s``'s willingness-to-pay level for the night at ``lead`` days: the last-minute premium on top."""
        return self.wtp_base(h, r, ordinal) * (1.0 + self.seg_premium[s] * math.exp(-lead / _LAST_MINUTE_DAYS))

    def booking_prob(
        self,
        hotel_id: str,
        room_type: str,
        stay_date: date,
        at: datetime,
        price: float,
        *,
        segment: str,
        channel: str = "web",
        competitor_rate: float | None = None,
    ) -> float:
        """Probability that a shopper of ``segment`` who sees ``price`` books (strictly decreasing in price).

        ``competitor_rate`` defaults to the market's median competitor rate at ``at``.
        """
        h, r, s = self.hotel_index(hotel_id), self.room_index(room_type), self.segment_index(segment)
        ts, ordinal = _ts(at), stay_date.toordinal()
        _check_price("price", price)
        if channel not in self.config.channel_offsets:
            raise UnknownKeyError(
                field="channel", value=channel, expected=f"one of {sorted(self.config.channel_offsets)}"
            )
        comp = self.comp_median(h, r, ordinal, ts) if competitor_rate is None else competitor_rate
        _check_price("competitor_rate", comp)
        return self.prob(h, r, ordinal, ts, float(price), s, channel, float(comp))

    def revenue_curve(
        self, h: int, r: int, ordinal: int, ts: float, prices: NDArray[Any], *, channel: str | None = None
    ) -> NDArray[Any]:
        """Expected revenue per offer view at each price, segments mixed by arrival share (and channel)."""
        return revenue_curve(self, h, r, ordinal, ts, prices, channel=channel)

    def expected_revenue(
        self,
        hotel_id: str,
        room_type: str,
        stay_date: date,
        at: datetime,
        price: float,
        *,
        channel: str | None = None,
    ) -> float:
        """Expected revenue of one offer view at ``price`` (price x booking prob x rooms x nights).

        Segments are mixed by their arrival share at ``at``; with ``channel`` given,
        by their share among shoppers of that channel, else over their channel mix.
        """
        h, r = self.hotel_index(hotel_id), self.room_index(room_type)
        _check_price("price", price)
        return float(self.revenue_curve(h, r, stay_date.toordinal(), _ts(at), np.array([price]), channel=channel)[0])

    def optimal_price(
        self,
        hotel_id: str,
        room_type: str,
        stay_date: date,
        at: datetime,
        *,
        grid: Sequence[float] | None = None,
        channel: str | None = None,
    ) -> float:
        """The price on ``grid`` that maximises :meth:`expected_revenue` under the truth.

        Myopic: it maximises revenue per offer and ignores the option value of the
        remaining inventory, so it is an upper reference per shopper, not a
        capacity-aware dynamic programme. The default grid spans 0.25x-4x the
        reference price in ~1% steps.
        """
        h, r = self.hotel_index(hotel_id), self.room_index(room_type)
        return self.optimal_at(h, r, stay_date.toordinal(), _ts(at), grid=grid, channel=channel)

    def optimal_at(
        self,
        h: int,
        r: int,
        ordinal: int,
        ts: float,
        *,
        grid: Sequence[float] | None = None,
        channel: str | None = None,
    ) -> float:
        if grid is None:
            lo, hi = _GRID_RANGE
            prices = self._reference[h][r] * np.exp(np.linspace(math.log(lo), math.log(hi), _GRID_POINTS))
        else:
            prices = np.asarray(grid, dtype=float)
            if prices.size == 0 or not np.all(np.isfinite(prices)) or np.any(prices <= 0):
                raise SimulatorError(
                    field="grid", value=list(grid)[:5], expected="a non-empty sequence of finite positive prices"
                )
        curve = self.revenue_curve(h, r, ordinal, ts, prices, channel=channel)
        return float(prices[int(np.argmax(curve))])

    def expected_bookings_before(self, h: int, r: int, ordinal: int, ts: float) -> float:
        """Rooms expected to be booked for the night before ``ts``, at the reference price (for warm starts).

        Net of cancellations when ``config.warm_start_net``; with ``ts`` just before check-in, the rooms a
        night holds at check-in under the static price, before capacity (``calibration`` reads occupancy so).
        """
        return bookings_before(self, h, r, ordinal, ts)


def _ts(at: datetime) -> float:
    if not isinstance(at, datetime) or at.tzinfo is None:
        raise SimulatorError(field="at", value=at, expected="a timezone-aware datetime")
    return at.astimezone(UTC).timestamp()


def _check_price(field: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise SimulatorError(field=field, value=value, expected="a finite positive price")


def _index(table: dict[str, int], field: str, key: str, expected: str) -> int:
    try:
        return table[key]
    except KeyError:
        raise UnknownKeyError(field=field, value=key, expected=expected) from None
