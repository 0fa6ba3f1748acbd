"""Where pricestream's revenue goes against rules-only and the DP oracle, per bucket, on one seed of a preset.

A diagnosis, not a benchmark: the same shoppers (common random numbers) are priced by
the rules-only scorer, pricestream's scorer and the DP oracle, as ``bench/revenue.py``
prices them. Per (lead time, rooms left) bucket and per segment / channel it prints each
policy's offers, median price over the reference, bookings and net revenue; and for
pricestream's own offers, at the same states, paired figures: its quote over the DP's
and the rules' quote, its bid price against the DP's (``DPOracle.bid_price``), its
forecast of shoppers still to come against the truth (the oracle's arrival rates of
viewers of that night), and the booking probability and local price elasticity its tier
priced with against the truth's for the shopper's channel (segments mixed by arrival
share, as a request knows them). Cancellations are counted per policy.

    .venv/bin/python bench/revenue_buckets.py --preset city --seed 6 [--days 60] [--rows 12000]
"""

from __future__ import annotations

import argparse
import math
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from revenue import DEFAULT_START, LAST_ROOMS_ACTION, RULES_ONLY_LAST_ROOMS, history, request_of, scorer, train
from stream_features import AtRequestTime, StreamFeatures

from market import DPOracle, Market
from market.compare import run_window
from market.market import _LAST_MINUTE_DAYS
from market.presets import preset
from market.shoppers import Offer

LEADS = ((0, 3), (3, 8), (8, 22), (22, 61), (61, 10_000))
"""Lead-time buckets (days, [lo, hi)): the last days, a week, three weeks, two months, beyond."""
LEFT = ((0.0, 0.1), (0.1, 0.25), (0.25, 0.5), (0.5, 1.01))
"""Rooms-left buckets (share of capacity)."""
_DAY_S = 86_400.0


def bucket(lead: float, left_share: float) -> tuple[str, str]:
    lb = next(f"{lo}-{hi - 1}d" if hi < 10_000 else f"{lo}+d" for lo, hi in LEADS if lo <= lead < hi)
    rb = next(f"{lo:.0%}-{min(hi, 1.0):.0%}" for lo, hi in LEFT if lo <= left_share < hi)
    return lb, rb


@dataclass
class Log:
    """Offers and bookings of one policy's run."""

    offers: list[dict[str, Any]] = field(default_factory=list)
    bookings: list[dict[str, Any]] = field(default_factory=list)
    cancelled_rooms: float = 0.0


class Truth:
    """The market's true views still to come and channel-mixed booking curve of an offer's night."""

    def __init__(self, market: Market, dp: DPOracle) -> None:
        self.market, self.dp = market, dp
        self._lam: dict[int, np.ndarray] = {}

    def views_to_come(self, offer: Offer) -> float:
        m, dp = self.market, self.dp
        h, r = m.hotel_index(offer.hotel_id), m.room_index(offer.room_type)
        if r not in self._lam:
            self._lam[r] = dp._grid(h, r)[0].sum(axis=2)  # (nights, periods): viewers per period
        lam = self._lam[r]
        o = offer.stay_date.toordinal()
        lead = (m.checkin_ts(o) - offer.at.timestamp()) / _DAY_S
        edges = dp._edges
        t = dp._period(lead)
        # the rest of the current period (linear share) and every later one
        width = edges[t] - edges[t + 1]
        part = (lead - edges[t + 1]) / width if width > 0 else 0.0
        row = lam[dp._night(o)]
        return float(row[t] * min(max(part, 0.0), 1.0) + row[t + 1 :].sum())

    def curve(self, offer: Offer, prices: np.ndarray) -> np.ndarray:
        """P(book | price) per view for the offer's channel, segments mixed by arrival share."""
        m = self.market
        h, r, o = m.hotel_index(offer.hotel_id), m.room_index(offer.room_type), offer.stay_date.toordinal()
        ts = offer.at.timestamp()
        mix = m.segment_mix(h, r, o, ts, offer.channel)
        comp = m.comp_median(h, r, o, ts)
        lead = max((m.checkin_ts(o) - ts) / _DAY_S, 0.0)
        logp = np.log(prices)
        total = np.zeros_like(prices)
        for s in range(len(m.config.segments)):
            if mix[s] <= 0.0:
                continue
            wtp = m.wtp_base(h, r, o) * (1.0 + m.seg_premium[s] * math.exp(-lead / _LAST_MINUTE_DAYS))
            x = (
                m.seg_alpha[s]
                + m.config.channel_offsets[offer.channel]
                - m.seg_elasticity[s] * (logp - math.log(wtp))
                - m.config.competitor_sensitivity * (logp - math.log(comp))
            )
            total += mix[s] * m.seg_intent[s] / (1.0 + np.exp(-np.clip(x, -700.0, 700.0)))
        return total


