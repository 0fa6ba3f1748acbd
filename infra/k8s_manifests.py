"""The Kubernetes manifests of ``infra/k8s``: render a kustomization, validate it offline, check its policies.

:func:`render` reads a ``kustomization.yaml`` the way ``kubectl apply -k`` does for the subset
these manifests use: ``resources`` (files, or directories with their own kustomization),
``namespace``, and ``patches`` given by ``path`` (strategic-merge style: mappings merge key by
key, lists of named items such as ``containers`` merge by ``name``, other lists are replaced).

:func:`validate` checks every resource against the Kubernetes OpenAPI schemas that the
``kubernetes-validate`` package ships (strict: an unknown field is an error; nothing is
downloaded), and the ``FlinkDeployment`` against the JSON schema in ``infra/k8s/schemas``,
written from the Flink Kubernetes operator's CRD.

:func:`check_policies` holds the scaling rules of issue 16: every serving Deployment (label
``pricestream.io/serving=true``) runs at least N+1 = 2 replicas with readiness and liveness
probes on ``/healthz`` and resource requests, has a PodDisruptionBudget and an HPA whose floor
is N+1; every HPA targets a Deployment that exists; the heavy tier is pinned at two.

Example:
    >>> docs = render(K8S_ROOT / "base")
    >>> sorted({d["kind"] for d in docs})[:3]
    ['ConfigMap', 'Deployment', 'FlinkDeployment']
    >>> validate(docs), check_policies(docs)
    ([], [])
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from infra.config import REPO_ROOT
from infra.errors import InfraError
from infra.services import STREAM_SERVICES, TABLE

K8S_ROOT = REPO_ROOT / "infra" / "k8s"
KUBERNETES_VERSION = "1.33.0"
"""Schema version the manifests are validated against (one the validator ships)."""
N_PLUS_ONE = 2
"""Fewest replicas of a serving tier: one can fail or be drained and the tier still answers."""
HEAVY_REPLICAS = 2
SERVING_LABEL = "pricestream.io/serving"
_CLUSTER_SCOPED = frozenset({"Namespace", "PersistentVolume", "ClusterRole", "ClusterRoleBinding", "StorageClass"})
_CRD_SCHEMAS = {("flink.apache.org/v1beta1", "FlinkDeployment"): "flinkdeployment-v1beta1.json"}

Resource = dict[str, Any]


class ManifestError(InfraError):
    """A kustomization or a manifest file cannot be read (names the file and what was expected)."""


def _load_yaml(path: Path) -> list[Resource]:
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    except (OSError, yaml.YAMLError) as exc:
        msg = f"{path}: cannot read it as YAML ({exc})"
        raise ManifestError(msg) from exc
    bad = [i for i, d in enumerate(docs) if not isinstance(d, dict) or "kind" not in d]
    if bad:
        msg = f"{path}: documents {bad} are not Kubernetes resources (expected mappings with a 'kind')"
        raise ManifestError(msg)
    return docs


def render(directory: Path) -> list[Resource]:
    """The resources of the kustomization in ``directory``, patched and namespaced.

    Raises:
        ManifestError: a file is missing or unreadable, or a patch matches no resource.
    """
    directory = Path(directory)
    kustomization = directory / "kustomization.yaml"
    if not kustomization.is_file():
        msg = f"field 'directory': got {str(directory)!r}, expected a directory with a kustomization.yaml"
        raise ManifestError(msg)
    spec = _load_yaml_mapping(kustomization)
    docs: list[Resource] = []
    for entry in spec.get("resources", []):
        target = directory / entry
        docs.extend(render(target) if target.is_dir() else _load_yaml(target))
    for patch in spec.get("patches", []):
        for change in _load_yaml(directory / patch["path"]):
            _apply_patch(docs, change, source=directory / patch["path"])
    namespace = spec.get("namespace")
    if namespace:
        for doc in docs:
            if doc["kind"] not in _CLUSTER_SCOPED:
                doc.setdefault("metadata", {})["namespace"] = namespace
    return docs


def _load_yaml_mapping(path: Path) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        msg = f"{path}: cannot read it as YAML ({exc})"
        raise ManifestError(msg) from exc
    if not isinstance(loaded, dict):
        msg = f"{path}: expected a mapping, got {type(loaded).__name__}"
        raise ManifestError(msg)
    return loaded


def _apply_patch(docs: list[Resource], change: Resource, *, source: Path) -> None:
    name = change.get("metadata", {}).get("name")
    for i, doc in enumerate(docs):
        if doc["kind"] == change["kind"] and doc.get("metadata", {}).get("name") == name:
            merged = merge(doc, change)
            if isinstance(merged, dict):
                docs[i] = merged
            return
    msg = f"{source}: patch of {change['kind']}/{name} matches no resource (expected an existing kind and name)"
    raise ManifestError(msg)


def merge(base: object, patch: object) -> object:
    """``patch`` merged into a copy of ``base`` (mappings by key, lists of named items by ``name``).

    Example:
        >>> merge({"a": 1, "c": [{"name": "x", "v": 1}]}, {"b": 2, "c": [{"name": "x", "v": 3}]})
        {'a': 1, 'c': [{'name': 'x', 'v': 3}], 'b': 2}
    """
    if isinstance(base, dict) and isinstance(patch, dict):
        out = copy.deepcopy(base)
        for key, value in patch.items():
            out[key] = merge(out[key], value) if key in out else copy.deepcopy(value)
        return out
    if isinstance(base, list) and isinstance(patch, list) and _named(base) and _named(patch):
        out_list = copy.deepcopy(base)
        index = {item["name"]: i for i, item in enumerate(out_list)}
        for item in patch:
            if item["name"] in index:
                out_list[index[item["name"]]] = merge(out_list[index[item["name"]]], item)
            else:
                out_list.append(copy.deepcopy(item))
        return out_list
    return copy.deepcopy(patch)


def _named(items: list[Any]) -> bool:
    return bool(items) and all(isinstance(i, dict) and "name" in i for i in items)


def _where(doc: Resource) -> str:
    return f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"


def validate(docs: Iterable[Resource], *, version: str = KUBERNETES_VERSION) -> list[str]:
    """Schema problems of ``docs``, one line each (empty when all validate)."""
    import jsonschema
    import kubernetes_validate

    problems = []
    for doc in docs:
        schema_file = _CRD_SCHEMAS.get((doc.get("apiVersion", ""), doc["kind"]))
        if schema_file is not None:
            schema = json.loads((K8S_ROOT / "schemas" / schema_file).read_text(encoding="utf-8"))
            for error in jsonschema.Draft202012Validator(schema).iter_errors(doc):
                path = ".".join(str(p) for p in error.absolute_path) or "<resource>"
                problems.append(f"{_where(doc)}: field {path!r}: {error.message}")
            continue
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path) or "<resource>"
            problems.append(f"{_where(doc)}: field {path!r}: {exc.message}")
        except (kubernetes_validate.SchemaNotFoundError, kubernetes_validate.InvalidSchemaError) as exc:
            problems.append(f"{_where(doc)}: no Kubernetes {version} schema for {doc.get('apiVersion')} ({exc})")
    return problems


def check_policies(docs: list[Resource]) -> list[str]:
    """Violations of the scaling and redundancy rules (see the module docstring), one line each."""
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    hpas = {d["spec"]["scaleTargetRef"]["name"]: d for d in docs if d["kind"] == "HorizontalPodAutoscaler"}
    pdbs = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    problems = [f"HorizontalPodAutoscaler/{h['metadata']['name']}: targets Deployment {target!r}, which does not exist"
                for target, h in hpas.items()
                if h["spec"]["scaleTargetRef"].get("kind") != "Deployment" or target not in deployments]
    for name, deployment in deployments.items():
        labels = deployment["spec"]["template"]["metadata"].get("labels", {})
        if labels.get(SERVING_LABEL) != "true":
            continue
        problems += _serving_problems(name, deployment, hpas.get(name), pdbs)
    return problems


def _serving_problems(name: str, deployment: Resource, hpa: Resource | None, pdbs: list[Resource]) -> list[str]:
    where = f"Deployment/{name}"
    problems = []
    if int(deployment["spec"].get("replicas", 1)) < N_PLUS_ONE:
        problems.append(f"{where}: field 'spec.replicas': got {deployment['spec'].get('replicas', 1)}, "
                        f"expected >= {N_PLUS_ONE} (N+1)")
    for container in deployment["spec"]["template"]["spec"]["containers"]:
        for probe in ("readinessProbe", "livenessProbe"):
            path = container.get(probe, {}).get("httpGet", {}).get("path")
            if path != "/healthz":
                problems.append(f"{where}: container {container['name']!r} field {probe!r}: got path {path!r}, "
                                "expected an httpGet on /healthz")
        requests = container.get("resources", {}).get("requests", {})
        if not {"cpu", "memory"} <= set(requests):
            problems.append(f"{where}: container {container['name']!r} field 'resources.requests': got "
                            f"{sorted(requests)}, expected cpu and memory")
    if hpa is None:
        problems.append(f"{where}: no HorizontalPodAutoscaler targets it (expected one per serving tier)")
    else:
        low, high = int(hpa["spec"].get("minReplicas", 1)), int(hpa["spec"]["maxReplicas"])
        if low < N_PLUS_ONE:
            problems.append(f"{where}: its HPA's field 'minReplicas': got {low}, expected >= {N_PLUS_ONE} (N+1)")
        tier = deployment["spec"]["template"]["metadata"]["labels"].get("pricestream.io/tier")
        if tier == "heavy" and (low, high) != (HEAVY_REPLICAS, HEAVY_REPLICAS):
            problems.append(f"{where}: the heavy tier's HPA: got min {low} max {high}, expected both {HEAVY_REPLICAS}")
    selector = deployment["spec"]["selector"]["matchLabels"]
    if not any(p["spec"]["selector"].get("matchLabels") == selector for p in pdbs):
        problems.append(f"{where}: no PodDisruptionBudget selects {selector}")
    return problems


PLACEHOLDER = "REPLACE"
"""What the shipped Secret holds where an overlay or a secret manager must put a real value."""
SECRET_NAME = "pricestream-secrets"


def check_services(docs: list[Resource]) -> list[str]:
    """The manifests against the service table (:mod:`infra.services`), one line per disagreement.

    Every stream service runs as a Deployment of its name whose container runs ``services run NAME``, and the
    Secret holds a Kafka password for ``admin`` and for every principal of the table.
    """
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    problems = []
    for service in STREAM_SERVICES:
        deployment = deployments.get(service.name)
        if deployment is None:
            problems.append(f"Deployment/{service.name}: missing (expected one per stream service of the table)")
            continue
        args = [c.get("args") for c in deployment["spec"]["template"]["spec"]["containers"]]
        if service.command.split() not in args:
            problems.append(f"Deployment/{service.name}: field 'args': got {args}, expected a container running "
                            f"{service.command.split()}")
    for secret in _secrets(docs):
        raw = secret.get("stringData", {}).get("PRICESTREAM_KAFKA_PASSWORDS")
        names = set(json.loads(raw)) if isinstance(raw, str) else set()
        wanted = {"admin"} | {s.principal for s in TABLE}
        if raw is not None and not wanted <= names:
            problems.append(f"Secret/{SECRET_NAME}: key 'PRICESTREAM_KAFKA_PASSWORDS': no password for "
                            f"{sorted(wanted - names)}, expected one per principal of the service table")
    return problems


def check_secrets(docs: list[Resource]) -> list[str]:
    """Secret values that still hold the shipped placeholder (a deployable kustomization has none)."""
    problems = []
    for secret in _secrets(docs):
        for key, value in sorted(secret.get("stringData", {}).items()):
            if PLACEHOLDER in str(value):
                problems.append(f"Secret/{secret['metadata']['name']}: key {key!r} still holds the placeholder "
                                f"{PLACEHOLDER!r}, expected a real value (an overlay, sealed-secrets or "
                                "external-secrets supplies it)")
    return problems


def _secrets(docs: list[Resource]) -> list[Resource]:
    return [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == SECRET_NAME]
