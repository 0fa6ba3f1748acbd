"""The demo's revenue report: what a hotel reports on closed nights, pricestream against static, rules only and the DP.

The deployed run (``serve`` pricing over HTTP) plays the shoppers of a set of stay nights to
their close, the hotels' other nights sold at the static price around them (:mod:`market.closed_nights`,
``background=True``). :func:`compare` plays the very same shoppers (same
market, nights and seed: common random numbers) in process under the static price, the rules
tier alone (the run's own rule file through the real :class:`~pricing.scorer.Scorer` with no
model tier, fed the offer's inventory) and the capacity-aware DP oracle (:class:`market.DPOracle`),
and each policy gets, per counted night and in total, room revenue, rooms sold, occupancy, ADR
and RevPAR (:class:`market.closed_nights.HotelFigures`). Next to them, the expected value of the
offers shown net of the rooms' value: each offer's P(book) x (price - the DP oracle's bid price
per room-night at that offer) x rooms x nights (:class:`market.evaluate.NetValueRecorder`).

Example:
    >>> from datetime import date
    >>> from market import Market, MarketConfig, static_policy
    >>> from market.closed_nights import StayNights, play
    >>> market = Market(MarketConfig(hotels=1, horizon_days=20, seed=3))
    >>> nights = StayNights(first=date(2026, 2, 1), count=2, lead_in=1, window_days=20)
    >>> dp = nights_oracle(market, nights)
    >>> rec = NetValueRecorder(market, static_policy(market), dp.bid_price)
    >>> mine = PolicyNights(play(market, rec, nights, seed=5, background=True), rec.total())
    >>> rules = RuleSet.from_yaml("min_price: 20\\nmax_price: 900\\ndefault_base_rate: 150\\n")
    >>> table = compare(market, nights, seed=5, rules=rules, dp=dp, pricestream=mine)
    >>> list(table), table["static"].total.revpar == mine.total.revpar
    (['pricestream', 'static', 'rules only', 'DP oracle'], True)
    >>> revpar_line(table, hotels=1).startswith("RevPAR pricestream ")
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from events.models import PricingRequest
from market import DPOracle, Market, static_policy
from market.closed_nights import HotelFigures, NightLedger, StayNights, play
from market.evaluate import NetValueRecorder
from market.shoppers import Offer, Policy
from pricing.feature_source import MemoryFeatureSource
from pricing.rules import RuleSet
from pricing.scorer import Scorer, ScorerConfig
from routing.router import TieredRouter

POLICIES = ("pricestream", "static", "rules only", "DP oracle")
_DEADLINE_MS = 60_000.0  # an in-process replay is not latency-bound: a busy host must not degrade it
TABLE_HEADER = "  night       policy          revenue   sold  avail    occ      ADR   RevPAR"
"""Header of the per-night table (:func:`night_lines`); each row is night, policy, then these columns."""


@dataclass(frozen=True)
class PolicyNights:
    """One policy's closed nights: its ledger and the expected value of its offers net of the rooms' value."""

    ledger: NightLedger
    net: float

    @property
    def total(self) -> HotelFigures:
        return self.ledger.total()


def rules_policy(market: Market, rules: RuleSet) -> Policy:
    """The rules tier alone as a simulator policy, fed the offer's inventory as its features."""
    source = MemoryFeatureSource()
    scorer = Scorer(ScorerConfig(deadline_ms=_DEADLINE_MS, stale_after_s=None), rules=rules, feature_source=source,
                    light=None, heavy=None, router=TieredRouter())

    def policy(offer: Offer) -> float:
        source.put(offer.hotel_id, offer.room_type, offer.stay_date,
                   {"rooms_left": float(offer.rooms_left),
                    "occupancy": 1.0 - offer.rooms_left / offer.capacity if offer.capacity else None})
        request = PricingRequest(hotel_id=offer.hotel_id, room_type=offer.room_type, stay_date=offer.stay_date,
                                 nights=offer.nights, channel=offer.channel, event_time=offer.at)
        return scorer.price(request).price

    return policy


def nights_oracle(market: Market, nights: StayNights) -> DPOracle:
    """The DP oracle of the played nights (and a week after them, where the last nights' stays run on).

    The one oracle of a run: it prices the DP row and its bid prices value the rooms of every policy's
    offers (the net figure), so build it once (its values are solved lazily).
    """
    last: date = nights.last + timedelta(days=7)
    return DPOracle(market, first_night=nights.played[0], last_night=last)


def compare(
    market: Market, nights: StayNights, *, seed: int, rules: RuleSet, dp: DPOracle, pricestream: PolicyNights
) -> dict[str, PolicyNights]:
    """Policy -> its closed nights, on the shoppers of ``seed``: ``pricestream`` as given, the others played here.

    Each is played as the deployed run is (the hotels' other nights at the static price around the counted ones).
    """
    out = {"pricestream": pricestream}
    others = {"static": static_policy(market), "rules only": rules_policy(market, rules), "DP oracle": dp.policy()}
    for name, policy in others.items():
        rec = NetValueRecorder(market, policy, dp.bid_price)
        out[name] = PolicyNights(play(market, rec, nights, seed=seed, snapshots=False, background=True), rec.total())
    return out


def _change(mine: float, base: float) -> str:
    return f"{(mine / base - 1) * 100:+.1f}%" if base else "n/a"


def revpar_line(table: dict[str, PolicyNights], *, hotels: int) -> str:
    """The summary's first line: pricestream's RevPAR against the static price's, over the closed nights."""
    mine, static = table["pricestream"].total.revpar, table["static"].total.revpar
    count = len(table["pricestream"].ledger.nights.counted)
    return (f"RevPAR pricestream {mine:.2f} vs static {static:.2f} ({_change(mine, static)}) "
            f"over {count} closed nights, {hotels} hotels")


def _row(night: str, name: str, f: HotelFigures) -> str:
    return (f"  {night:11s} {name:12s} {f.revenue:10.2f} {f.rooms_sold:6d} {f.rooms_available:6d} "
            f"{f.occupancy:6.3f} {f.adr:8.2f} {f.revpar:8.2f}")


def night_lines(table: dict[str, PolicyNights]) -> list[str]:
    """Per counted night and in total, per policy: room revenue, rooms sold, rooms available, occ, ADR, RevPAR."""
    lines = ["closed nights, what a hotel reports (room revenue of kept bookings; occupancy = sold / available; "
             "ADR = revenue / sold; RevPAR = revenue / available):", TABLE_HEADER]
    nights = {name: pol.ledger.per_night() for name, pol in table.items()}
    for night in next(iter(table.values())).ledger.nights.counted:
        lines += [_row(night.isoformat(), name, nights[name][night]) for name in table]
    lines += [_row("total", name, pol.total) for name, pol in table.items()]
    return lines


def ranking_lines(table: dict[str, PolicyNights]) -> list[str]:
    """pricestream's RevPAR against each other policy, and every policy's net of the rooms' value."""
    mine = table["pricestream"].total.revpar
    versus = ", ".join(f"{name} {pol.total.revpar:.2f} ({_change(mine, pol.total.revpar)})"
                       for name, pol in table.items() if name != "pricestream")
    best = table["DP oracle"].net
    net = ", ".join(f"{name} {pol.net:,.0f} ({pol.net / best:.3f} of the DP)" if best else f"{name} {pol.net:,.0f}"
                    for name, pol in table.items())
    return [f"RevPAR pricestream {mine:.2f} against: {versus}",
            f"net of the rooms' value (each offer's expected revenue less the DP oracle's bid price of the "
            f"room-nights it may take; same shoppers): {net}"]
