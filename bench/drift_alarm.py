"""The drift alarm on markets that change: false alarms on the stationary control, time to fire on each shift.

For each scenario of :mod:`market.scenarios`, the features the scorer would read at each shopper's request
(``bench/stream_features.StreamFeatures`` fed by the simulation's own events, as the Flink job computes them) plus
the request's lead time and channel are recorded:

* **reference**: the unchanged market (``Scenario.bootstrap_market``) over the ``--ref-days`` that end the
  bootstrap window (what the live model was serving when it was trained; for ``off_season``, late August),
  with each feature's PSI limit calibrated on the reference's own windows of the check's size
  (:func:`feedback.monitors.drift_calibration.window_limits`; ``--no-calibrate``: without);
* **live**: the scenario's market from its start for ``--days``.

The live rows are replayed in time order through :class:`feedback.monitors.stream.DecisionMonitor`'s drift path
with the shipped :class:`~feedback.monitors.DriftMonitor` (PSI against a limit calibrated for the sizes and the
features, alpha 0.01 per check) and :class:`~feedback.monitors.alarms.DriftAlarm` (the cooldown that makes one
episode one alarm, and its actions: here a trainer update request written to a file, as the monitor service
does). Printed per scenario: alarms per simulated week, hours from the change to the first alarm, the features
that fired, and what the alarm did. Goals (issue 34 item 5): at most one false alarm a week on the stationary
control; every shift alarmed within one simulated day.

    .venv/bin/python bench/drift_alarm.py [--hotels 4] [--days 7] [--seeds 1] [--scenarios ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from stream_features import AtRequestTime, StreamFeatures  # noqa: E402

from feedback.monitors.alarms import AlarmConfig, DriftAlarm, UpdateRequests  # noqa: E402
from feedback.monitors.drift import DriftMonitor  # noqa: E402
from feedback.monitors.drift_calibration import window_limits  # noqa: E402
from feedback.monitors.stream import request_features  # noqa: E402
from market import Market, static_policy  # noqa: E402
from market.compare import run_window  # noqa: E402
from market.presets import preset  # noqa: E402
from market.scenarios import NAMES, scenario  # noqa: E402
from market.shoppers import Offer  # noqa: E402
from pricing.feature_source import FeatureSource  # noqa: E402


def served_features(market: Market, *, start: datetime, days: int, seed: int) -> pd.DataFrame:
    """The features read at every shopper's request of ``days`` from ``start`` (static prices), time ordered."""
    feats = StreamFeatures()
    source = AtRequestTime(feats)
    static = static_policy(market)
    rows: list[dict[str, Any]] = []

    def policy(offer: Offer) -> float:
        rows.append(_row(source, offer))
        return static(offer)

    run_window(market, policy, start=start, days=days, seed=seed, on_event=feats.add)  # type: ignore[arg-type]
    return pd.DataFrame(rows).sort_values("at", kind="stable").reset_index(drop=True)


def _row(source: FeatureSource | AtRequestTime, offer: Offer) -> dict[str, Any]:
    source.now = offer.at  # type: ignore[union-attr]
    read = source.read(offer.hotel_id, offer.room_type, offer.stay_date)
    request = request_features(stay_date=offer.stay_date, at=offer.at, channel=offer.channel, nights=offer.nights)
    return {"at": offer.at, **dict(read.values), **request}


