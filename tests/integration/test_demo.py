"""The closed-loop demo, small: two simulated days against the processes of ``pricestream run``.

Real Kafka, Redis and Flink; every service is an OS process started by its command under
supervisord; the demo talks to them over HTTP and Kafka only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from audit.verify import verify
from infra.config import StackConfig
from pricestream.demo import DEFAULT_MARKET, DemoReport, run_demo
from pricestream.deployment import free_ports, settings_env
from pricestream.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.flink]


def test_two_day_closed_loop_reports_revenue_labels_and_examples(stack: StackConfig, tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path, kafka_bootstrap=stack.kafka_bootstrap, redis_url=stack.redis_url,
                        http_port=free_ports("127.0.0.1", 1), ops_base_port=free_ports("127.0.0.1", 6))
    steps: list[str] = []
    report = run_demo(settings, days=2, hotels=3, seed=11, on_progress=steps.append)
    assert report.market == DEFAULT_MARKET == "city"  # the demo runs a calibrated market unless told otherwise

    # every process of the deployment stopped cleanly, and every decision serve returned is audited, intact
    assert report.unclean == {}
    assert report.state_dir is not None and (report.state_dir / "run" / "supervisord.log").exists()
    audited = verify(report.state_dir / "data" / "audit" / "decisions.jsonl")
    assert audited.ok and audited.entries == report.decisions

    frame = report.frame()
    assert len(frame) == 2
    assert (frame[["policy", "static", "oracle"]] > 0).all().all()
    assert (frame[["policy_net", "static_net", "oracle_net"]] < frame[["policy_expected", "static_expected",
                                                                      "oracle_expected"]].to_numpy()).all().all()
    assert frame.decisions.sum() == report.decisions > 0
    assert report.labels > 0 and 0 < report.training_examples <= report.labels
    assert report.plot_path is not None and report.plot_path.stat().st_size > 10_000
    assert report.csv_path is not None and report.csv_path.read_text().count("\n") == 3
    # the bootstrap pair is registered; any update after it was either promoted or rejected with a reason
    assert len(report.model_versions) >= 2
    assert all(reason for reason in report.rejections)
    assert sum("guarded training" in step for step in steps) == 2
    _dashboard_has_every_panel(report.dashboard_path)
    _bid_forecast_measured_from_the_warm_up(report, steps)
    _monitor_report_finds_the_run(settings, report.decisions, tmp_path)
    _comparison_replays_the_runs_shoppers(report, hotels=3, seed=11)


def _bid_forecast_measured_from_the_warm_up(report: DemoReport, steps: list[str]) -> None:
    """serve priced with the bid forecast measured from the warm-up day's events (its PRICESTREAM_BID_CONFIG)."""
    from pricing.bid_price import BidPriceConfig

    assert report.state_dir is not None and report.bid_forecast is not None
    path = report.state_dir / "bid.json"
    config = BidPriceConfig.model_validate_json(path.read_bytes())
    shares = dict(config.room_shares or ())
    assert set(shares) == {"standard", "deluxe", "suite"} and abs(sum(shares.values()) - 1.0) < 1e-9
    assert shares["standard"] > shares["suite"] > 0.0  # the simulator's shoppers favour the cheapest room
    assert config.rooms_per_booking >= 1.0 and config.horizon_days > 7
    assert f"-> {path}" in report.bid_forecast and any(report.bid_forecast in step for step in steps)
    assert f"bid price forecast: {report.bid_forecast}" in report.summary_lines(revenue=lambda _f: [])


def _comparison_replays_the_runs_shoppers(report: DemoReport, *, hotels: int, seed: int) -> None:
    """``pricestream demo``'s comparison (rules only, the DP oracle) rebuilds the run's market from its name,
    hotels and seed.

    It must price the very shoppers of the run: the static price on the rebuilt market's day 0 books exactly
    the run's static revenue (the flat market's shoppers do not), and the table's static and myopic rows are
    the run's own figures.
    """
    from datetime import UTC, datetime

    from market import static_policy
    from market.evaluate import simulate_days
    from pricestream.cli import _demo_revenue
    from pricestream.demo import demo_market

    frame = report.frame()
    day0 = frame.day[0]
    start = datetime(day0.year, day0.month, day0.day, tzinfo=UTC)

    def static_day0(name: str) -> float:
        market = demo_market(name, hotels=hotels, seed=seed)
        return simulate_days(market, static_policy(market), days=1, start=start, seed=seed).days[0].revenue

    assert abs(static_day0(report.market) - frame.static[0]) < 1e-6
    assert abs(static_day0("flat") - frame.static[0]) > 1.0
    lines = report.summary_lines(revenue=_demo_revenue(report, hotels=hotels, seed=seed))
    assert f"market: {report.market} (market.presets)" in lines
    rows = {name: line.split()[len(name.split()):] for line in lines for name in
            ("pricestream", "static", "rules only", "myopic oracle", "DP oracle") if line.startswith(f"  {name} ")}
    assert len(rows) == 5, lines
    assert float(rows["static"][0].replace(",", "")) == round(frame.static.sum())
    assert float(rows["myopic oracle"][0].replace(",", "")) == round(frame.oracle.sum())
    assert rows["DP oracle"][1] == "1.000" and float(rows["rules only"][0].replace(",", "")) > 0
    # booked, / DP, expected, / DP, net of the rooms' value, / DP: the frame's net columns are the table's
    assert all(len(row) == 6 for row in rows.values()), rows
    assert rows["DP oracle"][5] == "1.000"
    for name, col in (("pricestream", "policy"), ("static", "static"), ("myopic oracle", "oracle")):
        assert float(rows[name][4].replace(",", "")) == round(frame[f"{col}_net"].sum()), name
    for row in rows.values():  # the DP's bid price is never negative: net at most the expected revenue
        assert float(row[4].replace(",", "")) <= float(row[2].replace(",", ""))


def _monitor_report_finds_the_run(settings: Settings, decisions: int, tmp_path: Path) -> None:
    """``pricestream monitor report`` on the demo's home settings, no flags: it reads the demo's deployment."""
    exe = str(Path(sys.executable).with_name("pricestream"))
    out = tmp_path / "from-report.html"
    done = subprocess.run([exe, "monitor", "report", "--out", str(out)], env=settings_env(settings),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{decisions} decisions" in done.stdout, done.stdout
    assert "drift alerts" in done.stdout and out.stat().st_size > 10_000
    record = json.loads((settings.data_dir / "deployment.json").read_text())
    assert record["reference"] and record["settings"]["topic_prefix"].startswith("demo")


def _dashboard_has_every_panel(page: Path | None) -> None:
    """The run's monitoring page in a real headless Chromium: every panel drawn, nothing logged to the console."""
    from tests.integration._browser import render

    assert page is not None and page.exists()
    shown = render(page)
    for title in ("Feature coverage", "Feature drift", "Flip rate", "Tier shares", "Latency", "Rollout weights"):
        assert title.lower() in shown.dom.lower(), title
    assert "no data" not in shown.dom and 'data-empty="true"' not in shown.dom
    assert shown.console == []
