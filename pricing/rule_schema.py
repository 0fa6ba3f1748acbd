"""The rule file schema: frozen pydantic models, one per rule ``kind``.

Split from :mod:`pricing.rules` so that the engine module stays small. Every
rule carries an ``id`` and a scope (``hotel``, ``room_type`` as fnmatch
patterns, ``*`` by default; ``channels``: ``None`` means every channel).

Example:
    >>> spec = RuleSetSpec.model_validate({"min_price": 10, "max_price": 500, "default_base_rate": 90,
    ...     "rules": [{"id": "f", "kind": "floor", "hotel": "h1", "price": 50}]})
    >>> spec.rules[0].kind, specificity(spec.rules[0]), matches(spec.rules[0], "h1", "std", "web")
    ('floor', 2, True)
"""

from __future__ import annotations

from datetime import date
from fnmatch import fnmatchcase
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from events.models import Channel

PositivePrice = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Factor = Annotated[float, Field(gt=0, allow_inf_nan=False)]
_WILDCARD_CHARS = frozenset("*?[")


def _is_literal(pattern: str) -> bool:
    return not (_WILDCARD_CHARS & set(pattern))


class _Scoped(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    hotel: str = Field(default="*", min_length=1)
    room_type: str = Field(default="*", min_length=1)
    channels: tuple[Channel, ...] | None = None


class _Rule(_Scoped):
    id: str = Field(min_length=1, max_length=80)
    description: str = ""


class FloorRule(_Rule):
    """No price below ``price`` in scope."""

    kind: Literal["floor"]
    price: PositivePrice


class CeilingRule(_Rule):
    """No price above ``price`` in scope."""

    kind: Literal["ceiling"]
    price: PositivePrice


class DateRange(BaseModel):
    """Inclusive range of stay nights."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    start: date
    end: date

    @model_validator(mode="after")
    def _ordered(self) -> DateRange:
        if self.end < self.start:
            msg = f"end >= start ({self.start})"
            raise ValueError(msg)
        return self


class ClosedDatesRule(_Rule):
    """Closed stay nights: decided outright at the ceiling."""

    kind: Literal["closed_dates"]
    dates: tuple[date, ...] = ()
    ranges: tuple[DateRange, ...] = ()

    @model_validator(mode="after")
    def _some(self) -> ClosedDatesRule:
        if not self.dates and not self.ranges:
            msg = "at least one entry in dates or ranges"
            raise ValueError(msg)
        return self

    def covers(self, stay: date) -> bool:
        """True when ``stay`` is a closed night."""
        return stay in self.dates or any(r.start <= stay <= r.end for r in self.ranges)


class LastRoomsRule(_Rule):
    """``rooms_left <= rooms_left_at_most``: decide at ceiling or premium, or refuse discounts."""

    kind: Literal["last_rooms"]
    rooms_left_at_most: int = Field(ge=0)
    action: Literal["ceiling", "premium", "no_discount"] = "ceiling"
    premium: float = Field(default=1.2, ge=1.0, allow_inf_nan=False)


class LastMinuteRule(_Rule):
    """Short lead time and low occupancy: discount the rules price by ``factor``."""

    kind: Literal["last_minute"]
    lead_time_at_most_days: int = Field(ge=0)
    occupancy_below: float = Field(gt=0.0, le=1.0)
    factor: float = Field(gt=0.0, le=1.0)
    decide: bool = False


class ChannelParityRule(_Rule):
    """On ``channels`` (default ota, gds) price = direct price x factor, within +/- max_spread.

    ``mode: not_below``: the price is not below the direct price x factor (the floor rises to it and the
    ceiling stays), so a capacity-aware model may still price a scarce night above it.
    """

    kind: Literal["channel_parity"]
    channels: tuple[Channel, ...] | None = ("ota", "gds")
    factor: Factor = 1.0
    max_spread: float = Field(default=0.0, ge=0.0, lt=1.0)
    mode: Literal["band", "not_below"] = "band"


class MaxChangeRule(_Rule):
    """At most +/- ``max_pct`` (a fraction) away from the last published price."""

    kind: Literal["max_change"]
    max_pct: float = Field(gt=0.0, le=1.0)


AnyRule = Annotated[
    FloorRule | CeilingRule | ClosedDatesRule | LastRoomsRule | LastMinuteRule | ChannelParityRule | MaxChangeRule,
    Field(discriminator="kind"),
]


class BaseRate(_Scoped):
    """Base nightly rate for a scope (the most specific match wins)."""

    rate: PositivePrice


class OccupancyStep(BaseModel):
    """From ``occupancy_at_least`` upwards, multiply by ``factor`` (highest matching step wins)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    occupancy_at_least: float = Field(ge=0.0, le=1.0)
    factor: Factor


class LeadTimeStep(BaseModel):
    """Up to ``lead_time_at_most_days``, multiply by ``factor`` (the tightest matching step wins)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    lead_time_at_most_days: int = Field(ge=0)
    factor: Factor


class RuleSetSpec(BaseModel):
    """A whole rule file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: Literal[1] = 1
    currency: str = "EUR"
    min_price: PositivePrice
    max_price: PositivePrice
    default_base_rate: PositivePrice | None = None
    """Base rate where no ``base_rates`` entry matches; ``None``: geometric mean of min and max price."""
    base_rates: tuple[BaseRate, ...] = ()
    occupancy_ladder: tuple[OccupancyStep, ...] = ()
    lead_time_ladder: tuple[LeadTimeStep, ...] = ()
    rules: tuple[AnyRule, ...] = ()

    @property
    def base_rate(self) -> float:
        """The default base rate, resolved."""
        if self.default_base_rate is not None:
            return self.default_base_rate
        return float((self.min_price * self.max_price) ** 0.5)


def matches(item: _Scoped, hotel: str, room_type: str, channel: str | None) -> bool:
    """Does the scope of ``item`` cover this request? ``channel=None`` means any channel."""
    if channel is not None and item.channels is not None and channel not in item.channels:
        return False
    return fnmatchcase(hotel, item.hotel) and fnmatchcase(room_type, item.room_type)


def specificity(item: _Scoped) -> int:
    """Literal hotel counts 2, literal room type 1, an explicit channel list 1."""
    return 2 * _is_literal(item.hotel) + _is_literal(item.room_type) + (item.channels is not None)
