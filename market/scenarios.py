"""Markets that change: named scenarios, each a regime the bootstrap models never saw, from a start time.

A :class:`Scenario` says when the models' training data was drawn (``bootstrap_start`` and
``bootstrap_days``, from the unchanged market) and what is different from ``start`` on. Its
:meth:`Scenario.market` is a :class:`ScenarioMarket`: a :class:`~market.market.Market` whose
truth carries the change, so every simulation, oracle and bound that takes a market scores a
policy against the changed truth (the oracles see the scenario; the models do not).

==================  ============================================================================
name                what changes
==================  ============================================================================
``stationary``      nothing: the control. The run starts where the bootstrap data ends
``off_season``      nothing in the rules, but the models learnt May to August (every hotel peaks
                    in mid July) and the run starts on 1 November, in the low season
``demand_shock``    a city event: demand x2 on 5 nights, the first 3 weeks after the start
                    (announced at the start: the nights open to the extra shoppers then)
``price_war``       competitors 20% cheaper for 3 weeks from the start, then back
``channel_shift``   online travel agencies gain 15 points of every segment's channel share
==================  ============================================================================

Example:
    >>> from market.config import MarketConfig
    >>> base = MarketConfig(hotels=2, horizon_days=60, seed=1)
    >>> war = scenario("price_war", start=datetime(2026, 9, 1, tzinfo=UTC))
    >>> m = war.market(base)
    >>> before = m.competitor_rate("h0000", "standard", date(2026, 9, 20), datetime(2026, 8, 31, tzinfo=UTC))
    >>> during = m.competitor_rate("h0000", "standard", date(2026, 9, 20), datetime(2026, 9, 2, tzinfo=UTC))
    >>> base_rate = Market(war.config(base)).competitor_rate("h0000", "standard", date(2026, 9, 20),
    ...                                                     datetime(2026, 9, 2, tzinfo=UTC))
    >>> round(during / base_rate, 2), before == Market(war.config(base)).competitor_rate(
    ...     "h0000", "standard", date(2026, 9, 20), datetime(2026, 8, 31, tzinfo=UTC))
    (0.8, True)
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from market.config import MarketConfig, Segment
from market.errors import SimulatorError
from market.market import Market

ScenarioName = Literal["stationary", "off_season", "demand_shock", "price_war", "channel_shift"]
NAMES: tuple[ScenarioName, ...] = ("stationary", "off_season", "demand_shock", "price_war", "channel_shift")

SUMMER_PEAK_DOY = 196.0
"""Mid July: where every hotel's season peaks in a scenario (a drawn peak per hotel would blur the off season)."""
BOOTSTRAP_DAYS = 120
"""May to August: what the bootstrap models of a scenario learn from."""
SHOCK_LEAD_DAYS = 21
SHOCK_NIGHTS = 5
WAR_DAYS = 21
_HOUR_S = 3600.0


class Scenario(BaseModel):
    """One named regime change (see the module docstring).

    Attributes:
        name: the scenario's name.
        start: when the change takes effect (and where a run of it starts).
        bootstrap_start: first day of the unchanged market the models are trained on.
        bootstrap_days: days of it.
        season_peak_doy: every hotel's peak day of the year (the same in training and in the run).
        demand_nights: nights whose shoppers are multiplied by ``demand_multiplier``.
        demand_multiplier: the shock's size on those nights.
        competitor_factor: competitors' rates are multiplied by this from ``start`` to ``competitor_until``.
        competitor_until: end of the price war (``None``: no war).
        ota_points: added to every segment's share of shoppers on ``ota`` (the others shrink in proportion).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: ScenarioName
    start: datetime
    bootstrap_start: datetime
    bootstrap_days: int = Field(default=BOOTSTRAP_DAYS, ge=1)
    season_peak_doy: float = Field(default=SUMMER_PEAK_DOY, ge=0.0, le=366.0)
    demand_nights: tuple[date, ...] = ()
    demand_multiplier: float = Field(default=1.0, gt=0.0)
    competitor_factor: float = Field(default=1.0, gt=0.0)
    competitor_until: datetime | None = None
    ota_points: float = Field(default=0.0, ge=0.0, lt=1.0)

    def config(self, base: MarketConfig) -> MarketConfig:
        """``base`` with the scenario's season peak and start (the unchanged market of the bootstrap data)."""
        return base.model_copy(update={"season_peak_doy": self.season_peak_doy, "start": self.start})

    def market(self, base: MarketConfig) -> ScenarioMarket:
        """The changed truth from ``start`` on, over ``base``."""
        return ScenarioMarket(self.config(base), self)

    def bootstrap_market(self, base: MarketConfig) -> Market:
        """The unchanged truth the bootstrap models learn from."""
        return Market(self.config(base))


