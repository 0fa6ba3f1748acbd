"""events.redact: credentials out, the address that helps debugging kept."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from events.config import KafkaConfig
from events.redact import MASK, redact, redact_exception
from features.config import FeaturesConfig
from pricing.degraded import FEATURE_STORE_UNAVAILABLE, Degradation


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("redis://user:pa55@10.1.2.3:6379/0", "redis://user:***@10.1.2.3:6379/0"),
        ("rediss://:pa55@cache.internal:6380", "rediss://:***@cache.internal:6380"),
        ("Redis at 'redis://u:p%40ss@h:1/2' failed", "Redis at 'redis://u:***@h:1/2' failed"),
        ("sasl://svc:pa55@k1:9093,k2:9093", "sasl://svc:***@k1:9093,k2:9093"),
        ("h:6379,db=0,password=pa55", "h:6379,db=0,password=***"),
        ("{'sasl.password': 'pa55', 'sasl.username': 'svc'}", "{'sasl.password': '***', 'sasl.username': 'svc'}"),
        ('{"password": "pa ss"}', '{"password": "***"}'),
        ("https://example.test/path?token=abc&x=1", "https://example.test/path?token=***&x=1"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("Error 111 connecting to 127.0.0.1:16391. Connection refused.",
         "Error 111 connecting to 127.0.0.1:16391. Connection refused."),
    ],
)
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_a_literal_secret_goes_wherever_it_appears() -> None:
    assert redact("login as svc with pa55 failed: pa55", secrets=["pa55", None, ""]) == (
        f"login as svc with {MASK} failed: {MASK}")


def test_an_exception_keeps_its_type_and_loses_the_password() -> None:
    exc = ConnectionError("Error connecting to redis://app:hunter2@db:6379")
    assert redact_exception(exc) == "ConnectionError: Error connecting to redis://app:***@db:6379"


def test_the_configured_connection_strings_redact() -> None:
    feast = FeaturesConfig(redis_password=SecretStr("hunter2")).feast_connection_string
    assert "hunter2" in feast and "hunter2" not in redact(feast)
    conf = KafkaConfig(sasl_username="svc", sasl_password=SecretStr("hunter2")).client_conf()
    assert "hunter2" not in redact(repr(conf))


def test_a_degradation_reason_is_redacted_even_when_cut() -> None:
    detail = "x" * 150 + " redis://app:hunter2@cache:6379/0 " + "y" * 100
    reason = Degradation(FEATURE_STORE_UNAVAILABLE, detail).reason
    assert "hunter2" not in reason and "app:***@cache" in reason
