"""Issue 31 item 15: the stock Feast SDK and CLI on ``features/repo`` work against the local stack, nothing exported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import redis
from prometheus_client import CollectorRegistry

from features.config import FeaturesConfig
from features.online_writer import OnlineWriter
from infra.config import REPO_ROOT, StackConfig
from tests.integration._features_helpers import T0_MS, make_row

pytestmark = pytest.mark.integration

ANALYST = """\
from feast import FeatureStore
store = FeatureStore(repo_path="features/repo")
print(json.dumps({"views": sorted(v.name for v in store.list_feature_views()),
                  "online": store.get_online_features(features=["stay_1h:searches_1h"],
                                                      entity_rows=[{"hotel_id": HOTEL, "room_type": "std",
                                                                    "stay_date": "2026-12-24"}]).to_dict()}))
"""


def test_the_stock_sdk_and_cli_find_the_views_and_the_values(stack: StackConfig, tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRICESTREAM_FEAST_")}
    env |= {"PRICESTREAM_STATE_DIR": str(state), "PRICESTREAM_REDIS_URL": stack.redis_url}  # the stack's own
    feast = str(Path(sys.executable).with_name("feast"))
    applied = subprocess.run([feast, "-c", "features/repo", "apply"], cwd=REPO_ROOT, env=env, capture_output=True,
                             text=True, timeout=300, check=False)
    assert applied.returncode == 0, applied.stderr[-2000:]
    assert (state / "data" / "feast" / "registry.db").exists()
    assert not list((REPO_ROOT / "features" / "repo").glob("$*"))  # was: a file named ${PRICESTREAM_FEAST_REGISTRY}
    listed = subprocess.run([feast, "-c", "features/repo", "feature-views", "list"], cwd=REPO_ROOT, env=env,
                            capture_output=True, text=True, timeout=300, check=False).stdout
    assert len([line for line in listed.splitlines()[1:] if line.strip()]) == 6

    hotel = f"h{uuid.uuid4().hex[:10]}"
    now_offset = int(time.time() * 1000) - T0_MS - 60_000  # a minute old: inside stay_1h's TTL
    row = make_row("stay_1h", hotel, version=5, offset_ms=now_offset)
    config = FeaturesConfig(project="pricestream", state_dir=state / "data", redis_url=stack.redis_url)
    assert OnlineWriter(config, registry=CollectorRegistry()).write_rows([row]).written == 1
    try:
        script = "import json\nHOTEL = " + json.dumps(hotel) + "\n" + ANALYST
        done = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        got = json.loads(done.stdout.strip().splitlines()[-1])
        assert got["views"] == ["hotel_stats", "stay_14d", "stay_1h", "stay_24h", "stay_7d", "stay_inventory"]
        assert got["online"]["searches_1h"] == [row.features["searches_1h"]]
    finally:
        host, port, db = config.redis_host_port_db
        client = redis.Redis(host=host, port=port, db=db)
        client.delete(*client.scan_iter(match=f"*{hotel}*".encode(), count=1000))
        client.close()
