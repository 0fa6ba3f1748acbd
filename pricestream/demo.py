"""The closed-loop demo over complete stay nights: the README's main command, driving the deployed pipeline.

The demo starts the processes of ``pricestream run`` (:class:`pricestream.deployment.Deployment`:
the Flink feature job, the online and offline writers, ``serve``, and the label, sampler, trainer
and monitor services, each by its own command under ``supervisord``) on settings of its own run
(:mod:`pricestream.demo_setup`), and then acts only as the outside world does.

It picks ``nights`` consecutive stay nights and plays the market from ``window_days`` before the
first of them until the last has closed, in compressed time (:mod:`market.closed_nights`,
``background=True``): every view of a counted night is priced by ``serve`` over HTTP, and the
hotels' other nights are sold around them at the static price (their shoppers give the
hotel-level counts the models were trained with; without them, a trial run's hotel-level search
counts sat 14 standard deviations below the training snapshot, and the trainer's poison guard
refused its updates). The calibrated presets' booking window is 450 days, and every night of a
450-day market costs 20 s of simulation per 60 simulated days per policy, so the window is capped
(90 days by default, ``window_days``): rooms a counted night had sold before the window are its
history, sold at the static price and the same for every policy (the report says how many). The
run is cut into ``phases`` of about equal shoppers of the counted nights, after each of which the
demo waits for the feedback services and the feature job, and inside each a live rollout is
moved on by ``pricestream rollout advance --source replay`` (:mod:`pricestream.demo_nights`).

Mid-run the market changes (``scenario``, :mod:`market.scenarios`; a price war by default:
competitors 20% cheaper from the midnight before the middle phase until the last night has
closed). Nothing tells the services: the drift checks, the trainer's updates and the rollouts
are the loop's own.

The report is what a hotel reports on closed nights, per night and in total: occupancy, ADR and
RevPAR for pricestream against the static price, the rules tier alone and the DP oracle on the
very same shoppers (played in process, :mod:`pricestream.demo_revenue`), and each policy's
expected value net of the rooms' value. Its first line is pricestream's RevPAR against the
static price's. Then the loop: each phase's drift check, the trainer's updates and rejections,
every rollout step with its gates' evidence, and the promotions or why there were none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from feedback.monitors.drift import DriftReport
from market import Market
from market.closed_nights import NightLedger, StayNights, choose_nights, shopper_phases
from market.oracle import DPOracle
from market.scenarios import NAMES as SCENARIOS
from market.scenarios import scenario as named_scenario
from pricestream.demo_nights import DeployedRun, Phase, play_deployed
from pricestream.demo_revenue import PolicyNights, compare, night_lines, nights_oracle, ranking_lines, revpar_line
from pricestream.demo_services import LoopLog, Progress, await_features, monitor_drift_alerts, tally
from pricestream.demo_setup import (
    DEFAULT_MARKET,
    MARKETS,
    TRAIN_EVERY,
    DemoRun,
    demo_market,
    market_rule_spec,
    market_rules,
    measure_bid_forecast,
    start,
    year_forecast,
)
from pricestream.settings import Settings

__all__ = ["DEFAULT_MARKET", "MARKETS", "SCENARIOS", "TRAIN_EVERY", "DemoReport", "demo_market", "market_rule_spec",
           "market_rules", "measure_bid_forecast", "phases_done", "run_demo", "year_forecast"]

DEFAULT_NIGHTS = 10
DEFAULT_HOTELS = 3
DEFAULT_WINDOW_DAYS = 90
"""Booking window played: 56% of a city night's shoppers come within it; 3 hotels x 90 days fit the 10 minutes."""
DEFAULT_PHASES = 6
DEFAULT_SCENARIO = "price_war"
_LEAD_IN = 0  # the other nights are played around the counted ones: their stays already reach the first


