"""A stack bound beyond loopback must be secure (issue 15: no open broker or Redis on a network)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from infra.config import StackConfig


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "db.example.org"])
def test_a_stack_bound_beyond_loopback_is_refused_unless_secure(host: str) -> None:
    with pytest.raises(ValidationError, match=f"host: got '{host}' with secure=False"):
        StackConfig(host=host)
    assert StackConfig(host=host, secure=True).secure


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost"])
def test_a_loopback_stack_may_be_open(host: str) -> None:
    assert not StackConfig(host=host).secure
