"""``pricestream router report`` and ``router health``: what heavy compute buys, planned and as served."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import pandas as pd
import typer

from pricestream.commands.common import err, fail, kv_table, new_app, out, settings, table
from pricestream.settings import Settings

if TYPE_CHECKING:
    from pricing.rules import RuleSet
    from pricing.tiers import TierPricer

router_app = new_app("The tiered router: how much heavy compute is worth its revenue.")


@router_app.command("report")
def router_report(
    out_file: Annotated[Path | None, typer.Option("--out", envvar="PRICESTREAM_ROUTER_OUT")] = None,
    requests: Annotated[int, typer.Option(envvar="PRICESTREAM_REPLAY_REQUESTS", min=10)] = 600,
    hotels: Annotated[int, typer.Option(envvar="PRICESTREAM_HOTELS", min=1)] = 8,
    max_revenue_loss: Annotated[float, typer.Option(envvar="PRICESTREAM_MAX_REVENUE_LOSS", min=0.0)] = 0.01,
    seed: Annotated[int | None, typer.Option(envvar="PRICESTREAM_SEED")] = None,
) -> None:
    """Compute saved vs revenue lost as the heavy share sweeps 0-100%, on simulated requests (PNG)."""
    from feedback.registry import ModelRegistry
    from pricestream.commands.replay import ReplayRequests
    from pricestream.progress import progress_bar
    from pricestream.wiring import ensure_models
    from pricing.rules import RuleSet
    from pricing.tiers import load_pricer
    from routing.curve import TierCosts, best_point, cost_revenue_curve, plot_curve
    from routing.errors import RoutingInputError

    s = settings()
    run_seed = s.seed if seed is None else seed
    with progress_bar("router report", total=4) as bar:
        task = bar.task_ids[0]
        light_entry, heavy_entry = ensure_models(ModelRegistry(s.registry()), seed=s.seed, rows=s.bootstrap_rows,
                                                 cache_dir=s.cache_dir)
        rules = RuleSet.load(s.rules_file)
        bar.update(task, description=f"sampling {requests} requests", advance=1)
        replay = ReplayRequests.sample(n=requests, seed=run_seed, hotels=hotels)
        bar.update(task, description="light model", advance=1)
        light = replay.quote(load_pricer(light_entry.path), rules)
        bar.update(task, description="heavy model", advance=1)
        heavy = replay.quote(load_pricer(heavy_entry.path), rules)
        bar.update(task, description="revenue under the truth", advance=1)
        revenue = {"rules": replay.true_revenue(replay.rules_prices(rules)),
                   "light": replay.true_revenue(light.prices), "heavy": replay.true_revenue(heavy.prices)}
    # Costs are the measured mean latencies of this run: the curve's x axis is real compute.
    costs = TierCosts(rules=0.0, light=float(light.latency_ms.mean()), heavy=float(heavy.latency_ms.mean()))
    points = cost_revenue_curve(replay.complexity(light.uncertainty), revenue, costs=costs, steps=21)
    path = plot_curve(points, out_file or s.reports_dir / "router_curve.png", max_revenue_loss=max_revenue_loss)
    rows = [(f"{p.heavy_share:.0%}", p.heavy_above, f"{p.compute_saved:.1%}", f"{p.revenue_lost:.2%}")
            for p in points[::2]]
    out.print(table(("heavy share", "heavy above", "compute saved", "revenue lost"), rows,
                    title=f"{requests} simulated requests; light {costs.light:.2f} ms, heavy {costs.heavy:.2f} ms"))
    try:
        best = best_point(points, max_revenue_loss)
        out.print(f"best within {max_revenue_loss:.1%} revenue loss: heavy share {best.heavy_share:.0%} "
                  f"(heavy above {best.heavy_above:.3f}) saves {best.compute_saved:.1%} compute, "
                  f"loses {best.revenue_lost:.2%} revenue")
    except RoutingInputError:
        out.print(f"no heavy share keeps revenue loss within {max_revenue_loss:.1%}")
    out.print(f"plot: {path}  ({datetime.now(tz=UTC).isoformat(timespec='seconds')})")


@router_app.command("health")
def router_health(
    tolerance: Annotated[float, typer.Option(envvar="PRICESTREAM_PRICE_TOLERANCE", min=0.0001, max=1.0,
                                             help="relative price gap under which two prices are the same")] = 0.01,
) -> None:
    """False positives / negatives of the router on the running system's labelled decisions (Kafka).

    Every served decision on ``pricing.decisions`` that ``feedback.labels`` has an outcome for is
    priced again by the registry's light and heavy models on the features it saw: a heavy decision
    whose light price was within ``--tolerance`` is a false positive (heavy compute bought nothing),
    a rules or light decision the heavy model would have priced differently is a false negative.
    Booking rates per tier come from the labels.
    """
    from feedback.registry import ModelRegistry
    from pricing.rules import RuleSet
    from pricing.tiers import load_pricer
    from routing.health import health_check

    s = settings()
    decisions, labels = _labelled_decisions(s)
    registry = ModelRegistry(s.registry())
    light_entry, heavy_entry = registry.current("light"), registry.current("heavy")
    if light_entry is None or heavy_entry is None:
        fail(f"registry {registry.root} has no promoted light and heavy model to compare with")
        return
    light, heavy = load_pricer(light_entry.path), load_pricer(heavy_entry.path)
    with err.status(f"pricing {len(labels)} labelled decisions with {light_entry.version} and {heavy_entry.version}"):
        rows, tiers = _reprice(decisions, labels, light, heavy, RuleSet.load(s.rules_file))
    report = health_check(rows["score"], tiers, rows["light"], rows["heavy"], rules_prices=rows["rules"],
                          rel_tolerance=tolerance)
    booked = pd.DataFrame({"tier": tiers, "booked": rows["booked"]}).groupby("tier")["booked"].agg(["size", "mean"])
    out.print(table(("tier", "labelled decisions", "booking rate"),
                    [(t, int(r["size"]), f"{r['mean']:.3f}") for t, r in booked.iterrows()],
                    title=f"{report.n} labelled decisions of {len(decisions)} served"))
    out.print(kv_table([
        ("false positives (heavy, light price within tolerance)", report.false_positives),
        ("false positive rate (of heavy)", f"{report.fp_rate:.3f}"),
        ("false negatives (rules/light, heavy price differs)", report.false_negatives),
        ("false negative rate (of rules/light)", f"{report.fn_rate:.3f}"),
        ("mean price gap of false negatives", f"{report.mean_fn_gap:.2%}"),
        ("tolerance", f"{tolerance:.2%}"),
    ], title="router health"))


def _labelled_decisions(s: Settings) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The served decisions (incumbent or candidate arm) and the labels of those that have one, by decision id."""
    from pricestream.commands.monitoring import read_records

    kafka = s.kafka()
    with err.status(f"reading {kafka.topic('pricing.decisions')} and {kafka.topic('feedback.labels')}"):
        decisions = {str(d["decision_id"]): d for d in read_records(kafka, "pricing.decisions")
                     if d.get("arm") in ("incumbent", "candidate")}
        labels = {str(lb["decision_id"]): lb for lb in read_records(kafka, "feedback.labels")
                  if str(lb.get("decision_id")) in decisions}
    if not labels:
        fail(f"no labelled decisions: {len(decisions)} served decisions on {kafka.topic('pricing.decisions')}, "
             f"none with an outcome on {kafka.topic('feedback.labels')} yet")
    return decisions, labels


