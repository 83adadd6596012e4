"""Through the real CLI: a head whose AGENTS.md makes the agent crash gets a verdict,
`regressed`, not "the evaluation is broken" (which the Action turns into a neutral check).

The agent command exits 1 whenever the checkout's AGENTS.md says `make check` (head's
docs), and answers right otherwise. Half the runs fail, all of them in head: that is what
head's docs did, so the scorecard leads with the regression, and the JSON report says so.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from clirun import run_args
from gitrepo import GitRepo
from toolchain import MAKE_CHECK_TASK, sandbox_config

from docdelta.cli.main import main
from docdelta.scorecard import stats
from docdelta.scorecard.models import Summary

CRASHES_IN_HEAD = (
    "import json, sys; "
    "'make check' in open('AGENTS.md').read() and sys.exit('told to crash'); "
    'print(json.dumps({"answer": "run make check", "commands": ["make check"]}))'
)


@pytest.fixture(autouse=True)
def _ci_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "1")


def test_an_agent_crashing_only_in_head_is_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = GitRepo.init(tmp_path / "proj")
    repo.commit(
        {
            "README.md": "# proj\n",
            "AGENTS.md": "# Agents\nbe nice\n",
            ".docdelta/tasks/test-cmd.yaml": MAKE_CHECK_TASK,
            ".docdelta.yml": sandbox_config(),
        }
    )
    repo.commit({"AGENTS.md": "# Agents\nRun `make check` before you push.\n"})
    agent = f"{sys.executable} -c {shlex.quote(CRASHES_IN_HEAD)}"
    args = run_args(repo, tmp_path / "work", agent, "--repeats", "4")
    main([*args, "--conditions", "base,head"])
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("## docdelta scorecard: regressed"), out[:400]
    assert "This evaluation is broken" not in out
    assert main(["report", "--workdir", str(tmp_path / "work"), "--format", "json"]) == 0
    summary = Summary.model_validate_json(capsys.readouterr().out)
    assert summary.broken is None and summary.faults == {"agent_error": 4}
    assert summary.verdict is not None and summary.verdict.kind == "regressed"
    assert "4 of 4 head runs against 0 of 4 base runs" in summary.verdict.reason
    assert stats.gate(summary.verdict, "regression", refused=summary.verdict_refused).conclusion == "failure"
