"""Configuration of a simulated hotel market (data, validated at construction).

A :class:`MarketConfig` fixes everything about a market: the hotels (ids
``h0000``, ``h0001``, ...), the room types with their capacities and base
prices, the guest segments with their own price elasticity, booking window and
cancellation rate, the competitors and the demand spikes. Hotel-specific
details (price level, size, peak season, competitor positioning) are drawn from
``seed``, so two configs that compare equal describe the same market.

Example:
    >>> cfg = MarketConfig(hotels=2, seed=7)
    >>> cfg.hotel_ids
    ('h0000', 'h0001')
    >>> cfg.segment("business").elasticity
    1.6
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from events.models import CHANNELS
from market.errors import SimulatorError, UnknownKeyError

_MONDAY_FIRST = 7


class Segment(BaseModel):
    """One guest segment: how many come, when, how price-sensitive, how loyal.

    Booking probability of a shopper of this segment who sees price ``p``::

        intent * sigmoid(logit(accept_at_reference) + channel_offset
                         - elasticity * log(p / wtp) - competitor_sensitivity * log(p / competitor_rate))

    where ``wtp`` is the hotel's reference price scaled by season, spikes and the
    segment's last-minute premium. Revenue per shopper peaks where the sigmoid
    equals ``1 - 1/(elasticity + competitor_sensitivity)``, so the ratio of that
    to ``accept_at_reference`` says whether the reference price is too low or too high
    for this segment.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=32)
    share: float = Field(gt=0.0, description="relative arrival volume")
    elasticity: float = Field(gt=0.0, allow_inf_nan=False, description="slope of the logit in log price")
    accept_at_reference: float = Field(gt=0.0, lt=1.0, description="sigmoid term at the willingness-to-pay price")
    intent: float = Field(gt=0.0, le=1.0, description="share of shoppers that would book at some price")
    lead_mean_days: float = Field(gt=0.0, description="mean of the (truncated exponential) booking window")
    last_minute_premium: float = Field(default=0.0, gt=-0.9, description="wtp x (1 + this * exp(-lead/7d))")
    cancel_rate: float = Field(ge=0.0, lt=1.0)
    rooms: tuple[int, int] = (1, 1)
    nights_mean: float = Field(default=1.5, ge=1.0)
    dow_weights: tuple[float, ...] = (1.0,) * _MONDAY_FIRST
    channels: dict[str, float] = Field(default_factory=lambda: {"web": 1.0})

    @field_validator("dow_weights")
    @classmethod
    def _seven_days(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if len(value) != _MONDAY_FIRST or any(w < 0 for w in value) or sum(value) <= 0:
            msg = "seven non-negative weights, Monday first, not all zero"
            raise ValueError(msg)
        return value

    @field_validator("channels")
    @classmethod
    def _known_channels(cls, value: dict[str, float]) -> dict[str, float]:
        bad = sorted(set(value) - set(CHANNELS))
        if bad or not value or any(w < 0 for w in value.values()) or sum(value.values()) <= 0:
            msg = f"non-negative weights over channels {list(CHANNELS)}, got unknown {bad}"
            raise ValueError(msg)
        return value

    @field_validator("rooms")
    @classmethod
    def _room_range(cls, value: tuple[int, int]) -> tuple[int, int]:
        if not 1 <= value[0] <= value[1] <= 20:
            msg = "(min, max) rooms with 1 <= min <= max <= 20"
            raise ValueError(msg)
        return value


def default_segments() -> tuple[Segment, ...]:
    """Leisure (price-sensitive, weekends, books early), business (insensitive, weekdays, late), group."""
    return (
        Segment(
            name="leisure",
            share=0.6,
            elasticity=2.6,
            accept_at_reference=0.62,
            intent=0.26,
            lead_mean_days=28.0,
            last_minute_premium=-0.08,
            cancel_rate=0.15,
            nights_mean=2.2,
            dow_weights=(0.8, 0.75, 0.8, 0.95, 1.35, 1.5, 0.85),
            channels={"web": 0.45, "mobile": 0.25, "ota": 0.25, "direct": 0.05},
        ),
        Segment(
            name="business",
            share=0.3,
            elasticity=1.6,
            accept_at_reference=0.6,
            intent=0.3,
            lead_mean_days=6.0,
            last_minute_premium=0.25,
            cancel_rate=0.1,
            nights_mean=1.4,
            dow_weights=(1.35, 1.45, 1.45, 1.25, 0.6, 0.3, 0.6),
            channels={"corporate": 0.4, "gds": 0.25, "web": 0.2, "mobile": 0.15},
        ),
        Segment(
            name="group",
            share=0.1,
            elasticity=3.5,
            accept_at_reference=0.65,
            intent=0.2,
            lead_mean_days=55.0,
            last_minute_premium=0.0,
            cancel_rate=0.25,
            rooms=(2, 5),
            nights_mean=2.5,
            channels={"direct": 0.6, "ota": 0.2, "web": 0.2},
        ),
    )


class MarketConfig(BaseModel):
    """Everything that defines a simulated market.

    Attributes:
        hotels: number of hotels, ids ``h0000`` ... zero-padded to four digits.
        seed: drives every hotel-specific draw and the spike calendar.
        start: default start of a simulation (aware, UTC).
        horizon_days: stay dates are sold this many days ahead.
        capacities: rooms per room type for a hotel of average size.
        base_prices: reference nightly price per room type for an average hotel.
        hotel_price_spread: sigma of the lognormal hotel price multiplier.
        hotel_size_range: hotel size multiplier range (applied to capacities).
        reference_error: sigma of the lognormal gap between a hotel's true willingness-to-pay
            level per room type and its reference price (the static price is an informed guess).
        shoppers_per_room_night: searches a stay night attracts over its booking
            window, per room of capacity, before season and spikes.
        view_prob: share of searches that look at an offer (emit a view).
        season_amplitude: annual swing of demand (``1 +- amplitude``).
        season_wtp_exponent: how much of the seasonal swing reaches willingness to pay.
        season_peak_doy: day of the year of every hotel's peak season (``None``: drawn per hotel).
        diurnal_amplitude: intra-day swing of shopping activity (peak in the evening UTC).
        spike_probability: chance that a given night is a demand spike for a hotel.
        spike_multiplier: (min, max) demand multiplier on spike nights.
        spike_wtp_exponent: how much of a spike reaches willingness to pay.
        competitors: competitors per hotel.
        competitor_noise: sigma of a competitor's log rate around its position.
        competitor_spread: sigma of competitors' log positioning vs the hotel.
        competitor_sensitivity: extra logit slope in ``log(price / competitor rate)``.
        competitor_refresh_hours: competitor rates change every this many hours.
        competitor_updates_per_day: competitor rate events per stay key per day.
        inventory_snapshot_hours: a key's inventory is re-emitted this often (0: never).
        channel_offsets: logit offset per channel.
        check_in_hour: UTC hour on the stay date after which the night is no longer sold.
        segments: the guest segments.
        stays_hold_nights: a booking of ``n`` nights holds a room on each of the ``n`` nights from its
            check-in (and a cancellation frees them all), as in a real hotel. ``False`` (the ``flat``
            market, kept for the existing tests): it holds a room of its check-in night only.
        warm_start_net: the warm start (nights already open when a simulation starts) holds only the
            bookings that will check in, each segment's cancellation rate taken out: its bookings carry no
            scheduled cancellation, so counting them gross would sell the rooms those cancellations free.
            ``False`` (``flat``): gross, as before.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    hotels: int = Field(default=10, ge=1, le=10_000)
    room_types: tuple[str, ...] = ("standard", "deluxe", "suite")
    seed: int = 0
    start: datetime = datetime(2026, 1, 1, tzinfo=UTC)
    horizon_days: int = Field(default=120, ge=1, le=730)
    capacities: dict[str, int] = Field(default_factory=lambda: {"standard": 40, "deluxe": 15, "suite": 5})
    base_prices: dict[str, float] = Field(default_factory=lambda: {"standard": 120.0, "deluxe": 190.0, "suite": 340.0})
    hotel_price_spread: float = Field(default=0.25, ge=0.0, le=2.0)
    hotel_size_range: tuple[float, float] = (0.6, 1.6)
    reference_error: float = Field(default=0.12, ge=0.0, le=2.0)
    shoppers_per_room_night: float = Field(default=4.3, gt=0.0)
    view_prob: float = Field(default=0.85, gt=0.0, le=1.0)
    season_amplitude: float = Field(default=0.25, ge=0.0, lt=1.0)
    season_wtp_exponent: float = Field(default=0.6, ge=0.0)
    season_peak_doy: float | None = Field(default=None, ge=0.0, le=366.0)
    diurnal_amplitude: float = Field(default=0.4, ge=0.0, lt=1.0)
    spike_probability: float = Field(default=0.03, ge=0.0, le=1.0)
    spike_multiplier: tuple[float, float] = (1.6, 3.0)
    spike_wtp_exponent: float = Field(default=0.45, ge=0.0)
    competitors: int = Field(default=3, ge=1, le=50)
    competitor_noise: float = Field(default=0.06, ge=0.0)
    competitor_spread: float = Field(default=0.08, ge=0.0)
    competitor_sensitivity: float = Field(default=0.8, ge=0.0)
    competitor_refresh_hours: int = Field(default=6, ge=1, le=24 * 7)
    competitor_updates_per_day: float = Field(default=1.5, ge=0.0)
    inventory_snapshot_hours: int = Field(default=24, ge=0, le=24 * 7)
    channel_offsets: dict[str, float] = Field(
        default_factory=lambda: {"web": 0.0, "mobile": -0.1, "ota": -0.25, "gds": 0.1, "direct": 0.2, "corporate": 0.3}
    )
    check_in_hour: int = Field(default=15, ge=0, le=23)
    segments: tuple[Segment, ...] = Field(default_factory=default_segments)
    stays_hold_nights: bool = False
    warm_start_net: bool = False

    @field_validator("start")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            msg = "a timezone-aware datetime"
            raise ValueError(msg)
        return value.astimezone(UTC)

    @model_validator(mode="after")
    def _consistent(self) -> MarketConfig:
        for name in ("capacities", "base_prices"):
            table: dict[str, Any] = getattr(self, name)
            if set(table) != set(self.room_types):
                raise SimulatorError(
                    field=name, value=sorted(table), expected=f"exactly the room types {list(self.room_types)}"
                )
            if any(not v > 0 for v in table.values()):
                raise SimulatorError(field=name, value=table, expected="positive values")
        if len({s.name for s in self.segments}) != len(self.segments) or not self.segments:
            raise SimulatorError(
                field="segments", value=[s.name for s in self.segments], expected="at least one, with distinct names"
            )
        if set(self.channel_offsets) != set(CHANNELS):
            raise SimulatorError(
                field="channel_offsets", value=sorted(self.channel_offsets), expected=f"exactly {list(CHANNELS)}"
            )
        lo, hi = self.spike_multiplier
        if not 1.0 <= lo <= hi:
            raise SimulatorError(
                field="spike_multiplier", value=self.spike_multiplier, expected="(min, max) with 1 <= min <= max"
            )
        if not 0.0 < self.hotel_size_range[0] <= self.hotel_size_range[1]:
            raise SimulatorError(
                field="hotel_size_range", value=self.hotel_size_range, expected="(min, max) with 0 < min <= max"
            )
        return self

    @property
    def hotel_ids(self) -> tuple[str, ...]:
        """Hotel ids, ``h0000`` first."""
        return tuple(hotel_id(i) for i in range(self.hotels))

    @property
    def mean_nights(self) -> float:
        """Mean stay of a shopper, segments weighted by their share.

        Example:
            >>> round(MarketConfig().mean_nights, 2)
            1.99
        """
        total = sum(s.share for s in self.segments)
        return sum(s.share * s.nights_mean for s in self.segments) / total

    @property
    def segment_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.segments)

    def segment(self, name: str) -> Segment:
        """The segment called ``name``.

        Raises:
            UnknownKeyError: if there is none.
        """
        for seg in self.segments:
            if seg.name == name:
                return seg
        raise UnknownKeyError(field="segment", value=name, expected=f"one of {list(self.segment_names)}")


def hotel_id(index: int) -> str:
    """Hotel id of the ``index``-th hotel.

    Example:
        >>> hotel_id(42)
        'h0042'
    """
    return f"h{index:04d}"
