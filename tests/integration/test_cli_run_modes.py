"""A PR that touches only files an agent loads on demand (a slash command) or as configuration
(`.claude/settings.json`) is evaluated end to end, and the scorecard says how each is loaded.
A PR adding `.claude/commands/review-pr.md` got "nothing to evaluate"."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from clirun import run_args, saved_results
from gitrepo import GitRepo
from toolchain import sandbox_config

from docdelta.cli.main import main

TASK = """\
id: review
prompt: What does a review of a pull request run first?
gold:
  commands: ["make check"]
reviewed: true
"""
AGENT = """\
import json, pathlib
command = pathlib.Path(".claude/commands/review-pr.md")
said = "make check" if command.is_file() and "make check" in command.read_text() else "tox"
print(json.dumps({"answer": said, "commands": [said]}))
"""


@pytest.fixture(autouse=True)
def _plain_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "1")


@pytest.mark.parametrize(
    ("path", "text", "read_by"),
    [
        (
            ".claude/commands/review-pr.md",
            "Review the PR: run `make check` first, then comment.\n",
            "read by claude_code (on demand: slash command)",
        ),
        (
            ".claude/settings.json",
            '{"permissions": {"allow": ["Bash(make check)"]}}\n',
            "read by claude_code (config: settings (permissions, hooks))",
        ),
    ],
)
def test_a_pr_touching_only_an_on_demand_or_configuration_file_is_evaluated_with_its_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str, text: str, read_by: str
) -> None:
    repo = GitRepo.init(tmp_path / "proj")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "agent.py").write_text(textwrap.dedent(AGENT))
    repo.commit(
        {
            "README.md": "# proj\n",
            "CLAUDE.md": "# Claude\nBe brief.\n",
            ".docdelta.yml": sandbox_config(tmp_path / "bin"),
            ".docdelta/tasks/review.yaml": TASK,
        }
    )
    repo.commit({path: text})
    workdir = tmp_path / "work"
    agent = f"{sys.executable} {tmp_path / 'bin' / 'agent.py'}"
    assert main(run_args(repo, workdir, agent, "--repeats", "1", "--sandbox", "local")) == 0
    out = capsys.readouterr().out
    assert "nothing to evaluate" not in out
    assert f"`{path}` (added; {read_by})" in out
    scores = {r.cell.condition: r.score.value for r in saved_results(workdir) if r.score is not None}
    # Only head's checkout holds the command file; the settings file moves no answer.
    slash = path.endswith(".md")
    assert scores == {"base": 0.0, "head": 1.0 if slash else 0.0, "none": 0.0}
