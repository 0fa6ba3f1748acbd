"""Declarative pricing rules: bounds, outright decisions and the rules-only price.

A rule set is a YAML file (see ``pricing/rules/default.yaml``) with global bounds
``min_price``/``max_price``, base rates per hotel and room type, occupancy and
lead-time ladders, and a list of rules, each with an ``id`` and a ``kind``:

``floor`` / ``ceiling``
    hard bounds per hotel/room type/channel (``*`` wildcards, fnmatch syntax).
``closed_dates``
    decides outright: a closed night is quoted at the ceiling (never refused,
    so the scorer always has a finite price) and ``RuleOutcome.closed`` is set.
``last_rooms``
    ``rooms_left <= N``: ``action: ceiling`` decides at the ceiling,
    ``premium`` decides at ``rule price x premium``, ``no_discount`` raises the
    floor to the undiscounted rules price (and blocks last-minute discounts).
``last_minute``
    ``lead time <= N days`` and ``occupancy < X``: the rules price is multiplied
    by ``factor``; with ``decide: true`` that price is final.
``channel_parity``
    for the listed channels the price is the direct price x ``factor``, and the
    model may move at most ``max_spread`` (a fraction) away from it; with
    ``mode: not_below`` the price is only kept from going below it.
``max_change``
    the price stays within +/- ``max_pct`` of ``request.last_published_price``.

Precedence: global bounds, then floor/ceiling rules (the most specific match
wins; ties go to the most restrictive), then closed dates, outright
decisions, then the narrowing constraints (parity, max change). A constraint
band that misses the current bounds collapses to the nearest bound, so hard
bounds always win. Whenever the bounds collapse to one point the outcome is
decided. Missing features (``None`` or NaN) make the rules that need them not fire.

Example:
    >>> from datetime import date, datetime, timezone
    >>> from events.models import PricingRequest
    >>> rules = RuleSet.from_yaml('''
    ... min_price: 20
    ... max_price: 1000
    ... default_base_rate: 100
    ... rules:
    ...   - {id: floor-all, kind: floor, price: 60}
    ...   - {id: ceil-all, kind: ceiling, price: 400}
    ... ''')
    >>> req = PricingRequest(hotel_id="h1", room_type="std", stay_date=date(2026, 12, 24),
    ...                      event_time=datetime(2026, 12, 1, tzinfo=timezone.utc))
    >>> out = rules.evaluate(req, {"occupancy": 0.5})
    >>> (out.floor, out.ceiling, out.rule_price, out.decided_price, out.fired)
    (60.0, 400.0, 100.0, None, ('floor-all', 'ceil-all'))
    >>> out.clamp(10_000.0)
    400.0
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from events.models import PricingRequest
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

_CACHE_LIMIT = 4096
"""Resolved scopes kept per rule set; (hotel, room, channel) combinations are few."""


@dataclass(frozen=True, slots=True)
class RuleOutcome:
    """What the rules say about one request.

    Attributes:
        decided_price: the final price when a rule settled it outright, else ``None``.
        floor: lowest allowed price (finite, > 0).
        ceiling: highest allowed price (finite, >= floor).
        fired: ids of the rules (and ladders) that applied, in evaluation order.
        rule_price: the rules-only price, inside ``[floor, ceiling]``.
        closed: the stay night is closed (quoted at the ceiling).
        base_rate: the base rate of the request's (hotel, room type, channel) before ladders and rules,
            the room's reference price level (a model input: price relative to it).
    """

    decided_price: float | None
    floor: float
    ceiling: float
    fired: tuple[str, ...]
    rule_price: float
    closed: bool = False
    base_rate: float | None = None

    def clamp(self, price: float) -> float:
        """``price`` forced into ``[floor, ceiling]``; a non-finite price becomes ``rule_price``."""
        if not math.isfinite(price):
            return self.rule_price
        return min(max(price, self.floor), self.ceiling)


@dataclass(frozen=True, slots=True)
class _Scope:
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


def _num(features: Mapping[str, float | None], name: str) -> float | None:
    value = features.get(name)
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def lead_time_days(request: PricingRequest) -> int:
    """Whole days from the request (UTC date) to arrival, never negative.

    Example:
        >>> from datetime import date, datetime, timezone
        >>> lead_time_days(PricingRequest(hotel_id="h", room_type="r", stay_date=date(2026, 1, 10),
        ...                event_time=datetime(2026, 1, 3, 23, tzinfo=timezone.utc)))
        7
    """
    return max((request.stay_date - request.request_time.date()).days, 0)


def _narrow(floor: float, ceiling: float, low: float, high: float) -> tuple[float, float]:
    """Intersect ``[floor, ceiling]`` with ``[low, high]``; a disjoint band collapses to the nearest bound."""
    if high < floor:
        return floor, floor
    if low > ceiling:
        return ceiling, ceiling
    return max(floor, low), min(ceiling, high)


class RuleSet:
    """A validated rule set; :meth:`evaluate` is pure and cheap (scopes are cached).

    Args:
        spec: the parsed, validated rule file.
    """

    def __init__(self, spec: RuleSetSpec) -> None:
        self._spec = spec
        self._occupancy = sorted(spec.occupancy_ladder, key=lambda s: s.occupancy_at_least)
        self._lead = sorted(spec.lead_time_ladder, key=lambda s: s.lead_time_at_most_days)
        self._cache: dict[tuple[str, str, str], _Scope] = {}
        _check_bounds(self)

    @property
    def spec(self) -> RuleSetSpec:
        """The validated rule file."""
        return self._spec

    @classmethod
    def from_yaml(cls, text: str) -> RuleSet:
        """Parse and validate a rule set from YAML text.

        Raises:
            RuleSetError: naming the rule id, field, value and expectation.
        """
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            first_line = str(exc).splitlines()[0]
            raise RuleSetError(rule_id="<ruleset>", field="<yaml>", value=first_line, expected="valid YAML") from exc
        if not isinstance(raw, dict):
            kind = type(raw).__name__
            raise RuleSetError(rule_id="<ruleset>", field="<root>", value=kind, expected="a mapping at the top level")
        try:
            spec = RuleSetSpec.model_validate(raw)
        except ValidationError as exc:
            raise _translate(exc, raw) from exc
        return cls(spec)

    @classmethod
    def load(cls, path: str | Path) -> RuleSet:
        """Read, parse and validate a rule file.

        Raises:
            RuleSetError: if the file is missing or invalid.
        """
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            expected = "a readable YAML file"
            raise RuleSetError(rule_id="<ruleset>", field="path", value=str(path), expected=expected) from exc
        return cls.from_yaml(text)

    def evaluate(self, request: PricingRequest, features: Mapping[str, float | None]) -> RuleOutcome:
        """Apply the rules to one request.

        Returns:
            A :class:`RuleOutcome` whose prices are finite, > 0 and inside its bounds.
        """
        scope = self._scope(request.hotel_id, request.room_type, request.channel)
        fired = list(scope.bound_ids)
        floor, ceiling = scope.floor, scope.ceiling
        for rule in scope.closed:
            if rule.covers(request.stay_date):
                fired.append(rule.id)
                return RuleOutcome(
                    ceiling, ceiling, ceiling, tuple(fired), ceiling, closed=True, base_rate=scope.base_rate
                )
        occupancy = _num(features, "occupancy")
        lead = lead_time_days(request)
        price = scope.base_rate * self._ladders(occupancy, lead, fired)
        direct = min(max(price, floor), ceiling)
        decided: float | None = None
        no_discount = False
        rooms_left = _num(features, "rooms_left")
        rule_lr = scope.last_rooms
        if rule_lr is not None and rooms_left is not None and rooms_left <= rule_lr.rooms_left_at_most:
            fired.append(rule_lr.id)
            if rule_lr.action == "ceiling":
                decided = ceiling
            elif rule_lr.action == "premium":
                decided = min(max(direct * rule_lr.premium, floor), ceiling)
            else:
                no_discount = True
                floor = direct
        rule_lm = scope.last_minute
        if (
            rule_lm is not None
            and not no_discount
            and occupancy is not None
            and lead <= rule_lm.lead_time_at_most_days
            and occupancy < rule_lm.occupancy_below
        ):
            fired.append(rule_lm.id)
            price *= rule_lm.factor
            if rule_lm.decide and decided is None:
                decided = min(max(price, floor), ceiling)
        if decided is not None:
            return RuleOutcome(decided, decided, decided, tuple(fired), decided, base_rate=scope.base_rate)
        floor, ceiling, price = self._constrain(request, scope, floor, ceiling, price, fired)
        rule_price = min(max(price, floor), ceiling)
        decided_now = floor if floor == ceiling else None
        return RuleOutcome(decided_now, floor, ceiling, tuple(fired), rule_price, base_rate=scope.base_rate)

    def _constrain(
        self, request: PricingRequest, scope: _Scope, floor: float, ceiling: float, price: float, fired: list[str]
    ) -> tuple[float, float, float]:
        """Parity and max-change bands narrow the bounds; parity also sets the rules price."""
        parity = scope.parity
        if parity is not None and parity.mode == "not_below":
            fired.append(parity.id)
            direct = min(max(price, floor), ceiling) * parity.factor
            floor, ceiling = _narrow(floor, ceiling, direct, ceiling)
            price = max(price, direct)
        elif parity is not None:
            fired.append(parity.id)
            price = min(max(price, floor), ceiling) * parity.factor
            floor, ceiling = _narrow(floor, ceiling, price * (1 - parity.max_spread), price * (1 + parity.max_spread))
        last = request.last_published_price
        if scope.max_change is not None and last is not None:
            pct = scope.max_change.max_pct
            new_floor, new_ceiling = _narrow(floor, ceiling, last * (1 - pct), last * (1 + pct))
            if (new_floor, new_ceiling) != (floor, ceiling):
                fired.append(scope.max_change.id)
            floor, ceiling = new_floor, new_ceiling
        return floor, ceiling, price

    def _ladders(self, occupancy: float | None, lead: int, fired: list[str]) -> float:
        factor = 1.0
        if occupancy is not None:
            steps = [s for s in self._occupancy if s.occupancy_at_least <= occupancy]
            if steps and steps[-1].factor != 1.0:
                factor *= steps[-1].factor
                fired.append("occupancy_ladder")
        lead_steps = [s for s in self._lead if lead <= s.lead_time_at_most_days]
        if lead_steps and lead_steps[0].factor != 1.0:
            factor *= lead_steps[0].factor
            fired.append("lead_time_ladder")
        return factor

    def _scope(self, hotel: str, room_type: str, channel: str) -> _Scope:
        key = (hotel, room_type, channel)
        scope = self._cache.get(key)
        if scope is None:
            scope = self._resolve(hotel, room_type, channel)
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = scope
        return scope

    def _resolve(self, hotel: str, room_type: str, channel: str) -> _Scope:
        spec = self._spec
        hits = [r for r in spec.rules if matches(r, hotel, room_type, channel)]
        floor, floor_ids = _best_bound([r for r in hits if isinstance(r, FloorRule)], highest=True)
        ceiling, ceiling_ids = _best_bound([r for r in hits if isinstance(r, CeilingRule)], highest=False)
        floor = max(spec.min_price, floor if floor is not None else spec.min_price)
        ceiling = min(spec.max_price, ceiling if ceiling is not None else spec.max_price)
        # _check_bounds proves floor <= ceiling for every scope the file names; this guards the rest.
        floor = min(floor, ceiling)
        rates = [b for b in spec.base_rates if matches(b, hotel, room_type, channel)]
        base = max(rates, key=specificity).rate if rates else spec.base_rate

        def one(kind: type[R]) -> R | None:
            chosen = [r for r in hits if isinstance(r, kind)]
            return max(chosen, key=specificity) if chosen else None  # max keeps the first of equals

        return _Scope(
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

    def named_scopes(self) -> list[tuple[str, str, str]]:
        """Every (hotel, room type, channel) the file names literally, plus a catch-all."""
        hotels = {r.hotel for r in self._spec.rules} | {b.hotel for b in self._spec.base_rates} | {"\x00other"}
        rooms = {r.room_type for r in self._spec.rules} | {b.room_type for b in self._spec.base_rates} | {"\x00other"}
        channels = {c for r in self._spec.rules for c in (r.channels or ())} | {"\x00other"}
        return [(h, r, c) for h in sorted(hotels) for r in sorted(rooms) for c in sorted(channels)]


def _best_bound(rules: Sequence[FloorRule | CeilingRule],
                *, highest: bool) -> tuple[float | None, tuple[str, ...]]:
    """Most specific floor/ceiling rule; among equally specific ones the most restrictive."""
    if not rules:
        return None, ()
    top = max(specificity(r) for r in rules)
    best = [r for r in rules if specificity(r) == top]
    pick = max(best, key=lambda r: r.price) if highest else min(best, key=lambda r: r.price)
    return float(pick.price), (pick.id,)


def _check_bounds(rules: RuleSet) -> None:
    """Global bounds ordered, unique ids, and floor <= ceiling for every scope the file can tell apart."""
    spec = rules.spec
    if spec.min_price >= spec.max_price:
        raise RuleSetError(
            rule_id="<ruleset>", field="max_price", value=spec.max_price, expected=f"> min_price ({spec.min_price})"
        )
    seen: set[str] = set()
    for rule in spec.rules:
        if rule.id in seen:
            raise RuleSetError(rule.id, "id", rule.id, "a rule id used once in the file")
        seen.add(rule.id)
    for hotel, room, channel in rules.named_scopes():
        hits = [r for r in rules.spec.rules if matches(r, hotel, room, channel)]
        floor, floor_ids = _best_bound([r for r in hits if isinstance(r, FloorRule)], highest=True)
        ceiling, ceil_ids = _best_bound([r for r in hits if isinstance(r, CeilingRule)], highest=False)
        low = max(rules.spec.min_price, floor or rules.spec.min_price)
        high = min(rules.spec.max_price, ceiling or rules.spec.max_price)
        if low > high:
            rule_id = (floor_ids or ("<ruleset>",))[0]
            other = ceil_ids[0] if ceil_ids else "max_price"
            raise RuleSetError(rule_id, "price", low, f"<= {high} (ceiling from {other!r}) for {hotel}/{room}")


def _translate(exc: ValidationError, raw: dict[str, Any]) -> RuleSetError:
    """Turn pydantic's first error into one naming the rule id and field."""
    first = exc.errors()[0]
    loc = list(first["loc"])
    value = first.get("input")
    expected = first["msg"]
    if first["type"] == "missing":
        value, expected = "<missing>", "a value (required field)"
    rule_id = "<ruleset>"
    if len(loc) >= 2 and loc[0] == "rules" and isinstance(loc[1], int):
        items = raw.get("rules") or []
        item = items[loc[1]] if loc[1] < len(items) else {}
        rule_id = str(item.get("id", f"rules[{loc[1]}]")) if isinstance(item, dict) else f"rules[{loc[1]}]"
        loc = loc[2:]
        if loc and isinstance(item, dict) and loc[0] == item.get("kind"):
            loc = loc[1:]  # pydantic puts the discriminator tag in the path
        if first["type"] in {"union_tag_invalid", "union_tag_not_found"}:
            loc, value = ["kind"], item.get("kind") if isinstance(item, dict) else item
    field = ".".join(str(p) for p in loc) or "<rule>"
    return RuleSetError(rule_id, field, value, expected)


def is_closed(rules: RuleSet, hotel: str, room_type: str, stay: date) -> bool:
    """True when a ``closed_dates`` rule covers this night for any channel.

    Example:
        >>> from datetime import date
        >>> rs = RuleSet.from_yaml("min_price: 1\\nmax_price: 9\\ndefault_base_rate: 5\\n"
        ...                        "rules: [{id: xmas, kind: closed_dates, dates: [2026-12-24]}]")
        >>> is_closed(rs, "h1", "std", date(2026, 12, 24)), is_closed(rs, "h1", "std", date(2026, 12, 25))
        (True, False)
    """
    return any(
        isinstance(r, ClosedDatesRule) and matches(r, hotel, room_type, None) and r.covers(stay)
        for r in rules.spec.rules
    )
