"""The scorer in a PyFlink vectorised (pandas) UDF against the same scorer in-process, same run.

Why this exists: ``docs/stream-scorer.md`` chose a consumer-group service over a Flink job for
``pricing.requests`` -> ``pricing.decisions``; this measures the Flink alternative instead of
arguing it. Both paths price the same seeded requests with the same models and Redis features:

* ``in-process``: parse the request JSON, ``Scorer.price_batch``, serialise the decisions, on
  batches of ``--batch`` requests (what the UDF body does; both scorers start cold);
* ``pyflink``: a bounded ``from_elements`` table of request JSON, one pandas UDF that builds the
  scorer in ``open()`` and calls ``price_batch`` on each Arrow batch (``--batch`` rows), in the
  embedded MiniCluster of this process (parallelism 1), results collected to the client.

The Flink side has no Kafka source or sink here (that would only add to its cost); it is the
per-row price of the JVM <-> Python boundary plus the job's start. Printed: wall time, requests
per second (whole job and first-to-last result), and the ratio to in-process.

Run: ``.venv/bin/python bench/stream_flink.py [--requests 4000] [--batch 500] [--quick]``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pandas as pd

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from scoring_fixtures import (  # noqa: E402
    build_scorer,
    drop_features,
    requests_for,
    stay_keys,
    train_bundles,
    write_features,
)

from events.models import PricingRequest  # noqa: E402
from features.config import FeaturesConfig  # noqa: E402


def scorer_spec(bundles: tuple[Path, Path], config: FeaturesConfig, hotels: int) -> dict[str, Any]:
    """What a Python worker needs to build the same scorer (plain data: it is pickled to the worker)."""
    return {"light": str(bundles[0]), "heavy": str(bundles[1]), "project": config.project,
            "state": str(config.state_dir), "redis_url": config.redis_url, "hotels": hotels, "bench": str(BENCH)}


def build_from(spec: dict[str, Any]) -> Any:
    sys.path.insert(0, spec["bench"])
    from scoring_fixtures import build_scorer as build

    config = FeaturesConfig(project=spec["project"], state_dir=Path(spec["state"]), redis_url=spec["redis_url"])
    return build((Path(spec["light"]), Path(spec["heavy"])), stay_keys(spec["hotels"]), config=config)


def in_process(scorer: Any, bodies: list[str], batch: int) -> float:
    """Seconds to do what the UDF does, batch by batch: parse, ``price_batch``, serialise (fresh scorer, no warm-up).

    The UDF's scorer starts cold too, so both see the same cold-start routing and first-call costs.
    """
    started = time.perf_counter()
    for i in range(0, len(bodies), batch):
        parsed = [PricingRequest.model_validate_json(r) for r in bodies[i : i + batch]]
        [d.model_dump_json() for d in scorer.price_batch(parsed)]
    return time.perf_counter() - started


def flink_run(spec: dict[str, Any], bodies: list[str], batch: int) -> tuple[float, float, int]:
    """(whole job seconds, first-to-last result seconds, results) of the pandas-UDF job."""
    from pyflink.common import Configuration
    from pyflink.table import DataTypes, EnvironmentSettings, TableEnvironment
    from pyflink.table.udf import ScalarFunction, udf

    class Price(ScalarFunction):  # type: ignore[misc]
        def open(self, function_context: Any) -> None:
            self.scorer = build_from(spec)

        def eval(self, requests: pd.Series) -> pd.Series:
            parsed = [PricingRequest.model_validate_json(r) for r in requests]
            return pd.Series([d.model_dump_json() for d in self.scorer.price_batch(parsed)])

    conf = Configuration()
    conf.set_string("parallelism.default", "1")
    conf.set_string("python.executable", sys.executable)
    conf.set_string("python.client.executable", sys.executable)
    conf.set_string("python.fn-execution.arrow.batch.size", str(batch))
    conf.set_string("python.fn-execution.bundle.size", str(batch))
    env = TableEnvironment.create(EnvironmentSettings.new_instance().in_batch_mode().with_configuration(conf).build())
    price = udf(Price(), result_type=DataTypes.STRING(), func_type="pandas")
    table = env.from_elements([(b,) for b in bodies], DataTypes.ROW([DataTypes.FIELD("request", DataTypes.STRING())]))
    started = time.perf_counter()
    first, n = None, 0
    with table.select(price(table.request)).execute().collect() as rows:
        for _ in rows:
            first = time.perf_counter() if first is None else first
            n += 1
    ended = time.perf_counter()
    return ended - started, ended - (first or ended), n


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=4_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--hotels", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="small models (fast to train)")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        config = FeaturesConfig(project=f"bench{uuid.uuid4().hex[:8]}", state_dir=Path(tmp), redis_url=args.redis_url)
        keys = stay_keys(args.hotels)
        try:
            write_features(config, keys)
            bundles = train_bundles(Path(tmp), quick=args.quick)
            requests = requests_for(keys, args.requests)
            bodies = [r.model_dump_json() for r in requests]
            print(f"load before {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
            local = in_process(build_scorer(bundles, keys, config=config), bodies, args.batch)
            whole, steady, n = flink_run(scorer_spec(bundles, config, args.hotels), bodies, args.batch)
            if n != len(requests):
                msg = f"the Flink job returned {n} decisions for {len(requests)} requests"
                raise SystemExit(msg)
            rate = len(requests) / local
            print(f"{'path':<44}{'seconds':>9}{'req/s':>9}{'ratio':>7}")
            print(f"{'in-process parse + price_batch + dump':<44}{local:>9.2f}{rate:>9.0f}{1.0:>7.2f}")
            for name, secs in (("pyflink pandas UDF, whole job", whole), ("pyflink, first to last result", steady)):
                print(f"{name:<44}{secs:>9.2f}{n / secs:>9.0f}{n / secs / rate:>7.2f}")
            print(f"load after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        finally:
            drop_features(config)


if __name__ == "__main__":
    main()
