"""A short run of the event-parser fuzz target (bench/fuzz_events.py runs 1,000,000 inputs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "fuzz_events.py"


def test_twenty_thousand_fuzzed_inputs_raise_nothing_but_our_validation_error(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--runs", "20000", "--artifacts", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "fuzzed inputs: 20,000" in done.stdout
    assert list(tmp_path.iterdir()) == []  # libFuzzer saved no crashing input