@dataclass
class DemoReport:
    """What the demo did: the closed nights per policy, the phases, the loop's steps, where its pages are."""

    nights: StayNights
    hotels: int
    market: str = DEFAULT_MARKET
    table: dict[str, PolicyNights] = field(default_factory=dict)
    """Policy -> its closed nights (``pricestream``, ``static``, ``rules only``, ``DP oracle``)."""
    phases: list[Phase] = field(default_factory=list)
    log: LoopLog = field(default_factory=LoopLog)
    change: str = ""
    """The regime change: which scenario, from when to when."""
    window: str = ""
    """What part of the nights' booking window was played."""
    checks: list[DriftReport] = field(default_factory=list)
    monitor_alerts: dict[str, float] = field(default_factory=dict)
    decisions: int = 0
    labels: int = 0
    training_examples: int = 0
    model_versions: list[str] = field(default_factory=list)
    updates: list[str] = field(default_factory=list)
    """The trainer's updates, oldest first (the registered versions with a parent)."""
    rejections: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Why each update attempt on buffered examples judged nothing (e.g. too few unseen labels to hold out)."""
    state_dir: Path | None = None
    unclean: dict[str, int] = field(default_factory=dict)
    """Processes that did not stop cleanly (name -> exit status); empty when all did."""
    dashboard_path: Path | None = None
    plot_path: Path | None = None
    csv_path: Path | None = None
    bid_forecast: str | None = None

    @property
    def promotions(self) -> int:
        return self.log.promotions

    def summary_lines(self) -> list[str]:
        """The printed summary; the first line is pricestream's RevPAR against the static price."""
        from pricestream.demo_story import drift_lines, phase_lines

        lines = [revpar_line(self.table, hotels=self.hotels), *ranking_lines(self.table), *night_lines(self.table)]
        lines += [self.window, self.change, *phase_lines(self.phases)]
        lines += drift_lines(self.checks, self.phases, self.monitor_alerts)
        lines += self._loop_lines()
        lines += [f"decisions {self.decisions}, labels {self.labels}, training examples written "
                  f"{self.training_examples}", f"bid price forecast: {self.bid_forecast}",
                  f"market: {self.market} (market.presets)"]
        stopped = "every process stopped cleanly" if not self.unclean else f"unclean stops: {self.unclean}"
        lines.append(f"deployment: {self.state_dir} ({stopped})")
        if self.plot_path is not None:
            lines.append(f"plot: {self.plot_path}  table: {self.csv_path}")
        if self.dashboard_path is not None:
            lines.append(f"dashboard: {self.dashboard_path}")
        return lines

    def _loop_lines(self) -> list[str]:
        lines = [f"trainer: {len(self.updates)} updates registered {self.updates}, {len(self.rejections)} rejected, "
                 f"{len(self.skipped)} skipped"]
        lines += [f"  rejected update: {reason[:160]}" for reason in self.rejections]
        lines += [f"  skipped update: {reason[:160]}" for reason in list(dict.fromkeys(self.skipped))[-3:]]
        lines += ["rollouts (simulated time; each step's gates below it):"]
        lines += [f"  {step}" for step in self.log.rollouts] or ["  none started"]
        lines.append(f"promotions: {self.promotions}" if self.promotions else f"promotions: 0 ({self._why_none()})")
        return lines

    def _why_none(self) -> str:
        if not self.log.rollouts:
            return (f"no update passed the trainer's guard to start a rollout ({len(self.rejections)} rejected)"
                    if self.rejections else "the trainer registered no update: "
                    + (f"{len(self.skipped)} attempts skipped" if self.skipped else "no attempt on enough examples"))
        aborted = [r for r in self.log.rollouts if "(aborted)" in r]
        if aborted:
            return f"every candidate stopped at a gate, last: {aborted[-1]}"
        return "the last candidate's gates were still waiting for evidence when the nights closed"


