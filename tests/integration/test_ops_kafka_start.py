"""Issue 31 item 5 on the real broker: a state directory whose saved cluster id begins with ``-`` starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra import kafka
from infra.config import StackConfig
from tests.integration._http_serve import free_port

pytestmark = pytest.mark.integration


def test_a_saved_dash_cluster_id_no_longer_stops_the_broker(stack_config: StackConfig, tmp_path: Path) -> None:
    config = stack_config.model_copy(update={"state_dir": tmp_path, "kafka_port": free_port(),
                                             "kafka_controller_port": free_port(), "kafka_heap": "320m"})
    (tmp_path / "kafka").mkdir()
    (tmp_path / "kafka" / "cluster.id").write_text("-cenBVttRUmIyIhUAhL2EA")  # what a 1-in-64 draw saved
    try:
        kafka.start(config)
        assert kafka.ready(config.kafka_bootstrap)
    finally:
        kafka.stop(config)
    saved = (tmp_path / "kafka" / "cluster.id").read_text()
    meta = (tmp_path / "kafka" / "data" / "meta.properties").read_text()
    assert not saved.startswith("-")
    assert f"cluster.id={saved}" in meta