def replay(reference: pd.DataFrame, live: pd.DataFrame, *, start: datetime, args: argparse.Namespace,
           work: Path) -> dict[str, Any]:
    """Live rows through the drift check and the alarm, as the monitor service runs them."""
    features = [c for c in reference.columns if c != "at" and reference[c].notna().sum() >= 30]
    limits = window_limits(reference[features], features, window=args.window) if args.calibrate else None
    monitor = DriftMonitor(reference[features], features=features, window_capacity=args.window,
                           window_limits=limits)
    requests = UpdateRequests(work / "update_requests.jsonl")
    alarm = DriftAlarm(AlarmConfig(), actions={"trainer update requested": requests.request})
    checks = 0
    for i, row in enumerate(live.itertuples(index=False), start=1):
        values = row._asdict()
        monitor.update({f: values.get(f) for f in features})
        if i % args.check_every == 0 and len(monitor.window) >= args.window:  # full windows, as calibrated
            alarm.on_report(monitor.check(at=values["at"]))
            checks += 1
    first = alarm.history[0].at if alarm.history else None
    fired = sorted({f for a in alarm.history for f in a.features})
    return {"alarms": len(alarm.history), "checks": checks, "alerts": sum(r.alert for r in monitor.history),
            "hours": None if first is None else (first - start).total_seconds() / 3600.0, "features": fired,
            "actions": alarm.history[0].actions if alarm.history else (), "requests": len(requests.read())}


def bench(name: str, args: argparse.Namespace, seed: int, say: Callable[[str], None]) -> dict[str, Any]:
    sc = scenario(name)
    base = preset(args.preset, hotels=args.hotels, seed=args.market_seed + seed)
    ref_start = sc.bootstrap_start + timedelta(days=sc.bootstrap_days - args.ref_days)
    key = f"{name}-{args.preset}-{args.hotels}-{args.market_seed + seed}-{args.ref_days}-{args.days}"
    cached = None if args.cache is None else args.cache / f"{key}.pkl"
    if cached is not None and cached.exists():
        reference, live = pd.read_pickle(cached)
    else:
        reference = served_features(sc.bootstrap_market(base), start=ref_start, days=args.ref_days, seed=seed)
        live = served_features(sc.market(base), start=sc.start, days=args.days, seed=seed + 1_000)
        if cached is not None:
            cached.parent.mkdir(parents=True, exist_ok=True)
            pd.to_pickle((reference, live), cached)
    with tempfile.TemporaryDirectory(prefix="bench-drift-") as tmp:
        out = replay(reference, live, start=sc.start, args=args, work=Path(tmp))
    out |= {"rows": len(live), "reference": len(reference)}
    say(f"{name} seed {seed}: {len(reference):,} reference and {len(live):,} live rows, {out['checks']} checks, "
        f"{out['alerts']} alerting checks, {out['alarms']} alarms; first after "
        f"{'never' if out['hours'] is None else format(out['hours'], '.1f') + ' h'}; features {out['features']}; "
        f"actions {list(out['actions'])}, trainer requests written {out['requests']}")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", nargs="+", default=list(NAMES), choices=NAMES)
    parser.add_argument("--preset", default="city")
    parser.add_argument("--hotels", type=int, default=4)
    parser.add_argument("--days", type=int, default=7, help="simulated days after the change")
    parser.add_argument("--ref-days", type=int, default=14, help="days of the reference window")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--market-seed", type=int, default=0)
    parser.add_argument("--window", type=int, default=600, help="latest decisions a check judges")
    parser.add_argument("--check-every", type=int, default=60, help="decisions between two checks")
    parser.add_argument("--no-calibrate", dest="calibrate", action="store_false",
                        help="limits without the reference's own windows (drift_calibration.window_limits)")
    parser.add_argument("--cache", type=Path, default=None, help="directory of simulated feature rows, reused")
    args = parser.parse_args(argv)

    def say(line: str) -> None:
        print(f"[{datetime.now(tz=UTC):%H:%M:%S}] {line}", flush=True)

    say(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.hotels} {args.preset} hotels, "
        f"window {args.window} decisions, a check every {args.check_every}")
    clauses = []
    for name in args.scenarios:
        runs = [bench(name, args, seed, say) for seed in range(args.seeds)]
        per_week = np.mean([r["alarms"] for r in runs]) * 7 / args.days
        hours = [r["hours"] for r in runs]
        worst = "never" if any(h is None for h in hours) else f"{max(hours):.1f} h"
        clauses.append(f"{name}: {per_week:.1f} alarms a week, first (worst seed) after {worst}")
    say(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("; ".join(clauses))


if __name__ == "__main__":
    main()