def shift_channels(segments: tuple[Segment, ...], channel: str, points: float) -> tuple[Segment, ...]:
    """Every segment's share on ``channel`` raised by ``points`` (capped at 1), the other channels scaled down.

    Example:
        >>> from market.config import default_segments
        >>> seg = shift_channels(default_segments(), "ota", 0.15)[0]
        >>> old = default_segments()[0]
        >>> round(seg.channels["ota"] / sum(seg.channels.values())
        ...       - old.channels.get("ota", 0.0) / sum(old.channels.values()), 2)
        0.15
    """
    out = []
    for seg in segments:
        total = sum(seg.channels.values())
        shares = {k: v / total for k, v in seg.channels.items()}
        before = shares.get(channel, 0.0)
        after = min(1.0, before + points)
        rest = 1.0 - before
        scaled = {k: v * (1.0 - after) / rest if rest > 0 else 0.0 for k, v in shares.items() if k != channel}
        out.append(seg.model_copy(update={"channels": {**scaled, channel: after}}))
    return tuple(out)


class ScenarioMarket(Market):
    """A :class:`Market` whose truth carries a :class:`Scenario`'s change (see the module docstring).

    The channel shift is in its config's segments from the start of a run (the generator draws a
    shopper's channel from them); the demand shock is on its nights' shoppers; the price war is on
    the competitors' rates that refresh inside its weeks.
    """

    def __init__(self, config: MarketConfig, scenario: Scenario) -> None:
        if scenario.ota_points:
            config = config.model_copy(update={"segments": shift_channels(config.segments, "ota",
                                                                             scenario.ota_points)})
        self.scenario = scenario
        self._shock = {d.toordinal() for d in scenario.demand_nights}
        self._war = (scenario.start.timestamp(),
                     scenario.competitor_until.timestamp() if scenario.competitor_until else scenario.start.timestamp())
        super().__init__(config)

    def _night_factors(self, h: int, r: int, ordinal: int) -> tuple[float, ...]:
        factors = super()._night_factors(h, r, ordinal)
        if ordinal not in self._shock:
            return factors
        return tuple(f * self.scenario.demand_multiplier for f in factors)

    def _comp_rates(self, h: int, r: int, ordinal: int, bucket: int) -> tuple[float, ...]:
        rates = super()._comp_rates(h, r, ordinal, bucket)
        ts = bucket * self.config.competitor_refresh_hours * _HOUR_S
        if not self._war[0] <= ts < self._war[1]:
            return rates
        return tuple(round(rate * self.scenario.competitor_factor, 2) for rate in rates)


def _midnight(at: datetime) -> datetime:
    if at.tzinfo is None:
        raise SimulatorError(field="start", value=at, expected="a timezone-aware datetime")
    return at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def scenario(name: str, *, start: datetime | None = None) -> Scenario:
    """The named scenario, changing at ``start`` (default: 1 September 2026; 1 November for ``off_season``).

    The models learn the ``bootstrap_days`` before ``start`` of the unchanged market, except in
    ``off_season``, where they learn May to August and the run starts on 1 November.

    Raises:
        SimulatorError: an unknown name, or a naive ``start``.
    """
    if name not in NAMES:
        raise SimulatorError(field="scenario", value=name, expected=f"one of {list(NAMES)}")
    default = datetime(2026, 11 if name == "off_season" else 9, 1, tzinfo=UTC)
    at = _midnight(start or default)
    boot = at - timedelta(days=BOOTSTRAP_DAYS)
    if name == "off_season":
        boot = datetime(at.year if at.month > 8 else at.year - 1, 5, 1, tzinfo=UTC)
    fields: dict[str, object] = {"name": name, "start": at, "bootstrap_start": boot}
    first = (at + timedelta(days=SHOCK_LEAD_DAYS)).date()
    if name == "demand_shock":
        fields |= {"demand_nights": tuple(first + timedelta(days=i) for i in range(SHOCK_NIGHTS)),
                   "demand_multiplier": 2.0}
    elif name == "price_war":
        fields |= {"competitor_factor": 0.8, "competitor_until": at + timedelta(days=WAR_DAYS)}
    elif name == "channel_shift":
        fields |= {"ota_points": 0.15}
    return Scenario.model_validate(fields)
