"""The feature job on the standalone cluster that the PyFlink wheel ships.

A private cluster (temp state dir, free REST and RPC ports, small memory) runs the
same scripted sequence as the MiniCluster test in ``test_feature_job.py``; the
output must be the same: every valid event in one tile per view, the same tile
partials, the same DLQ. Then the cluster stops and its JVMs must be gone.
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
from tests.integration.test_feature_job import T0, _final_tiles, publish_scripted

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


@pytest.fixture(scope="module")
def cluster_run(stack: StackConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterRun]:
    cluster = StackConfig(
        state_dir=tmp_path_factory.mktemp("flink-cluster"), cache_dir=stack.cache_dir,
        flink_rest_port=flink_cluster.free_port(), flink_taskmanager_slots=1, flink_process_memory="1024m",
        ready_timeout_s=180.0,
    )
    kafka, job = publish_scripted(stack, "fc", group_id=f"fc-{uuid.uuid4().hex[:8]}",
                                  transactional_id_prefix=f"fc-{uuid.uuid4().hex[:8]}")
    try:
        flink_cluster.start(cluster)
        job_id = flink_cluster.submit_python_job(
            cluster, REPO_ROOT / "pipelines" / "feature_job.py", ["--config-json", job.model_dump_json()]
        )
        state = flink_cluster.wait_for_job(cluster, job_id, timeout_s=300.0)
        jobs = flink_cluster.list_jobs(cluster)
    finally:
        pids = flink_cluster.pids(cluster)
        was_running = flink_cluster.stop(cluster)
    rows = [json.loads(m.value()) for m in read_all(kafka, "features.v1")]
    yield ClusterRun(job_id, state, jobs, rows, read_all(kafka, "behaviour.events.dlq"), pids, was_running)


def test_bounded_job_finishes_on_the_cluster(cluster_run: ClusterRun) -> None:
    assert cluster_run.final_state == "FINISHED"
    listed = {j["jid"]: j for j in cluster_run.jobs}
    assert listed[cluster_run.job_id]["name"] == "pricestream-features"
    assert listed[cluster_run.job_id]["state"] == "FINISHED"


def test_the_same_tiles_as_in_the_minicluster(cluster_run: ClusterRun) -> None:
    tiles = _final_tiles(cluster_run.rows)
    # test_feature_job: 11 valid events for h1, one of them inventory; one search for h2
    for view in ("stay_1h", "stay_24h", "stay_7d", "stay_14d", "hotel_stats"):
        for hotel, n in (("h1", 11), ("h2", 1)):
            assert sum(t["features"]["n"] for t in tiles.values() if t["view"] == view and t["hotel_id"] == hotel) == n
    assert len([r for r in cluster_run.rows if r["view"] == "stay_inventory"]) == 1
    first = tiles[("stay_24h", "h1", "std", "2026-11-20", int(T0.timestamp() * 1000))]
    assert first["features"]["sum:is_view"] == 3.0 and first["features"]["sum:price_shown"] == 310.0
    assert first["rates"] == {"c1": 80.0, "c2": 100.0, "c3": 95.0}


def test_rejected_events_reach_the_dlq(cluster_run: ClusterRun) -> None:
    classes = Counter(dict(m.headers())["error_class"].decode() for m in cluster_run.dlq)
    assert classes == {"ValidationError": 3, "LateEvent": 1, "MalformedRecord": 1}


def test_stop_ends_both_jvms(cluster_run: ClusterRun) -> None:
    assert cluster_run.was_running
    assert len(cluster_run.cluster_pids) == 2  # one JobManager, one TaskManager
    assert not any(Path(f"/proc/{pid}").exists() for pid in cluster_run.cluster_pids)
