"""The scope of a request in a rule set: the bounds, base rate and rules of its (hotel, room type, channel).

Split from :mod:`pricing.rules`: everything here depends only on the rule file and the scope, never on
the request's night or features, so :class:`pricing.rules.RuleSet` resolves it once per scope and caches
it. :func:`check_bounds` proves at load time that every scope the file can tell apart has a floor at or
below its ceiling.

Example:
    >>> spec = RuleSetSpec.model_validate({"min_price": 10, "max_price": 500, "default_base_rate": 90,
    ...     "rules": [{"id": "f", "kind": "floor", "hotel": "h1", "price": 50},
    ...               {"id": "c", "kind": "ceiling", "price": 300}]})
    >>> scope = resolve_scope(spec, "h1", "std", "web")
    >>> scope.floor, scope.ceiling, scope.bound_ids, resolve_scope(spec, "h2", "std", "web").floor
    (50.0, 300.0, ('f', 'c'), 10.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from pricing.errors import RuleSetError
from pricing.rule_schema import (
    AnyRule,
    CeilingRule,
    ChannelParityRule,
    ClosedDatesRule,
    FloorRule,
    LastMinuteRule,
    LastRoomsRule,
    MaxChangeRule,
    RuleSetSpec,
    matches,
    specificity,
)

R = TypeVar("R", bound=AnyRule)


@dataclass(frozen=True, slots=True)
class Scope:
    """Everything that depends only on (hotel, room type, channel), resolved once."""

    floor: float
    ceiling: float
    bound_ids: tuple[str, ...]
    base_rate: float
    closed: tuple[ClosedDatesRule, ...]
    last_rooms: LastRoomsRule | None
    last_minute: LastMinuteRule | None
    parity: ChannelParityRule | None
    max_change: MaxChangeRule | None


def resolve_scope(spec: RuleSetSpec, hotel: str, room_type: str, channel: str) -> Scope:
    """Bounds, base rate and the rules of each kind that apply to (hotel, room type, channel)."""
    hits = [r for r in spec.rules if matches(r, hotel, room_type, channel)]
    floor, floor_ids = best_bound([r for r in hits if isinstance(r, FloorRule)], highest=True)
    ceiling, ceiling_ids = best_bound([r for r in hits if isinstance(r, CeilingRule)], highest=False)
    floor = max(spec.min_price, floor if floor is not None else spec.min_price)
    ceiling = min(spec.max_price, ceiling if ceiling is not None else spec.max_price)
    # check_bounds proves floor <= ceiling for every scope the file names; this guards the rest.
    floor = min(floor, ceiling)
    rates = [b for b in spec.base_rates if matches(b, hotel, room_type, channel)]
    base = max(rates, key=specificity).rate if rates else spec.base_rate

    def one(kind: type[R]) -> R | None:
        chosen = [r for r in hits if isinstance(r, kind)]
        return max(chosen, key=specificity) if chosen else None  # max keeps the first of equals

    return Scope(
        floor=floor,
        ceiling=ceiling,
        bound_ids=floor_ids + ceiling_ids,
        base_rate=base,
        closed=tuple(r for r in hits if isinstance(r, ClosedDatesRule)),
        last_rooms=one(LastRoomsRule),
        last_minute=one(LastMinuteRule),
        parity=one(ChannelParityRule),
        max_change=one(MaxChangeRule),
    )


def named_scopes(spec: RuleSetSpec) -> list[tuple[str, str, str]]:
    """Every (hotel, room type, channel) the file names literally, plus a catch-all."""
    hotels = {r.hotel for r in spec.rules} | {b.hotel for b in spec.base_rates} | {"\x00other"}
    rooms = {r.room_type for r in spec.rules} | {b.room_type for b in spec.base_rates} | {"\x00other"}
    channels = {c for r in spec.rules for c in (r.channels or ())} | {"\x00other"}
    return [(h, r, c) for h in sorted(hotels) for r in sorted(rooms) for c in sorted(channels)]


def best_bound(rules: Sequence[FloorRule | CeilingRule], *, highest: bool) -> tuple[float | None, tuple[str, ...]]:
    """Most specific floor/ceiling rule; among equally specific ones the most restrictive."""
    if not rules:
        return None, ()
    top = max(specificity(r) for r in rules)
    best = [r for r in rules if specificity(r) == top]
    pick = max(best, key=lambda r: r.price) if highest else min(best, key=lambda r: r.price)
    return float(pick.price), (pick.id,)


def check_bounds(spec: RuleSetSpec) -> None:
    """Global bounds ordered, unique ids, and floor <= ceiling for every scope the file can tell apart."""
    if spec.min_price >= spec.max_price:
        raise RuleSetError(
            rule_id="<ruleset>", field="max_price", value=spec.max_price, expected=f"> min_price ({spec.min_price})"
        )
    seen: set[str] = set()
    for rule in spec.rules:
        if rule.id in seen:
            raise RuleSetError(rule.id, "id", rule.id, "a rule id used once in the file")
        seen.add(rule.id)
    for hotel, room, channel in named_scopes(spec):
        hits = [r for r in spec.rules if matches(r, hotel, room, channel)]
        floor, floor_ids = best_bound([r for r in hits if isinstance(r, FloorRule)], highest=True)
        ceiling, ceil_ids = best_bound([r for r in hits if isinstance(r, CeilingRule)], highest=False)
        low = max(spec.min_price, floor or spec.min_price)
        high = min(spec.max_price, ceiling or spec.max_price)
        if low > high:
            rule_id = (floor_ids or ("<ruleset>",))[0]
            other = ceil_ids[0] if ceil_ids else "max_price"
            raise RuleSetError(rule_id, "price", low, f"<= {high} (ceiling from {other!r}) for {hotel}/{room}")
