"""Group quotes priced by displacement: what the transient guests of each night would have paid.

A group asks for rooms on several nights at once. Taking them displaces transient demand, and the
bid price of a night (:mod:`pricing.bid_price`) is the value of its marginal room: the expected
revenue that room would still earn from the shoppers to come. A group is worth taking at a rate
that pays, over its stay, at least what it displaces:

* **displaced revenue** of a night = rooms asked x the night's bid price (0 on a night that will not
  sell out: nothing is displaced), and the whole block's = the sum over its nights;
* **minimum acceptable rate** (per room-night) = displaced revenue / room-nights, never below the
  rules' floor of any of the nights;
* **recommended rate** = the minimum plus ``margin`` of it, within the rules' ceiling.

A night that has fewer rooms left than the group asks is refused in the quote (``feasible`` false),
naming the night: the hotel can split the block or move the dates.

Example:
    >>> from datetime import date
    >>> quiet = [NightValue(date(2027, 3, 1), rooms=10, bid=0.0, floor=80.0, ceiling=400.0, rooms_left=40)]
    >>> q = quote_group(quiet, margin=0.1)
    >>> (q.minimum_rate, q.recommended_rate, q.displaced_revenue, q.feasible)
    (80.0, 88.0, 0.0, True)
    >>> busy = [NightValue(date(2027, 3, 1), rooms=10, bid=150.0, floor=80.0, ceiling=400.0, rooms_left=12)]
    >>> quote_group(busy, margin=0.1).minimum_rate
    150.0
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from events.models import PricingRequest
from pricing.degraded import money, sanitize_features
from pricing.errors import QuoteError
from pricing.scorer import Scorer


@dataclass(frozen=True)
class NightValue:
    """What one night of the block is worth to the hotel.

    Attributes:
        night: the stay night.
        rooms: rooms the group asks on it.
        bid: the night's bid price per room (the value of its marginal room), 0 when it will not sell out.
        floor: the rules' floor of the night.
        ceiling: the rules' ceiling of the night.
        rooms_left: rooms still to sell (``None``: unknown, the block is taken as feasible).
    """

    night: date
    rooms: int
    bid: float
    floor: float
    ceiling: float
    rooms_left: float | None = None


@dataclass(frozen=True)
class GroupQuote:
    """The quote of a block: rates per room-night, the displacement, and whether the hotel can host it."""

    minimum_rate: float
    recommended_rate: float
    displaced_revenue: float
    room_nights: int
    feasible: bool
    short_nights: tuple[date, ...]


def quote_group(nights: Sequence[NightValue], *, margin: float = 0.1, decimals: int = 2) -> GroupQuote:
    """The displacement quote of ``nights`` (see the module docstring).

    Raises:
        QuoteError: no nights, rooms under 1, a non-finite or negative bid, or a negative margin.
    """
    _check(nights, margin)
    room_nights = sum(n.rooms for n in nights)
    displaced = sum(n.rooms * n.bid for n in nights)
    floor = max(n.floor for n in nights)
    ceiling = min(n.ceiling for n in nights)
    minimum = max(displaced / room_nights, floor)
    recommended = min(minimum * (1.0 + margin), max(ceiling, minimum))
    short = tuple(n.night for n in nights if n.rooms_left is not None and n.rooms > n.rooms_left)
    return GroupQuote(
        minimum_rate=money(minimum, decimals),
        recommended_rate=money(max(recommended, minimum), decimals),
        displaced_revenue=money(displaced, decimals),
        room_nights=room_nights,
        feasible=not short,
        short_nights=short,
    )


def _check(nights: Sequence[NightValue], margin: float) -> None:
    if not nights:
        raise QuoteError(field="nights", value=[], expected="at least one night")
    if not math.isfinite(margin) or margin < 0:
        raise QuoteError(field="margin", value=margin, expected="a finite number >= 0")
    for n in nights:
        if n.rooms < 1:
            raise QuoteError(field=f"nights[{n.night}].rooms", value=n.rooms, expected="at least 1 room")
        if not math.isfinite(n.bid) or n.bid < 0:
            raise QuoteError(field=f"nights[{n.night}].bid", value=n.bid, expected="a finite bid price >= 0")


class GroupQuoter:
    """Values each night of a block with the serving scorer, then quotes it by displacement.

    Each night is priced as a one-night request of the hotel and room type: the decision carries the
    night's bid price and the features it saw (``rooms_left``), the rules give its floor and ceiling.

    Args:
        scorer: the incumbent :class:`~pricing.scorer.Scorer` (its rules and features).
        margin: the recommended rate's share above the minimum (``PRICESTREAM_GROUP_MARGIN``).
    """

    def __init__(self, scorer: Scorer, *, margin: float = 0.1) -> None:
        self.scorer = scorer
        self.margin = margin

    def night(self, request: PricingRequest, rooms: int) -> NightValue:
        """The value of ``rooms`` on ``request``'s night."""
        decision = self.scorer.price(request)
        outcome = self.scorer.rules.evaluate(request, sanitize_features(decision.features))
        left = decision.features.get("rooms_left")
        return NightValue(request.stay_date, rooms=rooms, bid=float(decision.bid_price or 0.0),
                          floor=outcome.floor, ceiling=outcome.ceiling,
                          rooms_left=None if left is None or not math.isfinite(left) else float(left))

    def quote(self, requests: Sequence[tuple[PricingRequest, int]]) -> tuple[GroupQuote, list[NightValue]]:
        """The quote of the block (one request and room count per night) and each night's value."""
        nights = [self.night(request, rooms) for request, rooms in requests]
        return quote_group(nights, margin=self.margin, decimals=self.scorer.config.price_decimals), nights
