"""Arms that differ only in the model, under Docker through the real gateway: each arm's runs
go through a gateway pinned to that arm's model (a Docker gateway pins one), the scripted model
server answers them in plan order, and each arm gets its own runs' scores."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from docker_helpers import UPSTREAM_PORT
from gitrepo import GitRepo
from modelserver.script import Script, TextTurn, TurnUsage
from toolchain import MAKE_CHECK_TASK

from docdelta.agents.models import RunStatus
from docdelta.cli.main import main
from docdelta.results.models import Manifest, RunResult

pytestmark = pytest.mark.docker

KEY = f"sk-arms-{uuid.uuid4().hex}"
GOOD = {"answer": "Run make check.", "commands": ["make check"]}
BAD = {"answer": "Run python setup.py test.", "commands": ["python setup.py test"]}


@pytest.fixture(scope="module")
def modelserver_script() -> Script:
    """The first run the plan starts gets the right answer, the second a wrong one; the model
    reported is the one each request names (`model` unset)."""
    usage = TurnUsage(input_tokens=100, output_tokens=10)
    return Script(
        name="arms",
        turns=[TextTurn(text=json.dumps(GOOD), usage=usage), TextTurn(text=json.dumps(BAD), usage=usage)],
    )


def test_arms_of_two_models_run_behind_gateways_pinned_to_each_model(
    tmp_path: Path, egress: str, monkeypatch: pytest.MonkeyPatch
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
    model-a: {{input: 0, output: 0}}
    model-b: {{input: 0, output: 0}}
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
        "--agent", "openai", "--model", "model-a", "--sandbox", "docker", "--repeats", "1",
        "--arms", "a:model=model-a;b:model=model-b",
    ]  # fmt: skip
    assert main(args) == 0

    manifest = Manifest.model_validate_json((workdir / "manifest.json").read_text())
    assert {n: a.agent.model for n, a in manifest.arms.items()} == {"a": "model-a", "b": "model-b"}
    first, second = (c.condition for c in manifest.order)
    results = {
        r.cell.condition: r
        for r in (
            RunResult.model_validate_json(p.read_text()) for p in workdir.glob("runs/*/*/*/r1/result.json")
        )
    }
    assert results.keys() == {"a", "b"}
    for arm, result in results.items():
        assert result.status is RunStatus.ok, (arm, result.outcome.error)
        assert result.isolation == "docker-internal"
        (call,) = result.model_calls
        assert call.status == 200 and call.model == f"model-{arm}"  # its own gateway's model
        assert result.outcome.model == f"model-{arm}"
    scores = {arm: r.score.value if r.score else None for arm, r in results.items()}
    assert scores == {first: 1.0, second: 0.0}
    for path in workdir.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
