"""The three stages of a new hotel's cold start and the one rule that decides its stage (:func:`stage_of`).

Split from :mod:`pricing.cold_start` (which re-exports every name here, and describes the stages) so that
the refit of stage three (:mod:`pricing.own_refit`) and the scorer of the stages read one config.

Example:
    >>> from datetime import UTC, datetime, timedelta
    >>> t0 = datetime(2026, 5, 1, tzinfo=UTC)
    >>> stage_of(HotelHistory(first_seen=t0), t0 + timedelta(hours=12), ColdStartConfig())
    ('rules', 'rules: 0.5 days of history < 1.0')
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

Stage = Literal["rules", "transfer", "own"]
STAGES: tuple[Stage, ...] = ("rules", "transfer", "own")
OWN_WEIGHT = 1.0
"""Default weight of a new hotel's own label against a pooled row in its refit. Measured with
``bench/cold_start.py --own-weights 1 2 4`` (``docs/cold-start.md``, run 5): 1 and 2 level within the
noise of 3 seeds, 4 below both at the resort (its own labels are priced by its own policy, so the more
they weigh, the more the refit follows a confounded sample); of the two, 1 keeps more of the pooled data."""


class ColdStartConfig(BaseModel):
    """The stage thresholds and the refit of stage three (settings ``PRICESTREAM_COLD_START_*``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    transfer_after_days: float = Field(default=1.0, ge=0.0)
    """Days since the hotel's first request before the pooled models price it (day one is rules)."""
    own_after_labels: int = Field(default=300, ge=1)
    """Labels of its own (decisions joined with outcomes) before its models are refitted on them."""
    own_after_bookings: int = Field(default=10, ge=0)
    """Bookings among those labels: a refit on no positives learns nothing about demand."""
    own_weight: float = Field(default=OWN_WEIGHT, gt=0.0)
    """Weight of one of its own labels against one pooled row in the refit (the service's and the bench's)."""
    pooled_rows: int = Field(default=4000, ge=0)
    """Pooled rows (seeded sample) kept in the refit, so that the price response stays identified."""
    refit_trees: int = Field(default=20, ge=1)
    """Trees added to each member by continued training on the refit rows."""
    rules_bid_floor: bool = True
    """Stage one prices no lower than the night's bid price (:func:`pricing.cold_start.bid_floored`): the rules
    alone sell a scarce night at the base rate, below what the room is worth to later shoppers."""
    refit_price_response: bool = False
    """Refit the price response on the refit rows too (False: keep the pooled one). The hotel's own labels
    are priced by its policy, so its price moves with its features; a response refitted on them learns a
    confounded elasticity (measured in ``docs/cold-start.md``), the pooled one was fitted on many hotels."""


class HotelHistory(NamedTuple):
    """What the platform knows of one hotel: when it first asked for a price, its labels and bookings."""

    first_seen: datetime | None
    labels: int = 0
    bookings: int = 0

    def days(self, at: datetime) -> float:
        """Days of history at ``at`` (0 before its first request)."""
        return 0.0 if self.first_seen is None else max((at - self.first_seen).total_seconds() / 86_400.0, 0.0)


def stage_of(history: HotelHistory, at: datetime, config: ColdStartConfig) -> tuple[Stage, str]:
    """The hotel's stage at ``at`` and the reason, in the words of the thresholds (see :mod:`pricing.cold_start`)."""
    days, cfg = history.days(at), config
    if days < cfg.transfer_after_days:
        return "rules", f"rules: {days:.1f} days of history < {cfg.transfer_after_days:.1f}"
    if history.labels >= cfg.own_after_labels and history.bookings >= cfg.own_after_bookings:
        return "own", (f"own: {history.labels} labels >= {cfg.own_after_labels} and "
                       f"{history.bookings} bookings >= {cfg.own_after_bookings}")
    return "transfer", (f"transfer: {days:.1f} days of history >= {cfg.transfer_after_days:.1f}; "
                        f"{history.labels} labels < {cfg.own_after_labels} or "
                        f"{history.bookings} bookings < {cfg.own_after_bookings}")


