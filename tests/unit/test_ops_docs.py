"""Issue 31 item 25: the docs say what holds: the feature sinks are at least once with idempotent rows, and
``pricestream run`` starts one writer (the job writes Redis itself)."""

from __future__ import annotations

import re
from pathlib import Path

from infra.config import REPO_ROOT
from pricestream.settings import Settings
from pricestream.supervision import programs

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
SERVICES = (REPO_ROOT / "docs" / "services.md").read_text(encoding="utf-8")


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_feature_job_is_not_called_exactly_once_end_to_end() -> None:
    intro = _flat(README.split("```mermaid", 1)[0])
    assert not re.search(r"features, exactly once", intro)  # after a SIGKILL 7 identical rows were written twice
    assert "at least once with idempotent rows" in intro


def test_run_is_said_to_start_the_writers_it_starts(tmp_path: Path) -> None:
    started = [p.name for p in programs(Settings(state_dir=tmp_path, ops_base_port=40100), exe="x")]
    writers = [name for name in started if name.endswith("-writer")]
    assert writers == ["offline-writer"]
    for text in (_flat(README), _flat(SERVICES)):
        assert "both writers" not in text and "feature job, writers," not in text
    run_section = _flat(SERVICES.split("## `pricestream run`", 1)[1].split("\n## ", 1)[0])
    assert "the offline writer" in run_section and "one writer" in run_section
    assert "PRICESTREAM_JOB_WRITES_ONLINE=false" in run_section
    assert "at least once with idempotent rows" in run_section
