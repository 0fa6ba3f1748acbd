"""bench/revenue.py's last lines name the seeds a run priced."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # revenue.py imports stream_features bare

import revenue  # noqa: E402


def test_the_last_line_counts_the_listed_seeds_not_the_default_five() -> None:
    args = argparse.Namespace(seeds=5, seed_list=[5, 6, 7])
    assert revenue.seeds_line(args) == "3 seeds (5 6 7)"
    assert revenue.seeds_line(argparse.Namespace(seeds=5, seed_list=None)) == "5 seeds"
    assert revenue.seeds_line(argparse.Namespace(seeds=1, seed_list=None)) == "1 seed"
