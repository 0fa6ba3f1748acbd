"""The feature job on the standalone cluster that the PyFlink wheel ships, at parallelism 2.

A private cluster (temp state dir, free REST and RPC ports, small memory, two TaskManagers of
one slot) runs the same scripted sequence as the MiniCluster test in ``test_feature_job.py`` with
every operator at parallelism 2, so the keyed tile state is split across two processes; the output
must be the same: the same window values of every view, the same versions, the same DLQ. Then
the cluster stops and its JVMs must be gone.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from infra import flink_cluster
from infra.config import REPO_ROOT, StackConfig
from tests.integration.flink_helpers import read_all
from tests.integration.test_feature_job import _final_rows, publish_scripted

pytestmark = [pytest.mark.integration, pytest.mark.flink]


@dataclass(frozen=True)
class ClusterRun:
    job_id: str
    final_state: str
    jobs: list[dict]
    rows: list[dict]
    dlq: list
    cluster_pids: list[int]
    was_running: bool
    parallelism: dict[str, int]


@pytest.fixture(scope="module")
def cluster_run(stack: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterRun]:
    cluster = StackConfig(
        state_dir=tmp_path_factory.mktemp("flink-cluster"), cache_dir=stack.cache_dir,
        flink_rest_port=flink_cluster.free_port(), flink_taskmanager_slots=1, flink_taskmanagers=2,
        flink_process_memory="1024m", ready_timeout_s=180.0,
    )
    kafka, job = publish_scripted(stack, "fc", group_id=f"fc-{uuid.uuid4().hex[:8]}",
                                  transactional_id_prefix=f"fc-{uuid.uuid4().hex[:8]}")
    job = job.model_copy(update={"parallelism": 2})
    try:
        flink_cluster.start(cluster)
        config_file = tmp_path_factory.mktemp("flink-job") / "job.json"  # as `jobs submit` passes it: not in argv
        config_file.write_text(job.model_dump_json())
        job_id = flink_cluster.submit_python_job(
            cluster, REPO_ROOT / "pipelines" / "feature_job.py", ["--config-file", str(config_file)]
        )
        state = flink_cluster.wait_for_job(cluster, job_id, timeout_s=300.0)
        jobs = flink_cluster.list_jobs(cluster)
        detail = flink_cluster._get(cluster, f"/jobs/{job_id}") or {}
        parallelism = {v["name"]: int(v["parallelism"]) for v in detail.get("vertices", [])}
    finally:
        pids = flink_cluster.pids(cluster)
        was_running = flink_cluster.stop(cluster)
    rows = [json.loads(m.value()) for m in read_all(kafka, "features.v1")]
    yield ClusterRun(job_id, state, jobs, rows, read_all(kafka, "behaviour.events.dlq"), pids, was_running,
                     parallelism)


def test_bounded_job_finishes_on_the_cluster(cluster_run: ClusterRun) -> None:
    assert cluster_run.final_state == "FINISHED"
    listed = {j["jid"]: j for j in cluster_run.jobs}
    assert listed[cluster_run.job_id]["name"] == "pricestream-features"
    assert listed[cluster_run.job_id]["state"] == "FINISHED"
    tiles = [name for name in cluster_run.parallelism if name.startswith("tiles: ")]
    assert tiles and all(cluster_run.parallelism[name] == 2 for name in tiles), cluster_run.parallelism


def test_the_same_values_as_in_the_minicluster(cluster_run: ClusterRun) -> None:
    final = _final_rows(cluster_run.rows)
    # test_feature_job: 11 valid events for h1 (the last at offset 16), one search for h2
    for view in ("stay_1h", "stay_24h", "stay_7d", "stay_14d"):
        assert final[(view, "h1", "std", "2026-11-20")]["version"] == 16
    assert len([r for r in cluster_run.rows if r["view"] == "stay_inventory"]) == 1
    day = final[("stay_24h", "h1", "std", "2026-11-20")]["features"]
    assert (day["views_24h"], day["bookings_24h"], day["cancellations_24h"]) == (3.0, 2.0, 1.0)
    assert day["mean_price_shown_24h"] == 310.0 / 3
    assert (day["comp_rate_median_24h"], day["comp_rate_min_24h"]) == (95.0, 80.0)
    assert final[("hotel_stats", "h2", None, None)]["features"]["hotel_searches_24h"] == 1.0


def test_rejected_events_reach_the_dlq(cluster_run: ClusterRun) -> None:
    classes = Counter(dict(m.headers())["error_class"].decode() for m in cluster_run.dlq)
    assert classes == {"ValidationError": 3, "LateEvent": 1, "MalformedRecord": 1}


def test_stop_ends_both_jvms(cluster_run: ClusterRun) -> None:
    assert cluster_run.was_running
    assert len(cluster_run.cluster_pids) == 3  # one JobManager, two TaskManagers
    assert not any(Path(f"/proc/{pid}").exists() for pid in cluster_run.cluster_pids)
