"""The Grafana dashboard and Prometheus alert rules shipped with the manifests name series the code exports."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml
from prometheus_client import CollectorRegistry

from delivery.evidence import RolloutMetrics
from events.runtime.ops import RuntimeMetrics
from features.freshness import FreshnessTracker
from feedback.monitors.metrics import MonitorMetrics
from infra.k8s_manifests import K8S_ROOT, render
from pricing.metrics import ScorerMetrics

SERIES = re.compile(r"\bpricestream_[a-z0-9_]+")


def _config_maps() -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in render(K8S_ROOT / "base") if d["kind"] == "ConfigMap"}


def _exported() -> set[str]:
    """Every series name (samples included: _bucket, _total, ...) the services' metric classes register."""
    registry = CollectorRegistry()
    RuntimeMetrics(registry, "labels")
    ScorerMetrics(registry)
    FreshnessTracker(registry)
    RolloutMetrics(registry)
    monitor = CollectorRegistry()
    MonitorMetrics(monitor)
    names: set[str] = set()
    for reg in (registry, monitor):  # the monitor's process registers its own per-tier latency histogram
        for family in reg.collect():
            names |= {family.name, *(sample.name for sample in family.samples)}
            # a histogram or counter with no sample yet still names its series
            suffixes = {"histogram": ("_bucket", "_sum", "_count"), "counter": ("_total",)}.get(family.type, ())
            names |= {family.name + suffix for suffix in suffixes}
    return names


def _dashboard() -> dict[str, Any]:
    return json.loads(_config_maps()["pricestream-grafana-dashboards"]["data"]["pricestream.json"])


def _rules() -> list[dict[str, Any]]:
    text = _config_maps()["pricestream-prometheus-rules"]["data"]["pricestream.rules.yaml"]
    return [rule for group in yaml.safe_load(text)["groups"] for rule in group["rules"]]


def test_every_dashboard_panel_queries_series_the_code_exports() -> None:
    exported = _exported()
    panels = _dashboard()["panels"]
    titles = " ".join(p["title"].lower() for p in panels)
    for topic in ("freshness", "lag", "latency", "drift", "flip", "rollout"):
        assert topic in titles, f"no panel about {topic}"
    for panel in panels:
        for target in panel["targets"]:
            named = set(SERIES.findall(target["expr"]))
            assert named, target
            assert named <= exported, f"panel {panel['title']!r}: {sorted(named - exported)} are not exported"


def test_every_alert_rule_names_exported_series_and_says_what_it_means() -> None:
    exported = _exported()
    rules = _rules()
    assert {r["alert"] for r in rules} >= {"PricestreamFeaturesStale", "PricestreamConsumerLagGrowing",
                                          "PricestreamDecisionLatencyHigh", "PricestreamDriftAlarm",
                                          "PricestreamFlipRateHigh", "PricestreamRolloutRolledBack"}
    for rule in rules:
        named = set(SERIES.findall(rule["expr"]))
        assert named and named <= exported, (rule["alert"], sorted(named - exported))
        assert rule["labels"]["severity"] in ("page", "ticket", "info")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
        assert re.fullmatch(r"\d+[smh]", rule.get("for", "0s")), rule


def test_a_renamed_series_would_fail_the_check() -> None:
    assert "pricestream_features_online_freshness_seconds_bucket" in _exported()
    assert "pricestream_features_freshness_seconds_bucket" not in _exported()