def _elasticity(prices: np.ndarray, probs: np.ndarray, at: float) -> tuple[float, float]:
    """(P, -d log P / d log p) at ``at`` from a curve on ``prices`` (ascending), by log-linear interpolation."""
    lp, lq = np.log(prices), np.log(np.clip(probs, 1e-12, 1.0))
    x = math.log(at)
    i = int(np.clip(np.searchsorted(lp, x) - 1, 0, len(lp) - 2))
    j = min(i + 1, len(lp) - 1)
    slope = -(lq[j] - lq[i]) / (lp[j] - lp[i]) if lp[j] > lp[i] else float("nan")
    q = float(np.exp(np.interp(x, lp, lq)))
    return q, float(slope)


def run_logged(
    market: Market,
    policy_name: str,
    *,
    start: datetime,
    days: int,
    seed: int,
    dp: DPOracle,
    bundles: tuple[Path, Path],
    capacity: Any,
    truth: Truth,
) -> Log:
    log = Log()
    last = (start + timedelta(days=days)).date()
    feats = StreamFeatures()
    source = AtRequestTime(feats)
    left: dict[tuple[str, str, Any], float] = {}
    paired_rules = None
    ps = None
    if policy_name != "dp":
        models = None if policy_name == "rules" else bundles
        ps = scorer(
            market,
            source=source,
            bundles=models,
            capacity=capacity,
            stay_bids=False,
            last_rooms=RULES_ONLY_LAST_ROOMS if policy_name == "rules" else LAST_ROOMS_ACTION,
        )
        if policy_name == "pricestream":
            paired_rules = scorer(market, source=source, bundles=None, capacity=None, last_rooms=RULES_ONLY_LAST_ROOMS)

    def policy(offer: Offer) -> float:
        counted = offer.at >= start and offer.stay_date < last
        row: dict[str, Any] = {}
        if ps is None:
            price = dp.price(offer)
        else:
            source.now = offer.at
            decision, trail = ps.price_traced(request_of(offer))
            price = decision.price
            if counted and paired_rules is not None:
                row.update(tier=decision.tier, bid=decision.bid_price, fc_views=decision.forecast_views)
                row["rules_price"] = paired_rules.price_traced(request_of(offer))[0].price
                row["dp_price"], row["dp_bid"] = dp._quote(offer)
                row["dp_channel_price"] = dp.channel_price(offer)
                row["true_views"] = truth.views_to_come(offer)
                cands = trail.candidates
                if cands and decision.tier != "rules":
                    cp = np.array([c[0] for c in cands])
                    cq = np.array([c[1] for c in cands])
                    order = np.argsort(cp)
                    cp, cq = cp[order], cq[order]
                    keep = np.concatenate([[True], np.diff(cp) > 1e-9])
                    cp, cq = cp[keep], cq[keep]
                    if len(cp) >= 2:
                        row["model_p"], row["model_el"] = _elasticity(cp, cq, price)
                        grid = price * np.exp(np.array([-0.05, 0.0, 0.05]))
                        tq = truth.curve(offer, grid)
                        row["true_p"] = float(tq[1])
                        row["true_el"] = -float(np.log(tq[2] / tq[0]) / 0.1)
        if counted:
            m = market
            ref = m.reference_at(m.hotel_index(offer.hotel_id), m.room_index(offer.room_type))
            lead = (m.checkin_ts(offer.stay_date.toordinal()) - offer.at.timestamp()) / _DAY_S
            row.update(
                room=offer.room_type,
                night=offer.stay_date,
                lead=lead,
                left=offer.rooms_left,
                share_left=offer.rooms_left / offer.capacity,
                segment=offer.segment,
                channel=offer.channel,
                nights=offer.nights,
                price=price,
                rel=price / ref,
            )
            log.offers.append(row)
        return price

    cancel = {s.name: s.cancel_rate for s in market.config.segments}

    def on_event(event: Any) -> None:
        feats.add(event)
        kind = event.event_type
        key = (event.hotel_id, event.room_type, event.stay_date)
        if kind == "inventory":
            left[key] = event.rooms_left / event.capacity
        elif kind == "cancellation" and event.event_time >= start and event.stay_date < last:
            log.cancelled_rooms += event.rooms
        elif kind == "booking" and event.event_time >= start and event.stay_date < last:
            lead = (market.checkin_ts(event.stay_date.toordinal()) - event.event_time.timestamp()) / _DAY_S
            amount = event.price_paid * event.rooms * event.nights
            log.bookings.append(
                dict(
                    room=event.room_type,
                    lead=lead,
                    share_left=left.get(key, 1.0),
                    segment=event.segment,
                    channel=event.channel,
                    rooms=event.rooms,
                    nights=event.nights,
                    net=amount * (1.0 - cancel[event.segment]),
                )
            )

    out = run_window(market, policy, start=start, days=days, seed=seed, on_event=on_event)
    print(
        f"{policy_name:12s} revenue {out.revenue:10,.0f} occupancy {out.occupancy:.3f} ADR {out.adr:7.2f} "
        f"rooms cancelled {log.cancelled_rooms:.0f}",
        flush=True,
    )
    return log


