"""The local Redis Cluster's ports and URL, and the cluster URL parser (no servers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from features.config import FeaturesConfig
from features.connection import cluster_seeds, is_cluster
from features.errors import StoreConfigError
from features.store import feast_redis
from infra import redis_cluster
from infra.config import StackConfig
from infra.errors import StartError


def test_nodes_follow_the_redis_port_masters_first() -> None:
    cfg = StackConfig(state_dir=Path("/tmp/ps-x"), redis_port=36379)
    assert redis_cluster.node_ports(cfg, 3) == [36380, 36381, 36382, 36383, 36384, 36385]
    url = redis_cluster.cluster_url(cfg, 3)
    assert is_cluster(url) and cluster_seeds(url) == [("127.0.0.1", 36380), ("127.0.0.1", 36381), ("127.0.0.1", 36382)]


def test_fewer_than_three_masters_is_refused_naming_the_field() -> None:
    with pytest.raises(StartError, match="field 'redis_cluster': got 2 masters, expected at least 3"):
        redis_cluster.start(StackConfig(state_dir=Path("/tmp/ps-x")), 2)


@pytest.mark.parametrize("url", ["redis+cluster://", "redis+cluster://host", "redis+cluster://h:0", "redis://h:1/0"])
def test_a_bad_cluster_url_names_the_value_and_the_expectation(url: str) -> None:
    with pytest.raises(StoreConfigError, match="redis_url: got .*expected"):
        cluster_seeds(url)


def test_feast_gets_the_cluster_type_and_every_seed_with_the_login() -> None:
    config = FeaturesConfig(redis_url="redis+cluster://a:1,b:2", redis_username="writer")
    assert feast_redis(config) == {"connection_string": "a:1,b:2,username=writer", "redis_type": "redis_cluster"}
    assert feast_redis(FeaturesConfig()) == {"connection_string": "127.0.0.1:6379,db=0", "redis_type": "redis"}
