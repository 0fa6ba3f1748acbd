"""The settings of a :class:`pricing.scorer.Scorer` (re-exported there).

Example:
    >>> ScorerConfig(deadline_ms=20).price_decimals
    2
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from pricing import degraded as dg
from pricing.input_guard import InputGuardConfig


class ScorerConfig(BaseModel):
    """Scorer settings.

    Attributes:
        deadline_ms: time budget of one decision.
        stale_after_s: features older than this are not trusted (rules price); ``None`` never.
        degrade_on_deadline_fraction: skip a model when less than this share of the budget is left.
        snapshot_id: offline snapshot the models were trained on (copied into decisions).
        feature_version: label of the feature set (``features.v1``), recorded in the audit trail.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    deadline_ms: float = Field(default=50.0, gt=0, allow_inf_nan=False)
    stale_after_s: float | None = Field(default=86_400.0, gt=0, allow_inf_nan=False)
    degrade_on_deadline_fraction: float = Field(default=0.2, ge=0.0, le=1.0)
    snapshot_id: str | None = None
    feature_version: str = "features.v1"
    input_guard: InputGuardConfig | None = None
    """ML01: impossible or out-of-distribution requests are priced by the rules (:mod:`pricing.input_guard`)."""
    price_decimals: int = Field(default=dg.PRICE_DECIMALS, ge=0, le=4)
    """Prices leave rounded to the currency's minor unit (2: cents; 0 for a currency without one)."""
    hotel_decimals: dict[str, int] = Field(default_factory=dict)
    """Per hotel, the minor unit of its currency where it differs (the hotel profiles' ``price_decimals``)."""
    room_types: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    """Per hotel, the room types it sells (the hotel profiles); a request for another is priced by the rules."""
