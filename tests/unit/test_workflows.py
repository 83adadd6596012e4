"""What GitHub's runner needs from action.yml, the Dockerfile and the example workflows,
checked statically (tests/e2e/test_act.py runs them under act)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import yaml

from docdelta.action.job import ACTION_SANDBOX_BASE
from docdelta.action.settings import ActionSettings, input_variable
from docdelta.config import ProjectConfig
from docdelta.sandbox.base import DEFAULT_IMAGE_BASE, DockerImageConfig

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


def test_the_receipt_workflow_checks_after_the_evaluation_with_no_agent_and_the_same_gate() -> None:
    """docdelta-receipt.yml: the receipt step parses as Action inputs with no agent, waits for
    the evaluation, and reads the store the evaluation writes, under the same gate and label."""
    doc = yaml.safe_load((WORKFLOWS / "docdelta-receipt.yml").read_text())
    evaluate, receipt = (doc["jobs"][name]["steps"][-1]["with"] for name in ("evaluate", "receipt"))
    assert doc["jobs"]["receipt"]["needs"] == "evaluate"
    assert doc["jobs"]["receipt"]["if"].startswith("always()")  # also when the evaluation was skipped
    assert doc["permissions"]["contents"] == "write"
    for key in ("results-store", "fail-on", "approve-label"):
        assert evaluate[key] == receipt[key]
    env = {input_variable(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in receipt.items()}
    env |= {"GITHUB_REPOSITORY": "o/r", "GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": "e.json"}
    settings = ActionSettings.from_env({**env, "INPUT_GITHUB-TOKEN": "t", "GITHUB_WORKSPACE": "/w"})
    assert settings.receipt and settings.results_store.kind == "branch" and "agent" not in receipt
    assert settings.check_name == "docdelta receipt"


def test_the_image_cache_step_the_docs_show_is_the_pr_workflows() -> None:
    """docs/action.md quotes the `actions/cache` step of docdelta-pr.yml ("Images across
    jobs"): held equal, so the one a reader copies is the one the act test runs."""
    docs = (ROOT / "docs" / "action.md").read_text()
    head = "# in the job, before the docdelta step (as examples/workflows/docdelta-pr.yml has it)\n"
    quoted = docs.split(f"```yaml\n{head}", 1)[1].split("```", 1)[0]
    assert "actions/cache@" in quoted
    assert textwrap.indent(quoted, " " * 6) in (WORKFLOWS / "docdelta-pr.yml").read_text()
    (step,) = (s for s in _steps("docdelta-pr.yml") if s["uses"].startswith("actions/cache@"))
    image_cache = yaml.safe_load(docs.split("```yaml\n# .docdelta.yml\n", 1)[1].split("```", 1)[0])
    assert step["with"]["path"] == image_cache["docker"]["image_cache"]
