"""`docdelta run --agent openai --sandbox docker` end to end through the CLI: the wiring
builds the environment image, the gateway (key from the environment, routed by the
project's `.docdelta.yml` to a model server on a network of the test's own), and runs the
built-in agent in gateway mode. Tokens come from the gateway's log, the audit sees which
instruction file reached the model, and the key is nowhere in the results."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from docker_helpers import UPSTREAM_PORT
from gitrepo import GitRepo
from modelserver.script import Script, TextTurn, ToolTurn, TurnUsage
from toolchain import MAKE_CHECK_TASK

from docdelta.agents.models import RunStatus
from docdelta.cli.main import main
from docdelta.results.models import RunResult

pytestmark = pytest.mark.docker

MODEL = "scripted-model"
KEY = f"sk-cli-gateway-{uuid.uuid4().hex}"
ANSWER = {"answer": "Run make check.", "commands": ["make check"]}


@pytest.fixture(scope="module")
def modelserver_script() -> Script:
    """Two runs (base and head), each: one shell call, then the JSON answer."""
    run = [
        ToolTurn.shell("cat AGENTS.md", usage=TurnUsage(input_tokens=300, output_tokens=10)),
        TextTurn(text=json.dumps(ANSWER), usage=TurnUsage(input_tokens=400, output_tokens=20)),
    ]
    return Script(name="cli-gateway", model=MODEL, turns=run * 2)


def test_a_model_agent_runs_through_the_cli_behind_the_gateway(
    tmp_path: Path, egress: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = f"""\
gateway:
  egress_network: {egress}
  upstreams:
    - name: openai
      base_url: http://{egress}-modelserver:{UPSTREAM_PORT}/v1
      paths: ["/chat/completions"]
      base_url_env: [OPENAI_BASE_URL]
      key_env: [OPENAI_API_KEY]
      key_from: OPENAI_API_KEY
  prices:
    {MODEL}: {{input: 0, output: 0}}
"""
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit(
        {
            ".docdelta.yml": config,
            ".docdelta/tasks/t.yaml": MAKE_CHECK_TASK,
            "AGENTS.md": "# Agents\nbe nice\n",
        }
    )
    repo.commit({"AGENTS.md": "# Agents\nRun `make check` before you push.\n"})
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    workdir = tmp_path / "work"
    args = [
        "run", "--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD",
        "--tasks", str(repo.path / ".docdelta/tasks"), "--workdir", str(workdir),
        "--agent", "openai", "--model", MODEL, "--sandbox", "docker",
        "--conditions", "base,head", "--repeats", "1",
    ]  # fmt: skip
    assert main(args) == 0
    # `run` never asks before spending: the forecast says nothing bounds a model agent's spend
    assert "docdelta: forecast: no spend cap: nothing stops the model spend" in capsys.readouterr().err

    results = {
        r.cell.condition: r
        for r in (
            RunResult.model_validate_json(p.read_text()) for p in workdir.glob("runs/*/*/*/r1/result.json")
        )
    }
    assert results.keys() == {"base", "head"}
    for condition, result in results.items():
        assert result.status is RunStatus.ok, (condition, result.outcome.error)
        assert result.isolation == "docker-internal"
        assert len(result.model_calls) == 2 and all(c.status == 200 for c in result.model_calls)
        # tokens as the gateway logged them
        assert (result.outcome.metrics.tokens_in, result.outcome.metrics.tokens_out) == (700, 30)
        assert result.score is not None and result.score.value > 0
        seen = result.instructions_seen
        assert seen is not None and seen.seen == ["AGENTS.md"] and not seen.missing and not seen.foreign, seen
        # The transcript beside the result holds the whole conversation, not only the answer.
        (transcript,) = workdir.glob(f"runs/*/*/{condition}/r1/transcript.txt")
        text = transcript.read_text()
        assert '[tool call] shell {"command": "cat AGENTS.md"}' in text
        assert "[tool result]\nexit code: 0\n# Agents\n" in text and json.dumps(ANSWER) in text
    manifest = json.loads((workdir / "manifest.json").read_text())
    assert manifest["image_digest"].startswith("sha256:")
    assert manifest["agent"] == {
        "name": "openai",
        "version": manifest["agent"]["version"],
        "model": MODEL,
        "settings": {"max_output_tokens": 4096, "max_tool_output": 16000},
        "server": {},
    }
    for path in workdir.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