def _median(xs: list[float]) -> float:
    return float(np.median(xs)) if xs else float("nan")


def bucket_table(logs: dict[str, Log]) -> None:
    print("\nper bucket (lead, rooms left at the offer / booking): offers, median price/ref, rooms booked, net revenue")
    names = list(logs)
    head = "  ".join(f"{n:>30s}" for n in names)
    print(f"{'lead':>7s} {'left':>8s}  {head}")
    keys = sorted(
        {bucket(o["lead"], o["share_left"]) for lg in logs.values() for o in lg.offers},
        key=lambda k: ([f"{a}-{b - 1}d" if b < 10_000 else f"{a}+d" for a, b in LEADS].index(k[0]), k[1]),
    )
    for k in keys:
        cells = []
        for n in names:
            offers = [o for o in logs[n].offers if bucket(o["lead"], o["share_left"]) == k]
            books = [b for b in logs[n].bookings if bucket(b["lead"], b["share_left"]) == k]
            cells.append(
                f"{len(offers):5d} {_median([o['rel'] for o in offers]):5.2f}x "
                f"{sum(b['rooms'] for b in books):5d} {sum(b['net'] for b in books):9,.0f}"
            )
        print(f"{k[0]:>7s} {k[1]:>8s}  " + "  ".join(f"{c:>30s}" for c in cells))


def group_table(logs: dict[str, Log], by: str) -> None:
    print(f"\nper {by}: rooms booked, room-nights, net revenue")
    groups = sorted({b[by] for lg in logs.values() for b in lg.bookings})
    for g in groups:
        cells = []
        for n, lg in logs.items():
            books = [b for b in lg.bookings if b[by] == g]
            cells.append(
                f"{n} {sum(b['rooms'] for b in books):4d} {sum(b['rooms'] * b['nights'] for b in books):5d} "
                f"{sum(b['net'] for b in books):8,.0f}"
            )
        print(f"{g:>12s}  " + "   ".join(cells))


