"""What GitHub's runner needs from action.yml, the Dockerfile and the example workflows,
checked statically (tests/e2e/test_act.py runs them under act)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from docdelta.app import ACTION_SANDBOX_BASE
from docdelta.config import DEFAULT_IMAGE_BASE, DockerImageConfig, ProjectConfig

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / "examples" / "workflows"


def _steps(name: str) -> list[dict[str, Any]]:
    doc = yaml.safe_load((WORKFLOWS / name).read_text())
    return [step for job in doc["jobs"].values() for step in job["steps"]]


def test_the_pr_workflow_runs_for_same_repository_prs_only() -> None:
    doc = yaml.safe_load((WORKFLOWS / "docdelta-pr.yml").read_text())
    condition = doc["jobs"]["evaluate"]["if"].replace(" ", "")
    assert condition == "github.event.pull_request.head.repo.full_name==github.repository"


def test_results_artifacts_include_the_hidden_results_directory() -> None:
    uploads = [s for name in ("docdelta-pr.yml",) for s in _steps(name) if "upload-artifact" in s["uses"]]
    assert uploads
    for step in uploads:
        hidden = any(part.startswith(".") for part in Path(step["with"]["path"]).parts)
        assert not hidden or step["with"].get("include-hidden-files") is True


def test_the_entrypoint_does_not_depend_on_the_runners_path() -> None:
    line = next(x for x in (ROOT / "Dockerfile").read_text().splitlines() if x.startswith("ENTRYPOINT"))
    assert yaml.safe_load(line.removeprefix("ENTRYPOINT"))[0].startswith("/")
    assert "EXTRA_CA_CERT" not in (ROOT / "Dockerfile").read_text()  # a workflow cannot pass build args


def test_the_actions_sandbox_default_is_a_public_image_and_is_documented() -> None:
    assert ProjectConfig().with_image_base(ACTION_SANDBOX_BASE).docker.base == ACTION_SANDBOX_BASE
    assert ACTION_SANDBOX_BASE != DEFAULT_IMAGE_BASE  # the CLI's default exists only where it was built
    chosen = ProjectConfig(docker=DockerImageConfig(base="registry.example/env:1"))
    assert chosen.with_image_base(ACTION_SANDBOX_BASE).docker.base == "registry.example/env:1"  # its own
    inputs = yaml.safe_load((ROOT / "action.yml").read_text())["inputs"]
    assert ACTION_SANDBOX_BASE in inputs["sandbox"]["description"]
    assert ACTION_SANDBOX_BASE in (WORKFLOWS / "docdelta-pr.yml").read_text()
