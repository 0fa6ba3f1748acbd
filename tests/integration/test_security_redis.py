"""Redis ACLs of a secure stack: a real redis-server started by ``infra.redis_server`` with ``secure=True``.

The scorer's user reads feature hashes and nothing else (``NOPERM`` for SET, FLUSHALL, CONFIG);
the writer's user still runs the online writer's compare-and-set Lua script; the
default user is off. A deployment's own Feast project, granted at its start, opens that project's
keys to both users and nothing more.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
import redis
from pydantic import SecretStr

from events.catalog import SPECS, TILED_VIEWS
from features.config import FeaturesConfig
from features.online_source import RedisFeatureSource
from features.online_writer import OnlineWriter, row_key
from features.rows import FeatureRow
from infra import redis_server
from infra.config import StackConfig
from infra.errors import StartError
from tests.integration._features_helpers import T0_MS, make_row
from tests.integration._http_serve import free_port

pytestmark = pytest.mark.integration

PROJECT = f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackConfig]:
    passwords = {role: SecretStr(secrets.token_urlsafe(16)) for role in redis_server.ROLES}
    config = StackConfig(state_dir=tmp_path_factory.mktemp("secure-redis"), redis_port=free_port(), secure=True,
                         feature_project=PROJECT, redis_passwords=passwords)
    redis_server.start(config)
    yield config
    redis_server.stop(config)


def _client(config: StackConfig, role: str) -> redis.Redis:
    return redis.Redis.from_url(redis_server.role_url(config, role), socket_timeout=10.0)


def _features(config: StackConfig, tmp_path: Path) -> FeaturesConfig:
    return FeaturesConfig(project=PROJECT, state_dir=tmp_path, redis_url=config.redis_url)


def test_the_acl_file_holds_no_password(secure: StackConfig) -> None:
    acl = (secure.state_dir / "redis" / "users.acl").read_text()
    assert all(p.get_secret_value() not in acl for p in secure.redis_passwords.values())
    assert (secure.state_dir / "redis" / "users.acl").stat().st_mode & 0o077 == 0


def test_the_default_user_is_off(secure: StackConfig) -> None:
    anonymous = redis.Redis(host=secure.host, port=secure.redis_port, socket_timeout=10.0)
    with pytest.raises(redis.AuthenticationError):
        anonymous.get("anything")
    wrong = redis.Redis(host=secure.host, port=secure.redis_port, username="scorer", password="wrong")
    with pytest.raises(redis.AuthenticationError):
        wrong.ping()


@pytest.mark.parametrize("command", [("SET", f"x{PROJECT}", "1"), ("FLUSHALL",), ("CONFIG", "GET", "maxmemory"),
                                     ("HSET", f"x{PROJECT}", "f", "1"), ("KEYS", "*"), ("EVAL", "return 1", "0")])
def test_the_scorer_gets_noperm_for_writes_and_admin_commands(secure: StackConfig, command: tuple[str, ...]) -> None:
    scorer = _client(secure, "scorer")
    # redis-py maps a NOPERM reply to NoPermissionError (the prefix itself is stripped from the message)
    with pytest.raises(redis.exceptions.NoPermissionError, match="no permissions to run"):
        scorer.execute_command(*command)


def test_the_writer_cannot_touch_keys_outside_its_pattern_nor_flush(secure: StackConfig) -> None:
    writer = _client(secure, "writer")
    with pytest.raises(redis.exceptions.NoPermissionError):
        writer.hset("session:42", "f", "1")
    with pytest.raises(redis.exceptions.NoPermissionError):
        writer.flushall()
    with pytest.raises(redis.exceptions.NoPermissionError):
        writer.execute_command("SET", f"x{PROJECT}", "1")  # hashes only


def _window_row(hotel: str, *, version: int) -> FeatureRow:
    """A windowed view's value row, as the feature job's tile operator writes it."""
    view = SPECS[TILED_VIEWS[0]]
    stay_key = "room_type" in view.keys
    return FeatureRow(hotel_id=hotel, view=view.name, room_type="std" if stay_key else None,
                      stay_date="2026-12-24" if stay_key else None, feature_time=T0_MS + 1000 + version,
                      version=version, publish_time=T0_MS + 1000 + version,
                      features={name: float(version) for name in view.names})


def test_the_writer_compare_and_sets_and_the_scorer_reads(secure: StackConfig, tmp_path: Path) -> None:
    config = _features(secure, tmp_path)
    writer = OnlineWriter(config, client=_client(secure, "writer"))
    first = writer.write_rows([make_row("stay_inventory", "h1", version=5), _window_row("h1", version=5)])
    assert first.written == 2
    stale = writer.write_rows([make_row("stay_inventory", "h1", version=4), _window_row("h1", version=4)])
    assert (stale.written, stale.skipped_stale) == (0, 2)  # the scripts compared versions under the writer's ACL
    newer = writer.write_rows([make_row("stay_inventory", "h1", version=6)])
    assert newer.written == 1
    writer.close()

    admin = _client(secure, "admin")
    assert admin.exists(row_key(make_row("stay_inventory", "h1", version=6), PROJECT)) == 1
    at_write = datetime.fromtimestamp(T0_MS / 1000 + 60, tz=UTC)  # read as of the rows' time (views have a TTL)
    source = RedisFeatureSource(config, client=_client(secure, "scorer"), clock=lambda: at_write)
    read = source.read("h1", "std", date(2026, 12, 24))
    assert read.values["occupancy"] == pytest.approx(0.06)  # version 6 of make_row: occupancy = 6 / 100


def test_a_deployment_project_granted_at_start_opens_its_keys_and_no_others(secure: StackConfig) -> None:
    other = f"d{uuid.uuid4().hex[:10]}"
    scorer, writer = _client(secure, "scorer"), _client(secure, "writer")
    with pytest.raises(redis.exceptions.NoPermissionError):
        writer.hset(f"k:{other}", "f", "1")  # before the grant: the file's project only
    assert redis_server.grant_project(secure.model_copy(update={"feature_project": other})) == ["scorer", "writer"]
    assert writer.hset(f"k:{other}", "f", "1") == 1
    assert scorer.hget(f"k:{other}", "f") == b"1"
    with pytest.raises(redis.exceptions.NoPermissionError):
        scorer.hset(f"k:{other}", "f", "2")  # the grant adds keys, not commands
    with pytest.raises(redis.exceptions.NoPermissionError):
        scorer.hget("k:elsewhere", "f")
    with pytest.raises(StartError, match="feast_project: got 'x\\*', expected letters, digits and underscores"):
        redis_server.grant_project(secure.model_copy(update={"feature_project": "x*"}))
    scorer.close()
    writer.close()
