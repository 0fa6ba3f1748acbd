"""Issue 31 item 12: the secure stack's passwords: generated once into a 0600 file, set ones win, none lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import SecretStr

from infra import credentials
from infra.config import StackConfig
from infra.errors import StartError
from pricestream.settings import Settings


def test_missing_passwords_are_generated_once_into_a_private_file(tmp_path: Path) -> None:
    config = StackConfig(state_dir=tmp_path, secure=True, kafka_passwords={"admin": SecretStr("set")})
    filled, path, made = credentials.ensure(config)
    assert len(made) == 14 and "kafka:admin" not in made
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
    assert filled.kafka_passwords["admin"].get_secret_value() == "set"
    assert "admin" not in json.loads(path.read_text())["kafka"]  # a set password is not written down
    _, _, again = credentials.ensure(config)
    assert again == []
    s = Settings(state_dir=tmp_path, secure=True)  # a command of that stack, nothing set
    assert s.stack().redis_passwords["writer"] == filled.redis_passwords["writer"]
    assert s.acting_as("scorer").kafka().sasl_password == filled.kafka_passwords["scorer"]


def test_a_formatted_broker_whose_passwords_are_gone_is_not_given_new_ones(tmp_path: Path) -> None:
    (tmp_path / "kafka" / "data").mkdir(parents=True)
    (tmp_path / "kafka" / "data" / "meta.properties").write_text("cluster.id=x\n")
    with pytest.raises(StartError, match="formatted with SCRAM passwords of"):
        credentials.ensure(StackConfig(state_dir=tmp_path, secure=True))
    assert not credentials.path_of(tmp_path).exists()