def _reprice(decisions: dict[str, dict[str, Any]], labels: dict[str, dict[str, Any]], light: TierPricer,
             heavy: TierPricer, rules: RuleSet) -> tuple[dict[str, list[float]], list[str]]:
    """Each labelled decision priced again by both models on the features it saw, with its score and outcome."""
    from events.models import PricingRequest

    rows: dict[str, list[float]] = {"score": [], "light": [], "heavy": [], "rules": [], "booked": []}
    tiers: list[str] = []
    for key, label in labels.items():
        d = decisions[key]
        request = PricingRequest(hotel_id=d["hotel_id"], room_type=d["room_type"], stay_date=d["stay_date"],
                                 channel=d.get("channel", "web"), event_time=d["event_time"])
        feats = dict(d.get("features") or {})
        outcome = rules.evaluate(request, feats)
        for name, pricer in (("light", light), ("heavy", heavy)):
            q = pricer.quote(request, feats, floor=outcome.floor, ceiling=outcome.ceiling,
                             rule_price=outcome.rule_price)
            rows[name].append(outcome.clamp(q.price))
        rows["rules"].append(outcome.rule_price)
        rows["score"].append(float(d["complexity"]))
        rows["booked"].append(float(label["label"]))
        tiers.append(str(d["tier"]))
    return rows, tiers