def _market(name: str, change: str, *, hotels: int, seed: int, nights: int, window_days: int | None,
            phases: int) -> tuple[Market, StayNights, list[datetime], str, Callable[[datetime], str]]:
    """The run's market with the regime change, its nights, its phase cuts, the change's line and regime()."""
    base = demo_market(name, hotels=hotels, seed=seed).config
    today = datetime.now(tz=UTC).date()
    provisional = named_scenario(change, start=datetime(today.year, today.month, today.day, tzinfo=UTC))
    plain = provisional.bootstrap_market(base)
    stay = choose_nights(plain, count=nights, after=today, lead_in=_LEAD_IN, window_days=window_days)
    cuts = shopper_phases(plain, stay, phases=phases)
    at, until = cuts[phases // 2], stay.end(plain)
    chosen = named_scenario(change, start=at)
    if change == "price_war":
        chosen = chosen.model_copy(update={"competitor_until": until})
    market = chosen.market(base)

    def regime(t: datetime) -> str:
        return f"{change} on" if t >= chosen.start and (chosen.competitor_until is None or t < until) else "before"

    line = (f"regime change: {change} (market.scenarios) from {chosen.start:%Y-%m-%d}, the start of phase "
            f"{phases // 2 + 1} of {phases}" + (f", competitors x{chosen.competitor_factor:g} until the last night "
                                                 f"closed" if change == "price_war" else ""))
    return market, stay, cuts, line, regime


def run_demo(
    settings: Settings, *, nights: int = DEFAULT_NIGHTS, hotels: int = DEFAULT_HOTELS, seed: int = 7,
    market: str = DEFAULT_MARKET, window_days: int | None = DEFAULT_WINDOW_DAYS, phases: int = DEFAULT_PHASES,
    scenario: str = DEFAULT_SCENARIO, train_every: int = TRAIN_EVERY, on_progress: Progress | None = None,
    days: int | None = None,
) -> DemoReport:
    """Run the loop over ``nights`` complete stay nights on a fresh deployment; returns the report.

    ``window_days``: booking window played (``None``: the market's horizon); ``phases``: parts of about
    equal shoppers; ``scenario``: the regime change at the middle phase; ``days``: the former name of
    ``nights`` (runs of a few simulated days no longer exist: a night is counted only once it closed).

    Raises:
        UnknownKeyError: ``market`` is not one of :data:`MARKETS` (before anything starts).
        SimulatorError: ``scenario`` is not one of :data:`SCENARIOS`, or ``nights``/``phases`` below 1.
        DeploymentError: a process did not start or answer (the message names it and where its logs are).
    """
    say = on_progress or (lambda _msg: None)
    nights = days if days is not None else nights
    simulated, stay, cuts, change, regime = _market(market, scenario, hotels=hotels, seed=seed, nights=nights,
                                                    window_days=window_days, phases=phases)
    report = DemoReport(nights=stay, hotels=hotels, market=market, change=change)
    dp = nights_oracle(simulated, stay)
    run = start(settings, simulated, seed=seed, first=stay.start(simulated), train_every=train_every, say=say)
    report.state_dir, report.bid_forecast = run.settings.state_dir, run.bid_forecast
    try:
        await_features(run, 0, say)  # the warm-up's, published while the processes started
        deployed = play_deployed(run, stay, cuts=cuts, seed=seed, dp=dp, log=report.log, regime=regime, say=say)
        report.monitor_alerts = monitor_drift_alerts(run)
    finally:
        say("stopping every process of the deployment (SIGTERM, each within its grace period)")
        run.http.close()
        report.unclean = run.deployment.stop()
    _finish(report, run, deployed, dp, seed=seed, say=say)
    return report


def phases_done(message: str) -> int | None:
    """Phases finished, read from a progress message ("phase 3/6 done ..."); ``None`` for other messages.

    Example:
        >>> phases_done("phase 3/6 done (812 decisions): labels ..."), phases_done("starting")
        (3, None)
    """
    head = message.split(" ", 2)
    if len(head) == 3 and head[0] == "phase" and head[2].startswith("done") and "/" in head[1]:
        return int(head[1].split("/", 1)[0])
    return None


def _window_line(market: Market, stay: StayNights, ledger: NightLedger) -> str:
    """The nights, the window played, and the rooms they had sold before it (history, at the static price)."""
    window, horizon = stay.window(market), market.config.horizon_days
    cap = "the whole window" if window >= horizon else f"capped from {horizon}"
    cfg = market.config
    history = sum(ledger.history_rooms(h, r, n) for h in cfg.hotel_ids for r in cfg.room_types for n in stay.counted)
    sold = ledger.total().rooms_sold
    return (f"nights: {stay.first} .. {stay.last} counted, each closed (the last at {stay.end(market):%Y-%m-%d %H:%M} "
            f"simulated); booking window played {window} days ({cap}); {history} of pricestream's {sold} rooms sold "
            "were booked before it (history at the static price, the same rooms for every policy)")


def _finish(report: DemoReport, run: DemoRun, deployed: DeployedRun, dp: DPOracle, *, seed: int,
            say: Progress) -> None:
    """Tally what the services wrote, play the comparison policies, draw the pages."""
    from pricing.rules import RuleSet

    report.phases, report.decisions = deployed.phases, deployed.decisions
    counts = tally(run)
    report.labels, report.training_examples = counts["labels"], counts["training_examples"]
    report.model_versions, report.rejections = counts["model_versions"], counts["rejections"]
    report.updates, report.skipped = counts["updates"], counts["skipped"]
    say("playing the same shoppers in process: static, rules only, the DP oracle")
    rules = RuleSet.from_yaml(run.settings.rules_file.read_text(encoding="utf-8"))
    report.table = compare(run.market, report.nights, seed=seed, rules=rules, dp=dp, pricestream=deployed.nights)
    report.window = _window_line(run.market, report.nights, deployed.nights.ledger)
    say("drawing the run's monitoring page and the RevPAR plot")
    _pages(report, run)


def _pages(report: DemoReport, run: DemoRun) -> None:
    from features.snapshots import load_snapshot
    from pricestream.commands import monitoring as mon
    from pricestream.demo_story import phase_drift, write_dashboard, write_plot

    features = mon.records_features(mon.read_records(run.settings.kafka(), "pricing.decisions"))
    reference = load_snapshot(run.settings.snapshots(), run.reference)
    report.checks = phase_drift(reference, features, report.phases)
    title = (f"RevPAR per closed night, {report.hotels} hotels: {report.promotions} promotions, "
             f"{len(report.updates)} updates")
    report.plot_path, report.csv_path = write_plot(report.table, run.settings.state_dir / "report", title=title)
    report.dashboard_path = write_dashboard(
        run.settings.reports_dir / "monitor.html", audit=run.settings.audit(), features=features,
        checks=report.checks, phases=report.phases, weights=report.log.weights)

