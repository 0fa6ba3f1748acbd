"""The Kubernetes manifests: every kustomization renders and validates offline, and keeps the N+1 rules."""

from __future__ import annotations

import copy

import pytest
from typer.testing import CliRunner

from infra.k8s_manifests import K8S_ROOT, check_policies, check_services, render, validate
from pricestream.cli import app

KUSTOMIZATIONS = sorted(p.parent for p in K8S_ROOT.rglob("kustomization.yaml"))


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=lambda p: str(p.relative_to(K8S_ROOT)))
def test_every_resource_validates_and_every_serving_tier_keeps_n_plus_one(directory) -> None:
    docs = render(directory)
    assert validate(docs) == []
    assert check_policies(docs) == []
    serving = [d for d in docs if d["kind"] == "Deployment"
               and d["spec"]["template"]["metadata"]["labels"].get("pricestream.io/serving") == "true"]
    assert {d["metadata"]["name"] for d in serving} >= {"pricing-rules", "pricing-light", "heavy"}
    assert all(d["spec"]["replicas"] >= 2 for d in serving)
    deployments = {d["metadata"]["name"] for d in docs if d["kind"] == "Deployment"}
    hpas = [d for d in docs if d["kind"] == "HorizontalPodAutoscaler"]
    assert all(h["spec"]["scaleTargetRef"]["name"] in deployments for h in hpas)
    assert any(d["kind"] == "FlinkDeployment" for d in docs) and any(d["kind"] == "Secret" for d in docs)


def test_the_tiers_scale_as_the_seed_says() -> None:
    hpas = {d["metadata"]["name"]: d["spec"] for d in render(K8S_ROOT / "base")
            if d["kind"] == "HorizontalPodAutoscaler"}
    assert hpas["pricing-rules"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 60
    light = hpas["pricing-light"]["metrics"][0]["pods"]
    assert light["metric"]["name"] == "pricestream_decision_latency_p99_seconds"
    assert light["target"]["averageValue"] == "200m"  # 200 ms
    assert (hpas["heavy"]["minReplicas"], hpas["heavy"]["maxReplicas"]) == (2, 2)


def test_an_overlay_patch_is_merged_into_the_base() -> None:
    prod = {(d["kind"], d["metadata"]["name"]): d for d in render(K8S_ROOT / "overlays" / "production")}
    assert prod[("HorizontalPodAutoscaler", "pricing-light")]["spec"]["minReplicas"] == 3
    dev = {(d["kind"], d["metadata"]["name"]): d for d in render(K8S_ROOT / "overlays" / "dev")}
    container = dev[("Deployment", "pricing-light")]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"]["cpu"] == "250m"
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"  # merged by name, not replaced


def test_broken_manifests_are_reported_naming_resource_and_field() -> None:
    docs = copy.deepcopy(render(K8S_ROOT / "base"))
    by_name = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    light = by_name[("Deployment", "pricing-light")]
    light["spec"]["replicas"] = 1
    del light["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]
    light["spec"]["template"]["spec"]["containers"][0]["resources"]["requestz"] = {}
    by_name[("HorizontalPodAutoscaler", "pricing-rules")]["spec"]["scaleTargetRef"]["name"] = "nowhere"
    by_name[("FlinkDeployment", "feature-job")]["spec"]["job"]["upgradeMode"] = "yolo"
    schema = validate(docs)
    assert any("Deployment/pricing-light" in p and "requestz" in p for p in schema), schema
    assert any("FlinkDeployment/feature-job" in p and "upgradeMode" in p for p in schema), schema
    policy = check_policies(docs)
    assert any("'spec.replicas': got 1, expected >= 2" in p for p in policy)
    assert any("'livenessProbe'" in p for p in policy)
    assert any("targets Deployment 'nowhere'" in p for p in policy)
    assert any("Deployment/pricing-rules: no HorizontalPodAutoscaler" in p for p in policy)


def test_the_command_validates_every_kustomization() -> None:
    result = CliRunner().invoke(app, ["k8s", "validate", "--template"])
    assert result.exit_code == 0, result.output
    assert "overlays/production" in result.output and "N+1" in result.output


def test_a_secret_that_still_holds_a_placeholder_fails_validate() -> None:
    result = CliRunner().invoke(app, ["k8s", "validate", str(K8S_ROOT / "overlays" / "dev")])
    assert result.exit_code != 0
    assert "Secret/pricestream-secrets: key 'PRICESTREAM_AUDIT_KEY' still holds the placeholder" in result.output


def test_manifests_follow_the_service_table() -> None:
    docs = render(K8S_ROOT / "base")
    assert check_services(docs) == []
    labels = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "labels")
    labels["spec"]["template"]["spec"]["containers"][0]["args"] = ["services", "run", "sampler"]
    secret = next(d for d in docs if d["kind"] == "Secret")
    secret["stringData"]["PRICESTREAM_KAFKA_PASSWORDS"] = '{"admin": "x", "writer": "y"}'
    docs = [d for d in docs if not (d["kind"] == "Deployment" and d["metadata"]["name"] == "monitor")]
    problems = check_services(docs)
    assert "Deployment/monitor: missing (expected one per stream service of the table)" in problems
    assert any(p.startswith("Deployment/labels: field 'args'") and "'run', 'labels'" in p for p in problems)
    assert any("no password for ['features', 'labels', 'monitor', 'offline-writer', 'online-writer', 'sampler', "
               "'scorer', 'trainer']" in p for p in problems), problems
