"""A model server that is down or failing is our infrastructure's fault, never the agent's:
`docdelta run --agent openai --sandbox docker` through the real gateway, against an upstream
whose name does not resolve (the gateway answers 502 `upstream failed: Name or service not
known`) and against the scripted model server answering 500 and 502. Every run must be an
`infra_error`: retried, never scored, so no arm gets a score from a run that did nothing."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from docker_helpers import UPSTREAM_PORT
from gitrepo import GitRepo
from modelserver.script import ErrorTurn, Script

from docdelta.agents.models import RunStatus
from docdelta.cli.main import main
from docdelta.results.models import RunResult

pytestmark = pytest.mark.docker

MODEL = "scripted-model"
TASK = """\
id: test-cmd
prompt: How do I run the tests?
gold:
  commands: ["make check"]
  guardrails: ["git push --force"]
reviewed: true
"""
RETRIES = 1
RUNS = 2 * (1 + RETRIES)
"""base and head, one repeat each, every run tried 1 + RETRIES times."""


@pytest.fixture(scope="module")
def modelserver_script() -> Script:
    """Every request fails as an overloaded or broken server fails."""
    turns = [ErrorTurn(error=500, message="boom"), ErrorTurn(error=502, message="bad gateway")]
    return Script(name="upstream-down", model=MODEL, turns=turns * RUNS)


def run_cli(tmp_path: Path, egress: str, host: str, monkeypatch: pytest.MonkeyPatch) -> list[RunResult]:
    config = f"""\
gateway:
  egress_network: {egress}
  upstreams:
    - name: openai
      base_url: http://{host}:{UPSTREAM_PORT}/v1
      paths: ["/chat/completions"]
      base_url_env: [OPENAI_BASE_URL]
      key_env: [OPENAI_API_KEY]
      key_from: OPENAI_API_KEY
  prices:  # the gateway refuses an unpriced model: this one is a free local server
    {MODEL}: {{input: 0, output: 0}}
"""
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit({".docdelta.yml": config, ".docdelta/tasks/t.yaml": TASK, "AGENTS.md": "# Agents\nbe nice\n"})
    repo.commit({"AGENTS.md": "# Agents\nRun `make check` before you push.\n"})
    monkeypatch.setenv("OPENAI_API_KEY", f"sk-down-{uuid.uuid4().hex}")
    workdir = tmp_path / "work"
    args = [
        "run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD",
        "--tasks", str(repo.path / ".docdelta/tasks"), "--workdir", str(workdir),
        "--agent", "openai", "--model", MODEL, "--sandbox", "docker",
        "--conditions", "base,head", "--repeats", "1", "--infra-retries", str(RETRIES),
        "--max-output-tokens", "256",
    ]  # fmt: skip
    main(args)  # the exit code and the scorecard's "no verdict" are the summary's (runner) side
    manifest = json.loads((workdir / "manifest.json").read_text())
    assert manifest["agent"]["settings"]["max_output_tokens"] == 256, "the output cap is in the identity"
    return [RunResult.model_validate_json(p.read_text()) for p in workdir.glob("runs/*/*/*/r1/result.json")]


def assert_never_scored(results: list[RunResult], said: str) -> None:
    assert {r.cell.condition for r in results} == {"base", "head"}
    for result in results:
        assert result.status is RunStatus.infra_error, (result.status, result.outcome.error)
        assert result.attempt == 1 + RETRIES, "an infra error is retried"
        assert result.score is None, "an infra error is never scored (no free guardrail points)"
        assert said in (result.outcome.error or ""), result.outcome.error
        assert result.model_calls and all(c.status >= 500 for c in result.model_calls)


def test_an_upstream_that_does_not_resolve_is_an_infra_error(
    tmp_path: Path, egress: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = run_cli(tmp_path, egress, f"{egress}-no-such-host", monkeypatch)
    assert_never_scored(results, "upstream failed")


def test_an_upstream_answering_5xx_is_an_infra_error(
    tmp_path: Path, egress: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = run_cli(tmp_path, egress, f"{egress}-modelserver", monkeypatch)
    assert_never_scored(results, "HTTP 50")