def paired_table(offers: list[dict[str, Any]]) -> None:
    print(
        "\npricestream's offers, paired at the same states (medians; 'hi'/'lo': share of quotes over 5% above/below"
        " the DP's):"
    )
    print(
        f"{'lead':>7s} {'left':>8s} {'n':>5s} {'light':>5s} {'rules':>5s} {'ps/dp':>6s} {'hi':>4s} {'lo':>4s} "
        f"{'rl/dp':>6s} {'bid':>6s} {'dpbid':>6s} {'fc/true':>7s} {'P/Ptrue':>7s} {'el':>5s} {'el_true':>7s}"
    )
    keys = sorted(
        {bucket(o["lead"], o["share_left"]) for o in offers},
        key=lambda k: ([f"{a}-{b - 1}d" if b < 10_000 else f"{a}+d" for a, b in LEADS].index(k[0]), k[1]),
    )
    for k in keys:
        rows = [o for o in offers if bucket(o["lead"], o["share_left"]) == k]
        ratio = [o["price"] / o["dp_price"] for o in rows]
        modelled = [o for o in rows if "model_p" in o]
        print(
            f"{k[0]:>7s} {k[1]:>8s} {len(rows):5d} {sum(o['tier'] == 'light' for o in rows):5d} "
            f"{sum(o['tier'] == 'rules' for o in rows):5d} {_median(ratio):6.2f} "
            f"{np.mean([r > 1.05 for r in ratio]):4.0%} {np.mean([r < 0.95 for r in ratio]):4.0%} "
            f"{_median([o['rules_price'] / o['dp_price'] for o in rows]):6.2f} "
            f"{_median([o['bid'] for o in rows if o['bid'] is not None]):6.1f} "
            f"{_median([o['dp_bid'] for o in rows]):6.1f} "
            f"{_median([o['fc_views'] / o['true_views'] for o in rows if o['fc_views'] and o['true_views'] > 0]):7.2f} "
            f"{_median([o['model_p'] / o['true_p'] for o in modelled if o['true_p'] > 0]):7.2f} "
            f"{_median([o['model_el'] for o in modelled]):5.2f} {_median([o['true_el'] for o in modelled]):7.2f}"
        )


def channel_table(offers: list[dict[str, Any]]) -> None:
    """Per channel, pricestream's quote against the channel-aware DP's and the elasticity it priced with."""
    print(
        "\npricestream's offers by channel, at the same states (medians): quote / DP knowing the channel only,"
        " booking probability and local elasticity -dlogP/dlogp at the quote, model and truth"
    )
    print(f"{'channel':>10s} {'n':>5s} {'ps/dpch':>7s} {'P':>6s} {'P_true':>6s} {'el':>5s} {'el_true':>7s}")
    for ch in sorted({o["channel"] for o in offers}):
        rows = [o for o in offers if o["channel"] == ch]
        modelled = [o for o in rows if "model_p" in o]
        print(
            f"{ch:>10s} {len(rows):5d} {_median([o['price'] / o['dp_channel_price'] for o in rows]):7.2f} "
            f"{_median([o['model_p'] for o in modelled]):6.3f} {_median([o['true_p'] for o in modelled]):6.3f} "
            f"{_median([o['model_el'] for o in modelled]):5.2f} {_median([o['true_el'] for o in modelled]):7.2f}"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="city")
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--rows", type=int, default=12_000)
    parser.add_argument("--start", default=DEFAULT_START)
    parser.add_argument("--policies", nargs="+", default=["rules", "pricestream", "dp"])
    parser.add_argument("--response", default="both", help="bench/revenue.py's --response (oracle: a diagnosis)")
    parser.add_argument("--dump", type=Path, default=None, help="write every policy's offer and booking log (pickle)")
    args = parser.parse_args(argv)
    market = Market(preset(args.preset, hotels=1, seed=0))
    start = datetime.fromisoformat(args.start).astimezone(UTC)
    dp = DPOracle(
        market,
        first_night=start.date(),
        last_night=(start + timedelta(days=args.days + market.config.horizon_days + 1)).date(),
    )
    truth = Truth(market, dp)
    with tempfile.TemporaryDirectory(prefix="revenue-buckets-") as tmp:
        bundles = train(market, start=start, rows=args.rows, seed=0, work=Path(tmp), response=args.response)
        capacity = history(market, start, seed=10_000, method="dp")
        logs = {
            name: run_logged(
                market,
                name,
                start=start,
                days=args.days,
                seed=args.seed,
                dp=dp,
                bundles=bundles,
                capacity=capacity,
                truth=truth,
            )
            for name in args.policies
        }
    if args.dump is not None:
        import pickle

        args.dump.write_bytes(pickle.dumps({n: (lg.offers, lg.bookings) for n, lg in logs.items()}))
    bucket_table(logs)
    for by in ("segment", "channel", "room"):
        group_table(logs, by)
    if "pricestream" in logs:
        paired_table(logs["pricestream"].offers)
        channel_table(logs["pricestream"].offers)


if __name__ == "__main__":
    main()
