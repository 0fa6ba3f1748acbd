"""Issue 31 item 11: under a topic prefix, ``topics create`` on a secure stack grants each principal its topics."""

from __future__ import annotations

import json
import uuid

import pytest
from typer.testing import CliRunner

from infra import kafka_security
from infra.config import StackConfig
from pricestream.cli import app

pytestmark = pytest.mark.integration


def _env(secure: StackConfig, prefix: str) -> dict[str, str]:
    return {"PRICESTREAM_STATE_DIR": str(secure.state_dir), "PRICESTREAM_SECURE": "true",
            "PRICESTREAM_KAFKA_PORT": str(secure.kafka_port), "PRICESTREAM_KAFKA_BOOTSTRAP": secure.kafka_bootstrap,
            "PRICESTREAM_REDIS_PORT": str(secure.redis_port), "PRICESTREAM_REDIS_URL": secure.redis_url,
            "PRICESTREAM_TOPIC_PREFIX": prefix,
            "PRICESTREAM_KAFKA_PASSWORDS": json.dumps({k: v.get_secret_value()
                                                       for k, v in secure.kafka_passwords.items()}),
            **{f"PRICESTREAM_REDIS_{role.upper()}_PASSWORD": v.get_secret_value()
               for role, v in secure.redis_passwords.items()}}


@pytest.mark.parametrize("principal", ["producer", "scorer", "labels", "trainer"])
def test_each_principal_may_use_its_own_topics_right_after_topics_create(secure_stack: StackConfig,
                                                                         principal: str) -> None:
    prefix = f"t{uuid.uuid4().hex[:10]}."
    result = CliRunner().invoke(app, ["topics", "create"], env=_env(secure_stack, prefix))
    assert result.exit_code == 0, result.output
    assert f"bindings for prefix {prefix!r}" in result.output
    conf = kafka_security.client_config(secure_stack, principal) | {"bootstrap.servers": secure_stack.kafka_bootstrap}
    kafka_security.check_access(conf, principal, principal,
                                topic_prefix=prefix)  # raised AccessError (TOPIC_AUTHORIZATION_FAILED) before
