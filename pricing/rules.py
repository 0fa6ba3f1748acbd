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
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from events.models import PricingRequest
from pricing.errors import RuleSetError
from pricing.rule_schema import (
    ClosedDatesRule,
    RuleSetSpec,
    matches,
)
from pricing.rule_scopes import Scope, check_bounds, named_scopes, resolve_scope

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
        self._cache: dict[tuple[str, str, str], Scope] = {}
        check_bounds(spec)

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
        ceiling = scope.ceiling
        for rule in scope.closed:
            if rule.covers(request.stay_date):
                fired.append(rule.id)
                return RuleOutcome(
                    ceiling, ceiling, ceiling, tuple(fired), ceiling, closed=True, base_rate=scope.base_rate
                )
        occupancy = _num(features, "occupancy")
        lead = lead_time_days(request)
        price = scope.base_rate * self._ladders(occupancy, lead, fired)
        decided, floor, price = _outright(scope, _num(features, "rooms_left"), occupancy, lead, price, fired)
        if decided is not None:
            return RuleOutcome(decided, decided, decided, tuple(fired), decided, base_rate=scope.base_rate)
        floor, ceiling, price = self._constrain(request, scope, floor, ceiling, price, fired)
        rule_price = min(max(price, floor), ceiling)
        decided_now = floor if floor == ceiling else None
        return RuleOutcome(decided_now, floor, ceiling, tuple(fired), rule_price, base_rate=scope.base_rate)

    def _constrain(
        self, request: PricingRequest, scope: Scope, floor: float, ceiling: float, price: float, fired: list[str]
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

    def named_scopes(self) -> list[tuple[str, str, str]]:
        """Every (hotel, room type, channel) the file names literally, plus a catch-all."""
        return named_scopes(self._spec)

    def _scope(self, hotel: str, room_type: str, channel: str) -> Scope:
        key = (hotel, room_type, channel)
        scope = self._cache.get(key)
        if scope is None:
            scope = resolve_scope(self._spec, hotel, room_type, channel)
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = scope
        return scope

def _outright(
    scope: Scope, rooms_left: float | None, occupancy: float | None, lead: int, price: float, fired: list[str]
) -> tuple[float | None, float, float]:
    """The last-rooms and last-minute rules: (the price they decide or ``None``, the floor, the rules price).

    ``last_rooms`` decides at the ceiling or at a premium, or raises the floor to the undiscounted
    price and blocks the last-minute discount; ``last_minute`` discounts the price (deciding it with
    ``decide``) when arrival is near and occupancy low. Appends the ids of the rules that fired.
    """
    floor, ceiling = scope.floor, scope.ceiling
    direct = min(max(price, floor), ceiling)
    decided: float | None = None
    no_discount = False
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
    return decided, floor, price


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
