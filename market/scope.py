"""Which nights a :class:`~market.generator.Simulation` plays, and how: the generator's extension point.

A simulation takes a :class:`NightScope` in its constructor (``scope=``) and asks it, and only it,
what to play: which nights to open when the booking horizon moves, which nights' prices the
policy sets (the others sell at the static reference price), which nights' competitor rates are
emitted, whether periodic inventory snapshots are scheduled, and whether the nights whose
check-in the last hour passed are closed when the run ends. The default is the whole market.

A narrower scope subclasses it and overrides the public methods; the simulation's own state
stays private to it (:class:`market.closed_nights.PlayedNights` plays a few nights only).
Overrides must not draw random numbers: the draws of a seed then stay the same for every scope
that opens the same nights, which is what makes two policies face the same shoppers.

Example:
    >>> scope = NightScope(snapshots=False)
    >>> list(scope.opened(10, 12)), scope.prices_by_policy((0, 0, 11)), scope.snapshots
    ([10, 11, 12], True, False)
"""

from __future__ import annotations

from collections.abc import Sequence

from market.shoppers import Key


class NightScope:
    """Every night of the horizon, every price from the policy, every competitor rate (the default).

    Args:
        snapshots: schedule the periodic inventory snapshots (an inventory event still follows
            every booking and cancellation). They draw nothing, so leaving them out keeps the shoppers.
        close_at_end: when the run ends, close the nights whose check-in the last hour passed
            (they then appear in :attr:`~market.generator.Simulation.checkins`).
    """

    def __init__(self, *, snapshots: bool = True, close_at_end: bool = False) -> None:
        self.snapshots = snapshots
        self.close_at_end = close_at_end

    def opened(self, lo: int, hi: int) -> Sequence[int]:
        """The nights (date ordinals, ascending) to open when the horizon is ``lo`` .. ``hi`` inclusive."""
        return range(lo, hi + 1)

    def prices_by_policy(self, key: Key) -> bool:
        """Whether the policy prices this night (else the static reference price, the policy not asked)."""
        return True

    def emits_competitor_rate(self, key: Key) -> bool:
        """Whether a competitor rate of this night is emitted (its draws are made either way)."""
        return True
