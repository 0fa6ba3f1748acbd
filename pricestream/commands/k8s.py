"""``pricestream k8s ...``: render and validate the Kubernetes manifests of ``infra/k8s`` offline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pricestream.commands.common import fail, new_app, out, table

app = new_app("The Kubernetes manifests (infra/k8s): render a kustomization, validate it offline.")

_Dir = Annotated[Path | None, typer.Argument(help="a kustomization directory (default: every one under infra/k8s)")]


def _targets(directory: Path | None) -> list[Path]:
    from infra.k8s_manifests import K8S_ROOT

    if directory is not None:
        return [directory]
    return sorted(p.parent for p in K8S_ROOT.rglob("kustomization.yaml"))


@app.command("validate")
def k8s_validate(
    directory: _Dir = None,
    version: Annotated[str | None, typer.Option(envvar="PRICESTREAM_K8S_VERSION", help="Kubernetes schema version")]
    = None,
    template: Annotated[bool, typer.Option(
        "--template", help="the manifests as shipped: Secret placeholders allowed (a deployable one has none)")]
    = False,
) -> None:
    """Every resource against the shipped Kubernetes schemas (and the FlinkDeployment CRD's), the N+1 rules, the
    service table (a Deployment per stream service, a password per principal) and no placeholder secret."""
    from infra.k8s_manifests import (
        KUBERNETES_VERSION,
        ManifestError,
        check_policies,
        check_secrets,
        check_services,
        render,
        validate,
    )

    rows, problems = [], []
    for target in _targets(directory):
        try:
            docs = render(target)
        except ManifestError as exc:
            fail(str(exc))
        found = validate(docs, version=version or KUBERNETES_VERSION) + check_policies(docs) + check_services(docs)
        found += [] if template else check_secrets(docs)
        rows.append((str(target), len(docs), len(found)))
        problems += [f"{target}: {p}" for p in found]
    out.print(table(("kustomization", "resources", "problems"), rows))
    if problems:
        fail("\n".join(problems))
    out.print(f"every resource validates against Kubernetes {version or KUBERNETES_VERSION}; serving tiers keep N+1")


@app.command("render")
def k8s_render(directory: Annotated[Path, typer.Argument(help="a kustomization directory")]) -> None:
    """The rendered resources of one kustomization, as a YAML stream (``kubectl apply -f -`` takes it)."""
    import yaml

    from infra.k8s_manifests import ManifestError, render

    try:
        docs = render(directory)
    except ManifestError as exc:
        fail(str(exc))
    typer.echo("---\n".join(yaml.safe_dump(d, sort_keys=False) for d in docs), nl=False)
