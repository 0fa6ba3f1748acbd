"""Benchmark: native LightGBM ``Booster.predict`` vs onnxruntime vs the compiled boosters, in the same run.

Prints rows/s for a single row and a batch of 1,000, for the light model and
the heavy ensemble (native boosters one by one, one ONNX session per member,
the fused single-graph session and the compiled members of :mod:`pricing.compiled`),
whole-quote latency on each backend, the ratios to native, and the load average
at the start and the end (CPU time is measured, but a loaded host still slows
every peer: a final figure needs a quiet host).
Goal: compiled >= 10x native for a single light row.

Run: ``.venv/bin/python bench/onnx_vs_native.py [--heavy-trees 300] [--repeats 5]``
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import numpy as np

from events.catalog import ALL_FEATURES
from events.models import PricingRequest
from market.synthetic import training_frame
from pricing.compiled import CompiledDemandModel, ModelBackend
from pricing.models import HEAVY_CONFIG
from pricing.onnx_runtime import OnnxDemandModel, to_onnx
from pricing.tiers import load_pricer
from pricing.training import load_boosters, train_bundle
from pricing.vectorize import frame_matrix


def rows_per_second(
    peers: Mapping[str, Callable[[], object]], rows: int, *, calls: int, repeats: int
) -> dict[str, float]:
    """Rows/s per peer: best of ``repeats`` CPU-time runs of ``calls`` calls, peers interleaved.

    CPU time (not wall time) and interleaving keep the comparison fair on a
    shared machine, where other processes steal whole time slices.
    """
    best = dict.fromkeys(peers, float("inf"))
    for fn in peers.values():
        fn()  # warm up
    for _ in range(repeats):
        for name, fn in peers.items():
            start = time.process_time()
            for _ in range(calls):
                fn()
            best[name] = min(best[name], time.process_time() - start)
    return {name: rows * calls / max(seconds, 1e-9) for name, seconds in best.items()}


def bench_tier(bundle: Path, label: str, repeats: int) -> dict[str, float]:
    boosters, meta = load_boosters(bundle)
    x = frame_matrix(training_frame(1000, seed=99), meta["columns"])
    one = np.ascontiguousarray(x[:1])
    fused = OnnxDemandModel(str(bundle / "model.onnx"))
    n_features = len(meta["columns"])
    per_member = [OnnxDemandModel(to_onnx([b], n_features=n_features).SerializeToString()) for b in boosters]
    peers: dict[str, Callable[[np.ndarray], object]] = {
        "native": lambda a: [b.predict(a, num_threads=1) for b in boosters],
        "onnx fused": fused.predict,
        "compiled": CompiledDemandModel.from_bundle(bundle, meta["boosters"]).predict,
    }
    if len(boosters) > 1:
        peers["onnx per member"] = lambda a: [m.predict(a) for m in per_member]
    out: dict[str, float] = {}
    singles = rows_per_second({k: partial(fn, one) for k, fn in peers.items()}, 1, calls=300, repeats=repeats)
    batches = rows_per_second({k: partial(fn, x) for k, fn in peers.items()}, 1000, calls=5, repeats=repeats)
    for name in peers:
        out[f"{name} 1"] = singles[name]
        out[f"{name} 1000"] = batches[name]
    print(f"\n{label}: {meta['n_members']} member(s), {meta['n_trees']} trees, {n_features} columns")
    for key, value in out.items():
        print(f"  {key:>22} rows: {value:>12,.0f} rows/s")
    for size in ("1", "1000"):
        for name in ("onnx fused", "compiled"):
            print(f"  ratio {name} / native, batch {size:>4}: {out[f'{name} {size}'] / out[f'native {size}']:.1f}x")
        if len(boosters) > 1:
            ratio = out[f"onnx fused {size}"] / out[f"onnx per member {size}"]
            print(f"  ratio onnx fused / per member, batch {size:>4}: {ratio:.2f}x")
    return out


def bench_quote(bundle: Path, label: str, repeats: int) -> None:
    for backend in ("onnx", "compiled"):
        _quote(bundle, f"{label} {backend}", repeats, backend)


def _quote(bundle: Path, label: str, repeats: int, backend: ModelBackend) -> None:
    pricer = load_pricer(bundle, backend=backend)
    frame = training_frame(200, seed=5)
    feats = {name: float(frame[name].median()) for name in ALL_FEATURES}
    now = datetime(2026, 6, 1, tzinfo=UTC)
    request = PricingRequest(
        hotel_id="h1", room_type="std", stay_date=(now + timedelta(days=20)).date(), event_time=now
    )
    quote = {"quote": lambda: pricer.quote(request, feats, floor=50.0, ceiling=500.0)}
    qps = rows_per_second(quote, 1, calls=200, repeats=repeats)["quote"]
    print(f"  {label} whole quote: {qps:,.0f} quotes/s ({1e6 / qps:.0f} us CPU per quote)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heavy-trees", type=int, default=HEAVY_CONFIG.num_trees)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    frame = training_frame(5000, seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        light = train_bundle(frame, Path(tmp) / "light", tier="light").path
        heavy_config = HEAVY_CONFIG.model_copy(update={"num_trees": args.heavy_trees})
        heavy = train_bundle(frame, Path(tmp) / "heavy", tier="heavy", config=heavy_config).path
        bench_tier(light, "light", args.repeats)
        bench_tier(heavy, "heavy", args.repeats)
        print()
        bench_quote(light, "light (9 + 9 rows, 2 runs)", args.repeats)
        bench_quote(heavy, "heavy (41 rows, 1 run)", args.repeats)
    print("\nload average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
