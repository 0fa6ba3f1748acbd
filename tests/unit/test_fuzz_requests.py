"""A short run of bench/fuzz_requests.py: the same generator and target as the 1,000,000-input bench."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench" / "fuzz_requests.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fuzz_requests", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_requests"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_a_few_thousand_fuzzed_bodies_raise_nothing_but_bad_request() -> None:
    tally = _bench().run(4_000, base_seed=11, chunk=2_000)
    assert tally.other == []
    assert tally.inputs == 4_000 == tally.accepted + tally.validation_errors
    # the inputs reach every stage: some are priced, some refused for their content type, most for their body
    assert tally.accepted > 0 and tally.refused[415] > 0 and tally.refused[422] > tally.refused[415]


def test_the_generator_is_reproducible() -> None:
    bench = _bench()
    assert bench.generate(300, 5) == bench.generate(300, 5)
    assert bench.generate(300, 5) != bench.generate(300, 6)
