"""The image the Kubernetes manifests name: a Dockerfile that lints clean and runs the commands they run."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pricestream.cli import app

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
MANIFESTS = sorted((ROOT / "infra" / "k8s" / "base").glob("*.yaml"))


def _containers() -> list[tuple[str, dict]]:
    out = []
    for path in MANIFESTS:
        for doc in yaml.safe_load_all(path.read_text()):
            spec = ((doc or {}).get("spec") or {}).get("template", {}).get("spec", {})
            out += [(f"{path.name}:{c['name']}", c) for c in spec.get("containers", []) if "image" in c]
    return out


def test_the_dockerfile_lints_clean_with_hadolint() -> None:
    hadolint = shutil.which("hadolint") or str(Path(__import__("sys").executable).with_name("hadolint"))
    done = subprocess.run([hadolint, "--format", "json", str(DOCKERFILE)], capture_output=True, text=True)
    assert json.loads(done.stdout or "[]") == [], done.stdout


def test_the_image_runs_as_a_non_root_user_with_a_health_check_and_the_cli_as_entrypoint() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r'^ENTRYPOINT \["pricestream"\]$', text, re.M)
    assert re.search(r"^USER 10001$", text, re.M)
    assert "HEALTHCHECK" in text and "/healthz" in text
    assert text.count("\nFROM ") + text.startswith("FROM ") >= 2  # multi-stage: no compiler in the runtime stage
    assert "jars.build_udf" in text  # the UDF jar is built in


@pytest.mark.parametrize(("where", "container"), _containers(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_manifest_runs_a_command_the_image_has(where: str, container: dict) -> None:
    assert container["image"].startswith("pricestream/pricestream:")
    args = [a for a in container.get("args", []) if not a.startswith("-")]
    assert args, f"{where}: no command"
    result = CliRunner().invoke(app, [*args, "--help"])
    assert result.exit_code == 0, f"{where}: `pricestream {' '.join(args)}` is no command: {result.output}"
