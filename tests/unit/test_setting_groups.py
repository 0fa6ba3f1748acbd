"""Settings by component: each field is declared once, in its component's class, under its old variable name."""

from __future__ import annotations

import pytest

from pricestream import setting_groups
from pricestream.settings import Settings

GROUPS = [setting_groups.StackSettings, setting_groups.StoreSettings, setting_groups.ServingSettings,
          setting_groups.AuditSettings, setting_groups.DeliverySettings, setting_groups.ServiceSettings,
          setting_groups.ColdStartSettings, setting_groups.JobSettings]


def test_every_setting_belongs_to_exactly_one_component() -> None:
    owners: dict[str, list[str]] = {}
    for group in GROUPS:
        for name in group.model_fields:
            owners.setdefault(name, []).append(group.__name__)
    assert set(owners) == set(Settings.model_fields)
    assert {name: where for name, where in owners.items() if len(where) != 1} == {}


@pytest.mark.parametrize(("variable", "value", "read"), [
    ("PRICESTREAM_HTTP_PORT", "8123", lambda s: s.http_port == 8123),
    ("PRICESTREAM_COLD_START_SERVE", "false", lambda s: s.cold_start_serve is False),
    ("PRICESTREAM_ROLLOUT_MARGIN", "0.03", lambda s: s.delivery().limits.sequential.margin == 0.03),
    ("PRICESTREAM_BID_CONFIG", "", lambda s: s.bid_config is None),
])
def test_the_environment_names_are_unchanged(monkeypatch: pytest.MonkeyPatch, variable: str, value: str,
                                             read: object) -> None:
    monkeypatch.setenv(variable, value)
    assert callable(read) and read(Settings())
