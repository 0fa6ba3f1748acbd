"""The closed-loop demo, small: two simulated days on the real Kafka, Redis and Flink."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.config import StackConfig
from pricestream.demo import run_demo
from pricestream.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.flink]


def test_two_day_closed_loop_reports_revenue_labels_and_examples(stack: StackConfig, tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path, kafka_bootstrap=stack.kafka_bootstrap, redis_url=stack.redis_url)
    steps: list[str] = []
    report = run_demo(settings, days=2, hotels=3, seed=11, on_progress=steps.append)

    frame = report.frame()
    assert len(frame) == 2
    assert (frame[["policy", "static", "oracle"]] > 0).all().all()
    assert frame.decisions.sum() == report.decisions > 0
    assert report.labels > 0 and 0 < report.training_examples <= report.labels
    assert report.plot_path is not None and report.plot_path.stat().st_size > 10_000
    assert report.csv_path is not None and report.csv_path.read_text().count("\n") == 3
    # the bootstrap pair is registered; any update after it was either promoted or rejected with a reason
    assert len(report.model_versions) >= 2
    assert all(reason for reason in report.rejections)
    assert sum("guarded training" in step for step in steps) == 2
    _dashboard_has_every_panel(report.dashboard_path)


def _dashboard_has_every_panel(page: Path | None) -> None:
    """The run's monitoring page in a real headless Chromium: every panel drawn, nothing logged to the console."""
    from tests.integration._browser import render

    assert page is not None and page.exists()
    shown = render(page)
    for title in ("Feature coverage", "Feature drift", "Flip rate", "Tier shares", "Latency", "Rollout weights"):
        assert title.lower() in shown.dom.lower(), title
    assert "no data" not in shown.dom and 'data-empty="true"' not in shown.dom
    assert shown.console == []
