"""Two deployments (topic prefixes) of the feature job share no consumer group, transactional id or checkpoints.

The integration test ``test_asof_replay`` reads the transactional ids off a real broker; this one checks
the specs the JVM receives, the checkpoint directories, and the refusal of another job's checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.config import FeatureJobConfig
from pipelines.errors import RestoreMismatch
from pipelines.feature_job import resume_point
from pipelines.identity import check_restore, write_identity
from pipelines.job_specs import sink_spec, source_spec


def _job(prefix: str, root: Path, **extra: object) -> FeatureJobConfig:
    return FeatureJobConfig(connector_jar=Path("/x.jar"), topic_prefix=prefix, checkpoint_dir=root, **extra)


def _ids(config: FeatureJobConfig) -> set[str]:
    sinks = json.loads(sink_spec(config))
    ids = {sinks[s]["transactional_id_prefix"] for s in ("features", "dlq", "accepted")}
    return {json.loads(source_spec(config))["group_id"], *ids}


def test_two_prefixes_use_different_groups_transactional_ids_and_checkpoints(tmp_path: Path) -> None:
    a, b = _job("a.", tmp_path), _job("b.", tmp_path)
    assert {i[:2] for i in _ids(a)} == {"a."} and {i[:2] for i in _ids(b)} == {"b."}
    assert not _ids(a) & _ids(b)
    assert json.loads(source_spec(a))["group_id"] == "a.pricestream-feature-job"
    assert a.checkpoints == tmp_path / "a.features" and b.checkpoints == tmp_path / "b.features"
    assert json.loads(sink_spec(a))["accepted"]["topic"] == "a.behaviour.events.accepted"


def test_a_checkpoint_of_another_deployment_is_refused_and_its_own_restores(tmp_path: Path) -> None:
    a = _job("a.", tmp_path)
    write_identity(a)
    chk = tmp_path / "a.features" / "0f3c" / "chk-7"
    chk.mkdir(parents=True)
    (chk / "_metadata").write_bytes(b"x")
    b = _job("b.", tmp_path)
    assert resume_point(b) is None  # b's own directory holds nothing: a's checkpoint is not picked up
    with pytest.raises(RestoreMismatch, match=r"reading topic 'a.behaviour.events', expected one reading "
                                              r"'b.behaviour.events'"):
        check_restore(b.model_copy(update={"restore_from": chk}))
    assert resume_point(a) == chk
    check_restore(a.model_copy(update={"restore_from": chk}))  # its own: no error
